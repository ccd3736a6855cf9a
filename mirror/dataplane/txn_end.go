package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// AbortReason says why the site, not the producer, aborted a transaction.
type AbortReason int8

// Reasons of a TxnAbort.
const (
	// AbortFenced: a new producer with the same transactional id called
	// InitProducerId while the old one's transaction was open.
	AbortFenced AbortReason = iota + 1
	// AbortTimeout: the transaction was open longer than its timeout.
	AbortTimeout
	// AbortOrphan: the transaction was open in a writable log with no
	// coordinator state (the site restarted while it was open) for
	// Config.OrphanTransactionTimeout.
	AbortOrphan
)

// String names the reason.
func (r AbortReason) String() string {
	switch r {
	case AbortFenced:
		return "fenced"
	case AbortTimeout:
		return "timeout"
	case AbortOrphan:
		return "orphan"
	}
	return fmt.Sprintf("AbortReason(%d)", int8(r))
}

// TxnAbort reports an ABORT marker the site wrote on its own initiative
// (Config.OnTxnAbort): the records of the producer's open transaction from
// FirstOffset (-1 when not known) up to MarkerOffset stay in the log and are
// skipped by read_committed consumers.
type TxnAbort struct {
	Reason          AbortReason
	TransactionalID string // "" for an orphan
	Topic           string
	Partition       int32
	ProducerID      int64
	ProducerEpoch   int16 // the marker's epoch
	FirstOffset     int64
	MarkerOffset    int64
}

// fence moves e's Ongoing transaction to PrepareAbort with markers at a
// bumped epoch, so the old producer's later requests are fenced, and moves
// the id to the epoch after it (a new producer id when the epoch is
// exhausted). When no new id can be reserved it returns the error and e is
// unchanged. Called with e.op and e.mu held.
func (dp *DataPlane) fence(ctx context.Context, e *txnEntry) error {
	pid, epoch := e.pid, e.epoch+1
	if epochExhausted(epoch) {
		var err error
		if pid, err = dp.pids.id(ctx); err != nil {
			return err
		}
		epoch = 0
	}
	e.markerPID, e.markerEpoch = e.pid, e.epoch+1
	e.prevPID, e.prevEpoch = e.pid, e.epoch
	e.pid, e.epoch = pid, epoch
	e.state = txnPrepareAbort
	return nil
}

// prepare moves e's Ongoing transaction to PrepareCommit or PrepareAbort
// with markers at the producer's own epoch. Called with e.op and e.mu held.
func (e *txnEntry) prepare(commit bool) {
	e.markerPID, e.markerEpoch = e.pid, e.epoch
	e.state = txnPrepareAbort
	if commit {
		e.state = txnPrepareCommit
	}
}

// complete finishes e's PrepareCommit or PrepareAbort: a marker in every
// partition this site appended the transaction's data to, then (commit) the
// staged group offsets through mirror.GroupOffsets, then
// CompleteCommit/CompleteAbort. Each done step is forgotten, so after an
// error a later call resumes where this one stopped (the entry stays in its
// Prepare state meanwhile). A partition that became a mirror partition
// (read-only) since gets no marker and is forgotten: it returns how many,
// over every call that worked on this completion.
// Called with e.op held; reason is non-zero for a site-initiated abort.
func (dp *DataPlane) complete(e *txnEntry, reason AbortReason) (skipped int, err error) {
	e.mu.Lock()
	commit := e.state == txnPrepareCommit
	pid, epoch := e.markerPID, e.markerEpoch
	parts := make([]mirror.TopicPartition, 0, len(e.data))
	bounds := make(map[mirror.TopicPartition]int64, len(e.data))
	for tp, from := range e.data {
		parts = append(parts, tp)
		bounds[tp] = from
	}
	e.mu.Unlock()
	sortPartitions(parts)
	for _, tp := range parts {
		from := bounds[tp]
		ours := func(l fetcher.Log) bool {
			t, ok := openTxn(l, pid)
			return ok && t.FirstOffset >= from
		}
		ev, err := dp.writeMarker(tp, fetcher.TxnMarker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit,
			Timestamp: time.Now().UnixMilli(), OnlyIfWritable: true}, ours)
		switch {
		case errors.Is(err, fetcher.ErrReadOnly):
			e.mu.Lock()
			e.skipped++
			e.mu.Unlock()
		case err != nil:
			return 0, fmt.Errorf("dataplane: transaction %q: marker in %s-%d: %w", e.id, tp.Topic, tp.Partition, err)
		case ev != nil && reason != 0 && dp.cfg.OnTxnAbort != nil:
			ev.Reason, ev.TransactionalID = reason, e.id
			dp.cfg.OnTxnAbort(*ev)
		}
		e.mu.Lock()
		delete(e.data, tp)
		e.mu.Unlock()
	}
	if commit {
		if err := dp.commitStaged(e); err != nil {
			return 0, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state = txnCompleteAbort
	if commit {
		e.state = txnCompleteCommit
	}
	skipped = e.skipped
	e.resetTxn()
	e.partialCommit = commit && skipped > 0
	return skipped, nil
}

// sortPartitions orders tps by topic, then partition.
func sortPartitions(tps []mirror.TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// wroteToMirror reports whether a partition e's transaction appended to is
// now a mirror partition (read-only). Called with e.mu held.
func (dp *DataPlane) wroteToMirror(e *txnEntry) bool {
	for tp := range e.data {
		if dp.readOnly(tp) {
			return true
		}
	}
	return false
}

// commitStaged commits the offsets TxnOffsetCommit staged in e, group by
// group, forgetting each group once committed.
func (dp *DataPlane) commitStaged(e *txnEntry) error {
	e.mu.Lock()
	groups := make([]string, 0, len(e.offsets))
	for g := range e.offsets {
		groups = append(groups, g)
	}
	e.mu.Unlock()
	sort.Strings(groups)
	for _, g := range groups {
		e.mu.Lock()
		offsets := e.offsets[g]
		e.mu.Unlock()
		store := dp.groups()
		if store == nil {
			return fmt.Errorf("dataplane: transaction %q: %w", e.id, errNoGroupStore)
		}
		if err := store.CommitOffsets(g, offsets); err != nil {
			return fmt.Errorf("dataplane: transaction %q: commit offsets of group %q: %w", e.id, g, err)
		}
		e.mu.Lock()
		delete(e.offsets, g)
		e.mu.Unlock()
	}
	return nil
}

var errNoGroupStore = errors.New("dataplane: the destination keeps no group offsets")

// writeMarker writes m into tp under the partition's producer-state lock and
// returns what it wrote, or nil when the producer has no open transaction
// there (nothing was appended, or a fence already closed it), or the topic
// no longer exists. check, when set, is called under the lock and may veto
// the write (the open transaction is not the one this site accepted; an
// orphan no longer is one). A marker with m.OnlyIfWritable into a partition
// that is read-only returns an error Is(fetcher.ErrReadOnly), nothing
// written.
func (dp *DataPlane) writeMarker(tp mirror.TopicPartition, m fetcher.TxnMarker, check func(fetcher.Log) bool) (*TxnAbort, error) {
	spec, ok := dp.dst.Topic(tp.Topic)
	if !ok {
		return nil, nil
	}
	part, code := dp.resolve(spec, tp.Partition)
	switch code {
	case fetcher.CodeNone:
	case fetcher.CodeUnknownTopicOrPartition:
		return nil, nil
	default:
		return nil, fmt.Errorf("dataplane: open %s-%d: code %d", tp.Topic, tp.Partition, code)
	}
	pp := dp.producersOf(tp)
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if check != nil && !check(part.log) {
		return nil, nil
	}
	open, isOpen := openTxn(part.log, m.ProducerID)
	end := part.log.LogEndOffset()
	off, err := fetcher.WriteTxnMarker(part.log, m)
	var me *fetcher.MarkerError
	switch {
	case errors.As(err, &me):
		return nil, nil // nothing of this producer open at or below the marker's epoch
	case errors.Is(err, fetcher.ErrReadOnly):
		return nil, err
	}
	if err != nil {
		pp.loadedEnd = -1
		return nil, err
	}
	if pp.loadedEnd == end {
		pp.loadedEnd = part.log.LogEndOffset() // a marker leaves the sequence state as it was
	}
	dp.appended()
	ev := &TxnAbort{Topic: tp.Topic, Partition: tp.Partition, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		FirstOffset: -1, MarkerOffset: off}
	if isOpen {
		ev.FirstOffset = open.FirstOffset
	}
	return ev, nil
}

// openTxn returns producer pid's open transaction in log.
func openTxn(log fetcher.Log, pid int64) (fetcher.OpenTxn, bool) {
	for _, t := range log.OpenTransactions() {
		if t.ProducerID == pid {
			return t, true
		}
	}
	return fetcher.OpenTxn{}, false
}
