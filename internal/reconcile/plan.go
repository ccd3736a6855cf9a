package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// ErrTruncationRefused is matched (errors.Is) by a *TruncationRefusedError: a start
// that would remove records written on this site, without AllowTruncation.
var ErrTruncationRefused = errors.New("mirror: the start would remove records written on this site")

// TruncationRefusedError refuses the start of one topic whose PREPARING would remove
// records written on this site (a full truncation of a log with records, or an LME
// truncation below local writes). Plan is the refused plan, every partition of the
// topic; nothing was changed.
type TruncationRefusedError struct {
	Mirror, Topic string
	Plan          []controller.PartitionPlan
	// AtPrepare says PREPARING refused it (no start approved the removal durably:
	// auto-discovery, a restart, a plan that changed): the partition is FAILED, and a
	// recover with AllowTruncation approves the removal. Else a start was refused and
	// nothing changed.
	AtPrepare bool
}

// Error names the partitions and what they would lose.
func (e *TruncationRefusedError) Error() string {
	var parts []string
	for _, p := range e.Plan {
		if !p.RemovesRecords() {
			continue
		}
		parts = append(parts, fmt.Sprintf("partition %d: %d records at offsets [%d, %d), %d of them written on this site since its stop",
			p.Partition, p.Removed.Records, p.Removed.From, p.Removed.To, p.LocalWrites.Records))
	}
	how := "start it with AllowTruncation (mirrorctl --start --allow-truncation) to remove them"
	if e.AtPrepare {
		how = "no start approved this removal; the partition is FAILED and keeps them: recover it with AllowTruncation (mirrorctl --recover --allow-truncation) to remove them"
	}
	return fmt.Sprintf("%s: mirror %q topic %q: %s; %s", ErrTruncationRefused, e.Mirror, e.Topic, strings.Join(parts, "; "), how)
}

// Is matches ErrTruncationRefused.
func (e *TruncationRefusedError) Is(target error) bool { return target == ErrTruncationRefused }

// PlanState is the stored state of one partition that a plan starts from.
type PlanState struct {
	State statemachine.State
	// LastMirrorOffset is the log end stored with the LME at the last stop, -1 when
	// none: where this site's own writes begin.
	LastMirrorOffset int64
	// Previous is, for a FAILED partition, the state it failed in (UNKNOWN when none):
	// one that failed before its PREPARING truncated (GuardsLocalWrites) may still
	// hold this site's writes.
	Previous statemachine.State
}

// GuardsLocalWrites reports whether a PREPARING entered from state from (for a FAILED
// partition, the state it failed in) may remove records written on this site, so
// needs an approval (controller.Approval) to: from UNKNOWN or STOPPED (a start: the
// partition was writable until then) or PREPARING (a restart in it, or a failure
// before its truncation ran). A partition that failed later (MIRRORING, PAUSED, ...)
// had been read-only since its truncation: its log holds mirrored records.
func GuardsLocalWrites(from statemachine.State) bool {
	switch from {
	case statemachine.Unknown, statemachine.Stopped, statemachine.Preparing, statemachine.Failed:
		return true
	}
	return false
}

// PlanStart computes, without changing anything (no state write, no read-only flag,
// no fetch), what PREPARING will do to every partition of topic: the LME found on the
// source cluster, the truncation and the records it removes. states holds the stored
// state of each partition (by partition; a missing one is UNKNOWN). A mirror on the
// source cluster that still mirrors the topic from this cluster fails it with
// ErrMirrorLoop; a lookup that fails returns its error (the start is refused with it:
// a plan that cannot be computed is not guessed).
func (mr *Runtime) PlanStart(ctx context.Context, topic string, states map[int32]PlanState) ([]controller.PartitionPlan, error) {
	spec, ok := mr.e.dest.Topic(topic)
	if !ok {
		return nil, nil // created by the start: nothing to remove
	}
	out := make([]controller.PartitionPlan, 0, spec.Partitions)
	for p := int32(0); p < spec.Partitions; p++ {
		st := StateOf(states, p)
		l, err := mr.e.dest.Log(topic, p)
		if err != nil {
			// PREPARING cannot open it either: the partition fails alone, with the
			// cause, and nothing of it is removed.
			out = append(out, controller.PartitionPlan{Partition: p, StateNow: st.State, StateAfter: statemachine.Failed,
				LastMirrorEpoch: -1, LogStart: -1, LogEnd: -1, TruncationOffset: -1, DivergenceOffset: -1, SourceLogStart: -1})
			continue
		}
		lme, where, err := mr.findLME(ctx, topic, p, backoff.WithContext(&backoff.StopBackOff{}, ctx))
		if err != nil {
			return nil, fmt.Errorf("plan the start of %s-%d: %w", topic, p, err)
		}
		pl, err := planTruncation(l, p, lme, st)
		if err != nil {
			return nil, fmt.Errorf("plan the start of %s-%d: %w", topic, p, err)
		}
		pl.StateNow, pl.StateAfter = st.State, statemachine.Mirroring
		if st.State == statemachine.Mirroring {
			pl.StateAfter = statemachine.Mirroring // a no-op start: nothing is truncated
			pl.TruncationOffset, pl.FullTruncation, pl.Removed, pl.LocalWrites = -1, false, controller.OffsetRange{}, controller.OffsetRange{}
			out = append(out, pl)
			continue
		}
		if where != "" {
			pl.LMECluster, pl.LMEMirror = mr.ClusterID(), where
			if err := mr.planDivergence(ctx, topic, l, st, &pl); err != nil {
				return nil, fmt.Errorf("plan the start of %s-%d: %w", topic, p, err)
			}
		}
		if pl.FullTruncation && !pl.Removed.Empty() {
			if s, err := mr.sourceLogStart(ctx, topic, p); err == nil {
				pl.SourceLogStart = s
			}
		}
		out = append(out, pl)
	}
	return out, nil
}

// planDivergence adds to pl the cut the first fetches after PREPARING make when the
// source's epochs end below the kept log (a failback: this site's records the other
// site never mirrored): it asks the source for the end of the last kept epoch as a
// Kafka follower's fetch with LastFetchedEpoch does, and follows Kafka's follower rule
// (epoch.FollowerTruncation) until it settles.
func (mr *Runtime) planDivergence(ctx context.Context, topic string, l fetcher.Log, st PlanState, pl *controller.PartitionPlan) error {
	if pl.FullTruncation {
		return nil
	}
	kept := pl.LogEnd
	if pl.TruncationOffset >= 0 {
		kept = pl.Removed.From
	}
	src, _, err := mr.Sources()
	if err != nil {
		return err
	}
	c := l.Epochs()
	c.TruncateFromEnd(kept)
	for range 8 { // each round lowers the last fetched epoch; a cache has few epochs left
		lfe := c.LatestEpoch()
		if lfe == epoch.UndefinedEpoch || kept <= pl.LogStart {
			break
		}
		end, err := epochEnd(ctx, src, topic, pl.Partition, lfe)
		if err != nil {
			return fmt.Errorf("ask the source for the end of epoch %d: %w", lfe, err)
		}
		d := epoch.Divergence{Epoch: end.LeaderEpoch, EndOffset: end.EndOffset}
		if d.EndOffset == epoch.UndefinedOffset || (d.Epoch >= lfe && d.EndOffset >= kept) {
			break // no divergence (or the source does not know the epoch: not predicted)
		}
		off, complete := epoch.FollowerTruncation(c, kept, d)
		if off >= kept {
			break
		}
		kept = off
		c.TruncateFromEnd(kept)
		if complete {
			break
		}
	}
	if kept >= pl.LogEnd || (pl.TruncationOffset >= 0 && kept >= pl.Removed.From) {
		return nil
	}
	pl.DivergenceOffset = kept
	removed, local, err := countRemoved(l, kept, false, localFromOf(pl.LogStart, pl.LogEnd, st))
	if err != nil {
		return err
	}
	pl.Removed, pl.LocalWrites = removed, local
	return nil
}

// planRetry bounds the retries of a plan's question to the source: a source that was
// just restarted, or whose leader moves, answers a retriable error for a moment, and a
// start should not be refused for it; one that stays unreachable fails the plan within
// the start's own time.
func planRetry(ctx context.Context) backoff.BackOffContext {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 50*time.Millisecond, time.Second, 10*time.Second
	return backoff.WithContext(b, ctx)
}

// epochEnd asks the source for the end offset of leader epoch lfe of one partition,
// retrying retriable answers (a network error, a leader moving) within planRetry.
func epochEnd(ctx context.Context, src fetcher.Source, topic string, partition, lfe int32) (fetcher.EpochResult, error) {
	res, err := RetryTransient(ctx, planRetry(ctx), func() (fetcher.EpochResult, error) {
		res, err := src.OffsetForLeaderEpoch(ctx, []fetcher.EpochQuery{{Topic: topic, Partition: partition, CurrentLeaderEpoch: -1, LeaderEpoch: lfe}})
		switch {
		case err != nil:
			return fetcher.EpochResult{}, err
		case len(res) != 1:
			return fetcher.EpochResult{}, fmt.Errorf("%d answers for one partition: %w", len(res), fetcher.ErrProtocol)
		case res[0].ErrorCode != 0:
			return res[0], kerr.ErrorForCode(res[0].ErrorCode)
		}
		return res[0], nil
	})
	return res, err
}

// planTruncation is the truncation PREPARING does to log l for LME lme, with what it
// removes. The range starts where the log really ends after the cut: Truncate keeps a
// batch that starts below the offset whole.
func planTruncation(l fetcher.Log, partition, lme int32, st PlanState) (controller.PartitionPlan, error) {
	start, end := l.LogStartOffset(), l.LogEndOffset()
	pl := controller.PartitionPlan{Partition: partition, LastMirrorEpoch: lme, LogStart: start, LogEnd: end,
		TruncationOffset: -1, DivergenceOffset: -1, SourceLogStart: -1}
	off, full := epoch.LMETruncationOffset(l.Epochs(), start, end, lme)
	if full && end > start {
		pl.FullTruncation, pl.TruncationOffset = true, start
	} else if !full && off < end {
		pl.TruncationOffset = off
	}
	if pl.TruncationOffset < 0 {
		return pl, nil
	}
	removed, local, err := countRemoved(l, pl.TruncationOffset, full, localFromOf(start, end, st))
	if err != nil {
		return pl, err
	}
	pl.Removed, pl.LocalWrites = removed, local
	return pl, nil
}

// localFromOf is where this site's own writes begin in a log [start, end) in stored
// state st: the LastMirrorOffset of a stopped partition; the log start of one that never
// mirrored (or whose state is gone); the end of a mirror partition not stopped.
func localFromOf(start, end int64, st PlanState) int64 {
	switch {
	case st.State == statemachine.Stopped && st.LastMirrorOffset >= 0:
		return st.LastMirrorOffset
	case st.State == statemachine.Stopped || st.State == statemachine.Unknown:
		return start
	case st.State == statemachine.Failed && GuardsLocalWrites(st.Previous):
		// Failed before its truncation: counted as its PREPARING will count it.
		if st.LastMirrorOffset >= 0 {
			return st.LastMirrorOffset
		}
		return start
	}
	return end
}

// countRemoved reads log l from offset off to its end and counts what a truncation at
// off removes (everything when full), and of that what lies at or after localFrom.
func countRemoved(l fetcher.Log, off int64, full bool, localFrom int64) (removed, local controller.OffsetRange, err error) {
	end := l.LogEndOffset()
	from := off
	if full {
		from = l.LogStartOffset()
	}
	removed = controller.OffsetRange{From: from, To: end}
	next := from
	first := true
	for next < end {
		buf, err := l.Read(next, 1<<20)
		if err != nil {
			return removed, local, fmt.Errorf("count the records to remove: %w", err)
		}
		if len(buf) == 0 {
			break
		}
		it := records.NewIterator(buf)
		for it.Next() {
			b := it.Batch()
			base, last := b.BaseOffset(), b.BaseOffset()+int64(b.LastOffsetDelta())
			next = last + 1
			if base < from {
				if first && !full {
					removed.From = min(last+1, end) // kept whole by Truncate
				}
				continue
			}
			first = false
			if b.Attributes().IsControl() {
				continue
			}
			removed.Records += int64(b.NumRecords())
			if base >= localFrom {
				local.Records += int64(b.NumRecords())
			}
		}
		if err := it.Err(); err != nil {
			return removed, local, fmt.Errorf("count the records to remove: %w", err)
		}
	}
	local.From, local.To = max(localFrom, removed.From), end
	if local.To < local.From {
		local.From = local.To
	}
	return removed, local, nil
}

// findLME is lookupLME that also names the mirror on the source cluster the LME was
// found in ("" when none).
func (mr *Runtime) findLME(ctx context.Context, topic string, partition int32, bo backoff.BackOffContext) (int32, string, error) {
	peer, err := mr.getPeer()
	if err != nil || peer == nil {
		return epoch.UndefinedEpoch, "", err
	}
	local := mr.e.dest.ClusterID()
	names, err := RetryTransient(ctx, bo, func() ([]string, error) { return peer.MirrorsFrom(ctx, local) })
	if err != nil {
		return 0, "", fmt.Errorf("find LME: list the source cluster's mirrors: %w", err)
	}
	lme, where := epoch.UndefinedEpoch, ""
	if len(names) == 0 {
		return lme, "", nil
	}
	ps, err := RetryTransient(ctx, bo, func() ([]PeerPartition, error) {
		return peer.PartitionStates(ctx, names, topic, partition, local)
	})
	if err != nil {
		return 0, "", fmt.Errorf("find LME: describe the source cluster's mirrors: %w", err)
	}
	for _, p := range ps {
		if p.State != statemachine.Stopped && p.State != statemachine.Unknown {
			return 0, "", fmt.Errorf("%w: mirror %q on the source cluster mirrors %s-%d from this cluster and is %s; stop it first",
				ErrMirrorLoop, p.Mirror, topic, partition, p.State)
		}
		if p.LastMirrorEpoch > lme {
			lme, where = p.LastMirrorEpoch, p.Mirror
		}
	}
	return lme, where, nil
}

// PlanStop is what STOPPING will do to every partition of topic, without changing
// anything: the LME it persists, the open transactions it aborts (or, with
// mirror.stop.open.transactions=truncate, the LSO truncation and what it removes).
func (mr *Runtime) PlanStop(topic string, states map[int32]PlanState) ([]controller.PartitionPlan, error) {
	spec, ok := mr.e.dest.Topic(topic)
	if !ok {
		return nil, nil
	}
	cfg, err := mr.config()
	if err != nil {
		return nil, err
	}
	out := make([]controller.PartitionPlan, 0, spec.Partitions)
	for p := int32(0); p < spec.Partitions; p++ {
		l, err := mr.e.dest.Log(topic, p)
		if err != nil {
			return nil, fmt.Errorf("plan the stop of %s-%d: %w", topic, p, err)
		}
		st := StateOf(states, p)
		start, end := l.LogStartOffset(), l.LogEndOffset()
		pl := controller.PartitionPlan{Partition: p, StateNow: st.State, StateAfter: statemachine.Stopped,
			LastMirrorEpoch: l.LatestEpoch(), LMECluster: mr.e.dest.ClusterID(), LMEMirror: mr.name,
			LogStart: start, LogEnd: end, TruncationOffset: -1, DivergenceOffset: -1, SourceLogStart: -1}
		if st.State == statemachine.Stopped {
			pl.LastMirrorEpoch = -1 // already stopped: nothing to do
			out = append(out, pl)
			continue
		}
		if cfg.StopMode == statemachine.StopTruncateToLSO {
			if lso := l.LastStableOffset(); lso < end {
				pl.TruncationOffset = lso
				removed, _, err := countRemoved(l, lso, false, end)
				if err != nil {
					return nil, err
				}
				pl.Removed = removed
			}
		} else {
			for _, t := range l.OpenTransactions() {
				pl.OpenTransactions = append(pl.OpenTransactions, controller.OpenTransaction{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch, FirstOffset: t.FirstOffset})
			}
		}
		out = append(out, pl)
	}
	return out, nil
}

// FullTruncationOf is the FullTruncation (the legacy start warning) of a plan that
// truncates fully.
func FullTruncationOf(p controller.PartitionPlan) controller.FullTruncation {
	return newFullTruncation(p.Partition, p.LogStart, p.LogEnd, p.SourceLogStart)
}

// StateOf is the stored state of partition p in states: UNKNOWN with no
// LastMirrorOffset when it has none.
func StateOf(states map[int32]PlanState, p int32) PlanState {
	if st, ok := states[p]; ok {
		return st
	}
	return PlanState{State: statemachine.Unknown, LastMirrorOffset: -1}
}

// LogPlan logs, before PREPARING runs, the removals of a start's plan: a full
// truncation as the start's warning (naming the offsets the source no longer has), an
// LME truncation with the records it removes.
func (mr *Runtime) LogPlan(topic string, plan []controller.PartitionPlan) {
	for _, p := range plan {
		switch {
		case p.FullTruncation && !p.Removed.Empty():
			mr.e.logFullTruncation("mirror: start will truncate the destination log fully", mr.name, topic, FullTruncationOf(p))
		case p.Removed.Records > 0:
			mr.e.log.Warn("mirror: start will truncate the destination log", "mirror", mr.name, "topic", topic, "partition", p.Partition,
				"lme", p.LastMirrorEpoch, "offset", p.TruncationOffset, "removedFrom", p.Removed.From, "removedTo", p.Removed.To,
				"removedRecords", p.Removed.Records, "localRecords", p.LocalWrites.Records)
		}
	}
}
