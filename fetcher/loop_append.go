package fetcher

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/records"
)

// isData reports whether r carries records to append rather than an error
// or a divergence.
func isData(r FetchResult) bool { return r.ErrorCode == CodeNone && r.DivergingEpoch == nil }

// appendAll runs checkAndAppend for every data answer of res, on up to
// Config.Appenders goroutines at once (the loop goroutine included), and
// returns each partition's outcome. Each partState and Log is touched by
// exactly one goroutine; nothing here reports events or logs.
func (f *Fetcher) appendAll(ready []*partState, reqs []FetchPartition, res []FetchResult) []appendOutcome {
	outs := make([]appendOutcome, len(ready))
	var work []int
	for i := range ready {
		if isData(res[i]) {
			work = append(work, i)
		}
	}
	inParallel(len(work), f.cfg.Appenders, func(k int) {
		i := work[k]
		outs[i] = checkAndAppend(ready[i], reqs[i], res[i])
	})
	return outs
}

// inParallel calls fn(0) … fn(n-1) on up to workers goroutines, the caller's
// among them, and returns when every call has returned.
func inParallel(n, workers int, fn func(int)) {
	if workers <= 1 || n <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			fn(i)
		}
	}
	var wg sync.WaitGroup
	for range min(workers, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// appendOutcome is what checkAndAppend did with one partition's data.
type appendOutcome struct {
	appended  int64 // bytes appended
	records   int64 // records in the appended batches
	maxTs     int64 // largest MaxTimestamp of the appended batches, -1 for none
	stopErr   error // *CorruptBatchError or *EpochFencingError at the first refused batch
	appendErr error // the Log refused the append
	partial   bool  // nothing whole came back, only the start of a batch
}

// checkAndAppend checks each fetched batch (CRC, header sanity, leader
// epochs) and appends the good ones, up to the first refused one, to the log
// unchanged. It touches only ps and its Log, so partitions run in parallel.
func checkAndAppend(ps *partState, req FetchPartition, r FetchResult) appendOutcome {
	ps.hw = r.HighWatermark
	next := req.FetchOffset
	start, end := -1, 0
	out := appendOutcome{maxTs: -1}
	var recs, maxTs int64 = 0, -1
	it := records.NewIterator(r.Records)
	for it.Next() {
		b := it.Batch()
		pos := it.Pos()
		bstart := pos - len(b)
		if start < 0 && b.NextOffset() <= req.FetchOffset {
			continue // a whole batch below the fetch offset (compacted source)
		}
		if b.BaseOffset() < next {
			if start >= 0 || !startsInsideFirstBatch(ps.log, next) {
				out.stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(),
					Reason: fmt.Sprintf("base offset %d overlaps the expected offset %d", b.BaseOffset(), next)}
				break
			}
			// The source's log start fell inside this batch (retention or DeleteRecords
			// cut mid-batch) and the log is empty at it: start the log at the batch's base
			// offset and keep the whole batch, as Kafka's follower does on an
			// UnexpectedAppendOffsetException. Nothing is dropped: the log held nothing.
			if err := ps.log.TruncateFullyAndStartAt(b.BaseOffset()); err != nil {
				out.appendErr = err
				return out
			}
			next = b.BaseOffset()
		}
		if r.HighWatermark >= 0 && b.BaseOffset() >= r.HighWatermark {
			break // never above the high watermark
		}
		if err := b.VerifyCRC(); err != nil {
			out.stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(), Reason: "CRC mismatch", Err: err}
			break
		}
		if b.LastOffsetDelta() < 0 || b.NumRecords() < 0 {
			out.stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(),
				Reason: fmt.Sprintf("invalid header: lastOffsetDelta %d, records %d", b.LastOffsetDelta(), b.NumRecords())}
			break
		}
		if ple := b.PartitionLeaderEpoch(); ple > ps.log.LeaderEpoch() {
			out.stopErr = &EpochFencingError{TopicPartition: ps.tp, Offset: b.BaseOffset(), BatchEpoch: ple, LocalEpoch: ps.log.LeaderEpoch()}
			break
		} else if ps.sourceEpoch >= 0 && ple > ps.sourceEpoch {
			// Stale source metadata (spec §7.3 rule 3): refresh, then refetch.
			ps.needInfo = true
			break
		}
		if start < 0 {
			start = bstart
		}
		end = pos
		next = b.NextOffset()
		recs += int64(b.NumRecords())
		maxTs = max(maxTs, b.MaxTimestamp())
	}
	if out.stopErr == nil && it.Err() != nil {
		out.stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: next, Reason: "malformed batch", Err: it.Err()}
	}
	if start >= 0 && end > start {
		if err := appendVerified(ps.log, r.Records[start:end]); err != nil {
			out.appendErr = err
			return out
		}
		out.appended = int64(end - start)
		out.records, out.maxTs = recs, maxTs
	}
	out.partial = out.appended == 0 && it.Partial() && len(r.Records) > 0
	return out
}

// startsInsideFirstBatch reports whether l is empty at offset next, so the first fetched
// batch may begin below it.
func startsInsideFirstBatch(l Log, next int64) bool {
	return l.LogStartOffset() == next && l.LogEndOffset() == next
}

// appended reports what checkAndAppend did with ps's data and sets the
// partition's next step.
func (f *Fetcher) appended(ps *partState, req FetchPartition, r FetchResult, out appendOutcome) {
	if out.appendErr != nil {
		f.fail(ps, fmt.Errorf("fetcher: %s append at %d: %w", ps.tp, req.FetchOffset, out.appendErr))
		return
	}
	switch e := out.stopErr.(type) {
	case nil:
	case *EpochFencingError:
		f.cfg.Logger.Warn("epoch fencing: stopping partition", "partition", ps.tp.String(),
			"offset", e.Offset, "batchEpoch", e.BatchEpoch, "localEpoch", e.LocalEpoch)
		f.publish(ps, e)
		f.cfg.Events.OnEpochFencing(ps.tp, e.BatchEpoch, e.LocalEpoch)
		ps.log = nil
		return
	default:
		f.fail(ps, out.stopErr)
		return
	}
	if out.partial {
		// Only a partial batch came back: allow a larger answer next time.
		ps.maxBytes = min(ps.maxBytes*2, 1<<30)
	}
	leo := ps.log.LogEndOffset()
	f.cfg.Events.OnProgress(ps.tp, Progress{
		Lag: max(0, r.HighWatermark-leo), Bytes: out.appended, SourceHighWatermark: r.HighWatermark, LogEndOffset: leo,
		Records: out.records, MaxTimestamp: out.maxTs,
	})
	if ps.needInfo {
		ps.failingSince, ps.lastErr, ps.lastOK = time.Time{}, nil, time.Now() // data came back: the source answers
		f.retryLater(ps)
		return
	}
	f.succeeded(ps)
}

// preverifiedAppender is implemented by this package's logs: Append for
// batches whose CRCs the caller has just verified, skipping only that check
// (each batch's CRC is computed once on the mirror path).
type preverifiedAppender interface {
	appendPreverified(batches []byte) error
}

var (
	_ preverifiedAppender = (*FileLog)(nil)
	_ preverifiedAppender = (*MemoryLog)(nil)
)

// appendVerified appends batches the loop has CRC-checked to l. Only this
// package's own log types take the short path (matched by concrete type, so
// a host type embedding one and overriding Append still gets its Append
// called); every other Log gets Append.
func appendVerified(l Log, batches []byte) error {
	switch l := l.(type) {
	case *FileLog:
		return l.appendPreverified(batches)
	case *MemoryLog:
		return l.appendPreverified(batches)
	}
	return l.Append(batches)
}
