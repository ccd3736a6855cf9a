package fetcher

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// probeEpoch finds divergence with OffsetForLeaderEpoch as a pre-v12 Kafka
// follower did (AbstractFetcherThread.getOffsetTruncationState). Where the
// source does not know the latest local epoch at all, answering (-1, -1) (a
// Kafka leader whose log never had the epoch, or kfake's gap for old epochs),
// the local latest epoch is dropped and the probe repeated: that can only
// remove data the source will serve again, never keep divergent data. It
// returns false when ps must not be fetched now.
func (f *Fetcher) probeEpoch(ctx context.Context, ps *partState) bool {
	le := ps.log.LatestEpoch()
	if le == epoch.UndefinedEpoch {
		ps.needProbe = false
		return true
	}
	res, err := f.src.OffsetForLeaderEpoch(ctx, []EpochQuery{{
		Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, LeaderEpoch: le,
	}})
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: OffsetForLeaderEpoch returned %d results", ErrProtocol, len(res))
	}
	if err != nil {
		if ctx.Err() == nil {
			f.cfg.Logger.Warn("OffsetForLeaderEpoch failed", "partition", ps.tp.String(), "err", err)
			f.partitionError(ps, err)
		}
		f.retryLater(ps)
		return false
	}
	r := res[0]
	if r.ErrorCode != CodeNone {
		f.sourceError(ps, "OffsetForLeaderEpoch", r.ErrorCode)
		return false
	}
	leo := ps.log.LogEndOffset()
	var off int64
	if r.EndOffset == epoch.UndefinedOffset || r.LeaderEpoch == epoch.UndefinedEpoch {
		latest, _ := ps.log.Epochs().Latest()
		off = latest.StartOffset
		f.cfg.Logger.Warn("source does not know the latest local epoch; dropping it and probing again",
			"partition", ps.tp.String(), "epoch", le, "truncateTo", off)
	} else {
		off = epoch.FollowerTruncationOffset(ps.log.Epochs(), leo, epoch.Divergence{Epoch: r.LeaderEpoch, EndOffset: r.EndOffset})
	}
	if off >= leo {
		ps.needProbe = false
		return true
	}
	if err := truncateLog(ps.log, off); err != nil {
		f.fail(ps, fmt.Errorf("fetcher: %s truncate to %d: %w", ps.tp, off, err))
		return false
	}
	f.cfg.Logger.Warn("truncated after OffsetForLeaderEpoch", "partition", ps.tp.String(),
		"epoch", r.LeaderEpoch, "endOffset", r.EndOffset, "from", leo, "to", ps.log.LogEndOffset())
	d := epoch.Divergence{Epoch: r.LeaderEpoch, EndOffset: r.EndOffset}
	f.cfg.Events.OnDivergence(ps.tp, d, ps.log.LogEndOffset())
	if f.stopDiverged(ps, d) {
		return false
	}
	// Probe again with the new latest epoch; it ends when nothing changes.
	return f.probeEpoch(ctx, ps)
}

func (f *Fetcher) diverged(ps *partState, d epoch.Divergence) {
	leo, le := ps.log.LogEndOffset(), ps.log.LatestEpoch()
	off := epoch.FollowerTruncationOffset(ps.log.Epochs(), leo, d)
	if off < leo {
		if err := truncateLog(ps.log, off); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s truncate to %d: %w", ps.tp, off, err))
			return
		}
	}
	f.cfg.Logger.Warn("diverging epoch from source; truncated", "partition", ps.tp.String(),
		"epoch", d.Epoch, "endOffset", d.EndOffset, "from", leo, "to", ps.log.LogEndOffset())
	f.cfg.Events.OnDivergence(ps.tp, d, ps.log.LogEndOffset())
	if f.stopDiverged(ps, d) {
		return
	}
	if ps.log.LogEndOffset() == leo && ps.log.LatestEpoch() == le {
		// Nothing changed: the next fetch would diverge the same way.
		f.retryLater(ps)
		return
	}
	f.succeeded(ps)
}

// stopDiverged stops ps after a divergence truncation when so configured.
func (f *Fetcher) stopDiverged(ps *partState, d epoch.Divergence) bool {
	if !f.cfg.StopOnDivergence {
		return false
	}
	f.publish(ps, &DivergedError{TopicPartition: ps.tp, Divergence: d, TruncatedTo: ps.log.LogEndOffset()})
	ps.log = nil
	return true
}

// outOfRange follows AbstractFetcherThread.fetchOffsetAndTruncate.
func (f *Fetcher) outOfRange(ctx context.Context, ps *partState, fetchOffset int64) {
	res, err := f.src.ListOffsets(ctx, []OffsetQuery{
		{Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, Timestamp: LatestTimestamp},
		{Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, Timestamp: EarliestTimestamp},
	})
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("%w: ListOffsets returned %d results", ErrProtocol, len(res))
	}
	if err != nil {
		if ctx.Err() == nil {
			f.cfg.Logger.Warn("ListOffsets failed", "partition", ps.tp.String(), "err", err)
			f.partitionError(ps, err)
		}
		f.retryLater(ps)
		return
	}
	for _, r := range res {
		if r.ErrorCode != CodeNone {
			f.sourceError(ps, "ListOffsets", r.ErrorCode)
			return
		}
	}
	latest, earliest := res[0].Offset, res[1].Offset
	leo := ps.log.LogEndOffset()
	switch {
	case latest < leo:
		// The source is behind us (unclean election there): keep its end.
		if err := truncateLog(ps.log, latest); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s truncate to %d: %w", ps.tp, latest, err))
			return
		}
		f.cfg.Logger.Warn("source end below destination end; truncated", "partition", ps.tp.String(),
			"from", leo, "to", ps.log.LogEndOffset())
		d := epoch.Divergence{Epoch: epoch.UndefinedEpoch, EndOffset: latest}
		f.cfg.Events.OnDivergence(ps.tp, d, ps.log.LogEndOffset())
		if f.stopDiverged(ps, d) {
			return
		}
		ps.needProbe = f.probe
		f.succeeded(ps)
	case earliest > leo:
		gap := earliest - leo
		if err := ps.log.TruncateFullyAndStartAt(earliest); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s truncate fully at %d: %w", ps.tp, earliest, err))
			return
		}
		f.cfg.Logger.Warn("fetch offset below source log start: offsets were never mirrored",
			"partition", ps.tp.String(), "fetchOffset", fetchOffset, "sourceLogStart", earliest, "gap", gap)
		f.cfg.Events.OnOutOfRange(ps.tp, fetchOffset, earliest, gap)
		f.succeeded(ps)
	default:
		// The offset is inside the source log, so the source did not know
		// the last fetched epoch: find the divergence with the probe.
		ps.needProbe = true
		f.retryLater(ps)
	}
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
