package dataplane

import (
	"context"
	"time"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// orphanKey names one open transaction found in a log.
type orphanKey struct {
	tp          mirror.TopicPartition
	pid         int64
	epoch       int16
	firstOffset int64
}

// checkLoop runs checkTransactions every TransactionCheckInterval until
// Close.
func (dp *DataPlane) checkLoop() {
	defer close(dp.checkDone)
	t := time.NewTicker(dp.cfg.TransactionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-dp.closing:
			return
		case now := <-t.C:
			dp.checkTransactions(now)
		}
	}
}

// checkTransactions resumes every unfinished completion, aborts every
// transaction open longer than its timeout (fencing its producer, as
// Kafka's coordinator does) and every orphan open longer than
// OrphanTransactionTimeout. Errors leave the work for the next check.
func (dp *DataPlane) checkTransactions(now time.Time) {
	dp.checkMu.Lock()
	defer dp.checkMu.Unlock()
	for _, e := range dp.coord.all() {
		e.op.Lock()
		e.mu.Lock()
		// A fence that cannot reserve a new producer id leaves the entry
		// Ongoing: tried again at the next check.
		expired := e.state == txnOngoing && now.Sub(e.started) > e.timeout && dp.fence(context.Background(), e) == nil
		e.mu.Unlock()
		switch {
		case expired:
			_, _ = dp.complete(e, AbortTimeout) // on error the entry stays PrepareAbort: resumed next time
		case pending(e):
			_, _ = dp.complete(e, 0)
		}
		e.op.Unlock()
	}
	dp.abortOrphans(now)
}

// abortOrphans aborts the open transactions of writable logs that no
// coordinator entry owns once they have been seen open for
// OrphanTransactionTimeout. They are left by a restart (coordinator state
// is in memory) and can never be committed: every later request of their
// producer is refused for want of a coordinator entry. Read-only (mirror)
// partitions are skipped: their open transactions are the source's, ended
// by mirrored markers or by STOPPING. Called with checkMu held.
func (dp *DataPlane) abortOrphans(now time.Time) {
	seen := map[orphanKey]bool{}
	for _, spec := range dp.dst.Topics() {
		for p := int32(0); p < spec.Partitions; p++ {
			tp := mirror.TopicPartition{Topic: spec.Name, Partition: p}
			if dp.dst.ReadOnly(tp.Topic, tp.Partition) {
				continue
			}
			part, code := dp.resolve(spec, p)
			if code != fetcher.CodeNone || part.log.ReadOnly() {
				continue
			}
			for _, t := range part.log.OpenTransactions() {
				if dp.coord.owns(tp, t.ProducerID) {
					continue
				}
				k := orphanKey{tp: tp, pid: t.ProducerID, epoch: t.ProducerEpoch, firstOffset: t.FirstOffset}
				seen[k] = true
				first, ok := dp.orphans[k]
				if !ok {
					dp.orphans[k] = now
					continue
				}
				if now.Sub(first) >= dp.cfg.OrphanTransactionTimeout {
					dp.abortOrphan(k)
				}
			}
		}
	}
	for k := range dp.orphans {
		if !seen[k] {
			delete(dp.orphans, k)
		}
	}
}

// abortOrphan writes the ABORT marker of orphan k at its own producer epoch,
// after checking again under the partition's lock that it is still open,
// unowned and writable.
func (dp *DataPlane) abortOrphan(k orphanKey) {
	still := func(l fetcher.Log) bool {
		t, ok := openTxn(l, k.pid)
		return ok && !l.ReadOnly() && t.ProducerEpoch == k.epoch && t.FirstOffset == k.firstOffset && !dp.coord.owns(k.tp, k.pid)
	}
	ev, err := dp.writeMarker(k.tp, fetcher.TxnMarker{ProducerID: k.pid, ProducerEpoch: k.epoch, Timestamp: time.Now().UnixMilli(),
		OnlyIfWritable: true}, still)
	if err != nil || ev == nil {
		return // retried at the next check while still open
	}
	delete(dp.orphans, k)
	if dp.cfg.OnTxnAbort != nil {
		ev.Reason = AbortOrphan
		dp.cfg.OnTxnAbort(*ev)
	}
}
