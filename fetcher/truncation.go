package fetcher

import "github.com/kmirror/kmirror/epoch"

// The truncation and out-of-range decisions of the fetch loop, as pure
// functions (spec §7.2 and §7.4; Kafka's AbstractFetcherThread): what to do
// with a partition's destination log when the source answered a Fetch with a
// DivergingEpoch, answered an OffsetForLeaderEpoch probe, or answered a Fetch
// with OFFSET_OUT_OF_RANGE and then named its log start and end (ListOffsets).
// The inputs are plain values read once from the log and the answer; the
// output is a decision that the loop carries out (loop_truncate.go). Nothing
// here does I/O. The traces in testdata/truncation/ cover them.

// cut is the change a decision makes to the destination log.
type cut int8

const (
	cutNone     cut = iota // leave the log as it is
	cutTruncate            // truncate at decision.offset (the batch holding it goes whole)
	cutStartAt             // empty the log and start it at decision.offset
	cutFail                // stop the partition with decision.err; the log is untouched
)

// next is how the loop goes on with the partition once the cut is made.
type next int8

const (
	fetchNow     next = iota // fetch from the log end at once (after a probe: the probe is done)
	retryLater               // fetch after the backoff: the same answer would come back at once
	probeNow                 // ask OffsetForLeaderEpoch again before the next fetch, at once
	probeLater               // ask OffsetForLeaderEpoch after the backoff
	stopDiverged             // stop with a *DivergedError (Config.StopOnDivergence)
)

// localLog is what a decision reads of the destination log.
type localLog struct {
	tp     TopicPartition
	end    int64        // LogEndOffset
	epochs *epoch.Cache // the leader-epoch cache (a clone: decisions only read it)
}

// policy is the part of the loop's configuration the decisions depend on.
type policy struct {
	probe            bool // divergence is found with OffsetForLeaderEpoch (the source never sends DivergingEpoch)
	stopOnDivergence bool // Config.StopOnDivergence
}

// decision is what the loop does with a partition after one answer: the cut,
// the events, then next. Offsets the source no longer holds are never dropped
// silently: a cutStartAt names them (lostFrom up to offset) for
// Events.OnOutOfRange.
type decision struct {
	cut    cut
	offset int64 // cutTruncate: the truncation offset; cutStartAt: the new log start
	err    error // cutFail: a typed error (*InvalidOffsetError)
	// diverged, when set, is reported with Events.OnDivergence after the cut.
	diverged *epoch.Divergence
	// cutStartAt: the refused fetch offset and the first offset lost; the
	// offsets [lostFrom, offset) were never mirrored.
	fetchOffset, lostFrom int64
	next                  next
	why                   string // the log line of the cut
}

// The log lines of the cuts (operators and tests grep for them).
const (
	whyDiverging     = "diverging epoch from source; truncated"
	whyProbe         = "truncated after OffsetForLeaderEpoch"
	whyUnknownEpoch  = "source does not know the latest local epoch; dropped it"
	whySourceBehind  = "source end below destination end; truncated"
	whyBelowLogStart = "fetch offset below source log start: offsets were never mirrored"
)

// decideDiverging is the answer to a Fetch that came back with DivergingEpoch
// d (Fetch v12+, AbstractFetcherThread.truncateOnFetchResponse): truncate to
// epoch.FollowerTruncationOffset and fetch from there, which resolves in more
// round trips where the follower does not know the source's epoch. A
// divergence that cuts nothing is still reported, and the partition retried
// after its backoff, since the same fetch would get the same answer.
func decideDiverging(l localLog, d epoch.Divergence, p policy) decision {
	off := epoch.FollowerTruncationOffset(l.epochs, l.end, d)
	if off < 0 {
		return invalidOffset(l, "Fetch", d.EndOffset)
	}
	dec := decision{diverged: &d, next: fetchNow, why: whyDiverging}
	if off < l.end {
		dec.cut, dec.offset = cutTruncate, off
	} else {
		dec.next = retryLater
	}
	if p.stopOnDivergence {
		dec.next = stopDiverged
	}
	return dec
}

// decideProbe is the answer to an OffsetForLeaderEpoch probe for the log's
// latest epoch (a pre-v12 follower, AbstractFetcherThread
// .getOffsetTruncationState). answer is the source's (LeaderEpoch, EndOffset).
// When the source does not know the epoch at all, answering (-1, -1) (a Kafka
// leader whose log never had it, or kfake's gap for old epochs), the local
// latest epoch is dropped, which can only remove data the source will serve
// again; otherwise the log is truncated to epoch.FollowerTruncationOffset.
// Either way the probe is asked again with the new latest epoch, until it cuts
// nothing (each round shortens the log, so it ends); then the loop fetches.
func decideProbe(l localLog, answer epoch.Divergence, p policy) decision {
	latest, ok := l.epochs.Latest()
	if !ok {
		return decision{next: fetchNow} // no epoch to ask about
	}
	off, why := int64(0), whyProbe
	if answer.EndOffset == epoch.UndefinedOffset || answer.Epoch == epoch.UndefinedEpoch {
		off, why = latest.StartOffset, whyUnknownEpoch
	} else {
		off = epoch.FollowerTruncationOffset(l.epochs, l.end, answer)
	}
	if off < 0 {
		return invalidOffset(l, "OffsetForLeaderEpoch", answer.EndOffset)
	}
	if off >= l.end {
		return decision{next: fetchNow}
	}
	dec := decision{cut: cutTruncate, offset: off, diverged: &answer, next: probeNow, why: why}
	if p.stopOnDivergence {
		dec.next = stopDiverged
	}
	return dec
}

// decideOutOfRange is the answer to OFFSET_OUT_OF_RANGE for fetchOffset once
// ListOffsets named the source log's start and end
// (AbstractFetcherThread.fetchOffsetAndTruncate):
//
//   - the source ends below the destination (an unclean election there): keep
//     the source's end, truncating to it, reported as a divergence with no
//     epoch; then fetch (probing first when the loop probes);
//   - the source starts above the destination's end (retention or
//     DeleteRecords there removed offsets never mirrored): empty the log, start
//     it at the source's start and report the lost offsets;
//   - else the destination's end is inside the source log, so the source did
//     not know the last fetched epoch: find the divergence with the probe,
//     after the backoff.
func decideOutOfRange(l localLog, fetchOffset, sourceStart, sourceEnd int64, p policy) decision {
	switch {
	case sourceEnd < l.end:
		if sourceEnd < 0 {
			return invalidOffset(l, "ListOffsets", sourceEnd)
		}
		d := epoch.Divergence{Epoch: epoch.UndefinedEpoch, EndOffset: sourceEnd}
		dec := decision{cut: cutTruncate, offset: sourceEnd, diverged: &d, next: fetchNow, why: whySourceBehind}
		if p.probe {
			dec.next = probeNow
		}
		if p.stopOnDivergence {
			dec.next = stopDiverged
		}
		return dec
	case sourceStart > l.end:
		return decision{cut: cutStartAt, offset: sourceStart, fetchOffset: fetchOffset, lostFrom: l.end,
			next: fetchNow, why: whyBelowLogStart}
	}
	return decision{next: probeLater}
}

// invalidOffset fails the partition: the source answered an offset no log
// has, where the loop would cut the log to it.
func invalidOffset(l localLog, op string, offset int64) decision {
	return decision{cut: cutFail, err: &InvalidOffsetError{TopicPartition: l.tp, Op: op, Offset: offset}}
}
