package epoch

import (
	"errors"
	"fmt"
)

// Divergence is the DivergingEpoch of a Fetch response (Kafka's FetchResponseData.EpochEndOffset):
// the leader's (epoch, end offset) for the follower's last fetched epoch. A response carries a
// divergence only when Epoch ≥ 0 (Kafka's FetchResponse.isDivergingEpoch).
type Divergence struct {
	Epoch     int32
	EndOffset int64
}

// ErrOffsetOutOfRange is matched by the error CheckFetch returns where a Kafka leader answers
// a fetch with OFFSET_OUT_OF_RANGE.
var ErrOffsetOutOfRange = errors.New("epoch: offset out of range")

// OutOfRangeError says why CheckFetch answers OFFSET_OUT_OF_RANGE. It matches
// ErrOffsetOutOfRange with errors.Is.
type OutOfRangeError struct {
	FetchOffset      int64
	LastFetchedEpoch int32
	LogStartOffset   int64
	Reason           string
}

// Error implements error.
func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("%v: fetch offset %d, last fetched epoch %d, log start %d: %s",
		ErrOffsetOutOfRange, e.FetchOffset, e.LastFetchedEpoch, e.LogStartOffset, e.Reason)
}

// Is reports whether target is ErrOffsetOutOfRange.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// LeaderDivergence is the diverging-epoch check a Kafka leader runs on a fetch carrying
// (lastFetchedEpoch, fetchOffset) before it reads (Partition.readRecords): with
// (epoch, end) = c.EndOffsetFor(lastFetchedEpoch, logEnd), the fetcher has diverged when
// epoch < lastFetchedEpoch or end < fetchOffset, and the answer is Divergence{epoch, end}.
//
// A negative lastFetchedEpoch means "not given" (Kafka maps any negative value to an empty
// Optional): no check, no divergence. When the end offset of lastFetchedEpoch is unknown (an
// empty cache, or an epoch above the latest) Kafka answers OFFSET_OUT_OF_RANGE instead of a
// divergence; LeaderDivergence then returns (Divergence{UndefinedEpoch, UndefinedOffset},
// true), which a fetch response must not carry. Use CheckFetch to get Kafka's exact answer
// including the log-start check.
func LeaderDivergence(c *Cache, logEnd int64, lastFetchedEpoch int32, fetchOffset int64) (d Divergence, diverged bool) {
	if lastFetchedEpoch < 0 {
		return Divergence{Epoch: UndefinedEpoch, EndOffset: UndefinedOffset}, false
	}
	ep, end := c.EndOffsetFor(lastFetchedEpoch, logEnd)
	if ep == UndefinedEpoch || end == UndefinedOffset {
		return Divergence{Epoch: UndefinedEpoch, EndOffset: UndefinedOffset}, true
	}
	if ep < lastFetchedEpoch || end < fetchOffset {
		return Divergence{Epoch: ep, EndOffset: end}, true
	}
	return Divergence{Epoch: UndefinedEpoch, EndOffset: UndefinedOffset}, false
}

// CheckFetch is the whole epoch part of a Kafka leader's fetch validation
// (Partition.readRecords), in Kafka's order, for a fetch with a last fetched epoch:
//
//  1. the end offset of lastFetchedEpoch is unknown → OFFSET_OUT_OF_RANGE;
//  2. fetchOffset < logStart → OFFSET_OUT_OF_RANGE, whether or not the epochs diverge;
//  3. the LeaderDivergence rule → a Divergence to answer with.
//
// A negative lastFetchedEpoch skips all three (Kafka then goes on to its ordinary read,
// which has its own range checks). The error is an *OutOfRangeError matching
// ErrOffsetOutOfRange. The leader-epoch (FENCED/UNKNOWN_LEADER_EPOCH) check Kafka runs
// first is not part of this function.
func CheckFetch(c *Cache, logStart, logEnd int64, lastFetchedEpoch int32, fetchOffset int64) (Divergence, bool, error) {
	none := Divergence{Epoch: UndefinedEpoch, EndOffset: UndefinedOffset}
	if lastFetchedEpoch < 0 {
		return none, false, nil
	}
	ep, end := c.EndOffsetFor(lastFetchedEpoch, logEnd)
	if ep == UndefinedEpoch || end == UndefinedOffset {
		return none, false, &OutOfRangeError{FetchOffset: fetchOffset, LastFetchedEpoch: lastFetchedEpoch,
			LogStartOffset: logStart, Reason: "end offset of the last fetched epoch is unknown"}
	}
	if fetchOffset < logStart {
		return none, false, &OutOfRangeError{FetchOffset: fetchOffset, LastFetchedEpoch: lastFetchedEpoch,
			LogStartOffset: logStart, Reason: "fetch offset below the log start offset"}
	}
	if ep < lastFetchedEpoch || end < fetchOffset {
		return Divergence{Epoch: ep, EndOffset: end}, true, nil
	}
	return none, false, nil
}

// FollowerTruncationOffset is the offset a Kafka follower truncates its log to when a fetch
// response carries DivergingEpoch d (AbstractFetcherThread.getOffsetTruncationState, via
// truncateOnFetchResponse). It is FollowerTruncation without the completeness flag.
func FollowerTruncationOffset(c *Cache, logEnd int64, d Divergence) int64 {
	off, _ := FollowerTruncation(c, logEnd, d)
	return off
}

// FollowerTruncation returns where a Kafka follower truncates on DivergingEpoch d, and
// whether Kafka considers the truncation complete. The offset is never above logEnd. With
// (ep, end) = c.EndOffsetFor(d.Epoch, logEnd), in Kafka's order:
//
//  1. d.EndOffset undefined → logEnd, complete (Kafka truncates to its current fetch offset,
//     which for a fetching follower is its log end).
//  2. d.Epoch undefined → min(d.EndOffset, logEnd), complete.
//  3. end undefined (empty cache, or d.Epoch above the local latest epoch) →
//     min(d.EndOffset, logEnd), complete.
//  4. ep != d.Epoch (the follower does not know the leader's epoch) → min(end, logEnd), not
//     complete: the follower truncates to the end of its own largest epoch below d.Epoch and
//     the next fetch, with the new lower last fetched epoch, resolves the rest.
//  5. otherwise → min(end, d.EndOffset, logEnd), complete.
//
// With truncation on fetch (Fetch v12+) Kafka goes back to fetching from the returned offset
// in every case, with LastFetchedEpoch = the latest epoch left in the cache after the
// truncation; the incomplete case just takes one more round trip.
func FollowerTruncation(c *Cache, logEnd int64, d Divergence) (offset int64, complete bool) {
	if d.EndOffset == UndefinedOffset {
		return logEnd, true
	}
	if d.Epoch == UndefinedEpoch {
		return min(d.EndOffset, logEnd), true
	}
	ep, end := c.EndOffsetFor(d.Epoch, logEnd)
	if end == UndefinedOffset {
		return min(d.EndOffset, logEnd), true
	}
	if ep != d.Epoch {
		return min(end, logEnd), false
	}
	return min(end, d.EndOffset, logEnd), true
}

// LMETruncationOffset translates the last mirror epoch (LME) obtained from the other cluster
// into the offset this log must be truncated to before mirroring starts (KIP-1279 §6.3 step
// 6): the end offset of epoch lme in the local cache — the start of the first local epoch
// above lme, or logEnd when there is none. Every record of an epoch ≤ lme is kept, every
// record of a higher epoch removed.
//
// full is true when the log must instead be truncated completely and mirrored from the
// source's log-start offset; offset is then logStart. That is the case when lme is negative
// (-1: no LME known, KIP §6.3 step 5), when the cache is empty although lme is given (no
// local record can be shown to belong to an epoch ≤ lme), and when the end offset found is
// below logStart (nothing left to keep). Otherwise offset is in [logStart, logEnd].
func LMETruncationOffset(c *Cache, logStart, logEnd int64, lme int32) (offset int64, full bool) {
	if lme < 0 || c.Len() == 0 {
		return logStart, true
	}
	_, end := c.EndOffsetFor(lme, logEnd)
	if end == UndefinedOffset {
		// lme is above every local epoch: all local data belongs to epochs < lme.
		return logEnd, false
	}
	if end < logStart {
		return logStart, true
	}
	return min(end, logEnd), false
}
