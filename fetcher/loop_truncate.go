package fetcher

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// The loop's side of the truncation decisions (truncation.go): it asks the
// source (OffsetForLeaderEpoch, ListOffsets), reads the log once, decides, and
// carries the decision out.

// diverged handles a Fetch answered with DivergingEpoch d.
func (f *Fetcher) diverged(ps *partState, d epoch.Divergence) {
	f.carryOut(ps, decideDiverging(f.localLog(ps), d, f.policy()))
}

// probeEpoch finds divergence with OffsetForLeaderEpoch as a pre-v12 Kafka
// follower did (decideProbe), one round after another until a round cuts
// nothing. It returns false when ps must not be fetched now.
func (f *Fetcher) probeEpoch(ctx context.Context, ps *partState) bool {
	for {
		le := ps.log.LatestEpoch()
		if le == epoch.UndefinedEpoch {
			ps.needProbe = false
			return true
		}
		answer, ok := f.askEpoch(ctx, ps, le)
		if !ok {
			return false
		}
		d := decideProbe(f.localLog(ps), answer, f.policy())
		if d.cut == cutNone {
			ps.needProbe = false
			return true
		}
		if !f.cut(ps, d) {
			return false
		}
		// d.next is probeNow: ask again with the new latest epoch.
	}
}

// askEpoch sends the OffsetForLeaderEpoch of ps's latest epoch le and returns
// the source's (LeaderEpoch, EndOffset); false when it failed (ps is then
// scheduled for a retry).
func (f *Fetcher) askEpoch(ctx context.Context, ps *partState, le int32) (epoch.Divergence, bool) {
	qctx, cancel := f.requestContext(ctx)
	res, err := f.src.OffsetForLeaderEpoch(qctx, []EpochQuery{{
		Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, LeaderEpoch: le,
	}})
	cancel()
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: OffsetForLeaderEpoch returned %d results", ErrProtocol, len(res))
	}
	if err != nil {
		f.requestFailed(ctx, ps, "OffsetForLeaderEpoch", err)
		return epoch.Divergence{}, false
	}
	if res[0].ErrorCode != CodeNone {
		f.sourceError(ps, "OffsetForLeaderEpoch", res[0].ErrorCode)
		return epoch.Divergence{}, false
	}
	return epoch.Divergence{Epoch: res[0].LeaderEpoch, EndOffset: res[0].EndOffset}, true
}

// outOfRange handles a Fetch at fetchOffset answered with OFFSET_OUT_OF_RANGE:
// it asks the source for its log start and end, then decideOutOfRange.
func (f *Fetcher) outOfRange(ctx context.Context, ps *partState, fetchOffset int64) {
	qctx, cancel := f.requestContext(ctx)
	res, err := f.src.ListOffsets(qctx, []OffsetQuery{
		{Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, Timestamp: LatestTimestamp},
		{Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, Timestamp: EarliestTimestamp},
	})
	cancel()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("%w: ListOffsets returned %d results", ErrProtocol, len(res))
	}
	if err != nil {
		f.requestFailed(ctx, ps, "ListOffsets", err)
		return
	}
	for _, r := range res {
		if r.ErrorCode != CodeNone {
			f.sourceError(ps, "ListOffsets", r.ErrorCode)
			return
		}
	}
	latest, earliest := res[0].Offset, res[1].Offset
	f.carryOut(ps, decideOutOfRange(f.localLog(ps), fetchOffset, earliest, latest, f.policy()))
}

// requestFailed handles a failed request of ps (not an error code): it is
// logged and observed unless the loop is closing, and retried.
func (f *Fetcher) requestFailed(ctx context.Context, ps *partState, op string, err error) {
	if ctx.Err() == nil {
		f.cfg.Logger.Warn(op+" failed", "partition", ps.tp.String(), "err", err)
		f.partitionError(ps, err)
	}
	f.retryLater(ps)
}

func (f *Fetcher) localLog(ps *partState) localLog {
	return localLog{tp: ps.tp, end: ps.log.LogEndOffset(), epochs: ps.log.Epochs()}
}

func (f *Fetcher) policy() policy {
	return policy{probe: f.probe, stopOnDivergence: f.cfg.StopOnDivergence}
}

// carryOut makes d's cut to ps's log, logs and reports it, and goes on as
// d.next says (see also cut). It returns false when ps stopped.
func (f *Fetcher) carryOut(ps *partState, d decision) bool {
	if !f.cut(ps, d) {
		return false
	}
	switch d.next {
	case fetchNow:
		f.succeeded(ps)
	case retryLater:
		f.retryLater(ps)
	case probeNow:
		ps.needProbe = true
		f.succeeded(ps)
	case probeLater:
		ps.needProbe = true
		f.retryLater(ps)
	}
	return true
}

// cut makes d's cut to ps's log and logs and reports it, or stops ps: failed
// (d.cut is cutFail, or the log refused the cut) or, when d.next is
// stopDiverged, after the cut. It returns false when ps stopped.
func (f *Fetcher) cut(ps *partState, d decision) bool {
	from := ps.log.LogEndOffset()
	switch d.cut {
	case cutFail:
		f.fail(ps, d.err)
		return false
	case cutTruncate:
		if err := truncateLog(ps.log, d.offset); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s truncate to %d: %w", ps.tp, d.offset, err))
			return false
		}
	case cutStartAt:
		if err := ps.log.TruncateFullyAndStartAt(d.offset); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s truncate fully at %d: %w", ps.tp, d.offset, err))
			return false
		}
		gap := d.offset - d.lostFrom
		f.cfg.Logger.Warn(d.why, "partition", ps.tp.String(), "fetchOffset", d.fetchOffset, "sourceLogStart", d.offset, "gap", gap)
		f.cfg.Events.OnOutOfRange(ps.tp, d.fetchOffset, d.offset, gap)
	}
	if dv := d.diverged; dv != nil {
		to := ps.log.LogEndOffset()
		f.cfg.Logger.Warn(d.why, "partition", ps.tp.String(), "epoch", dv.Epoch, "endOffset", dv.EndOffset, "from", from, "to", to)
		f.cfg.Events.OnDivergence(ps.tp, *dv, to)
	}
	if d.next == stopDiverged {
		f.publish(ps, &DivergedError{TopicPartition: ps.tp, Divergence: *d.diverged, TruncatedTo: ps.log.LogEndOffset()})
		ps.log = nil
		return false
	}
	return true
}

// truncateLog truncates l as Kafka's UnifiedLog.truncateTo does: a batch that
// contains offset is removed whole (Kafka cuts the segment at the position of
// the batch holding the offset), so the log end becomes that batch's base
// offset and the next fetch re-reads it. Log.Truncate keeps such a batch, which
// would keep divergent records after a truncation inside a batch.
func truncateLog(l Log, offset int64) error {
	if offset < l.LogEndOffset() && offset > l.LogStartOffset() {
		buf, err := l.Read(offset, 1)
		if err != nil {
			return err
		}
		if b, err := records.ParseBatch(buf); err == nil && b.BaseOffset() < offset {
			offset = b.BaseOffset()
		}
	}
	return l.Truncate(offset)
}
