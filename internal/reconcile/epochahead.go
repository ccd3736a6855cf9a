package reconcile

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// The leader-epoch invariant DLE ≥ SLE of spec §7.5: the destination leader epoch of a
// mirror partition stays at or above the source leader epoch, so destination consumers
// that hold source epochs never loop on metadata. Besides the reactive bump of
// EPOCH_FENCING it is kept ahead of time: PREPARING raises it above the source's before
// the first fetch, a mirrored batch whose epoch comes within the threshold of it raises
// it (proactive, §7.3 rule 2), and so does a source leader epoch seen by the periodic
// metadata sync.
const (
	leaderEpochBumpThreshold int32 = 3  // LEADER_EPOCH_BUMP_THRESHOLD
	leaderEpochBumpIncrement int32 = 10 // LEADER_EPOCH_BUMP_INCREMENT
)

// keepEpochAhead raises the local leader epoch to seen + increment when seen (a
// mirrored batch's epoch or the source leader's) is above local − threshold. It returns
// whether it bumped. The Log serializes it with the fetcher's appends, and a bump only
// ever raises the epoch.
func (r *Partition) keepEpochAhead(seen int32) (bool, error) {
	local := r.log.LeaderEpoch()
	if seen < 0 || seen <= local-leaderEpochBumpThreshold {
		return false, nil
	}
	e, err := r.log.BumpLeaderEpoch(seen + leaderEpochBumpIncrement - 1)
	if err != nil {
		return false, fmt.Errorf("bump leader epoch ahead of epoch %d: %w", seen, err)
	}
	r.observeBump(EpochBumpAhead, local, e)
	r.e.log.Debug("mirror: leader epoch bumped ahead of the source", "mirror", r.mirror, "topic", r.topic,
		"partition", r.partition, "seen", seen, "from", local, "to", e)
	return true, nil
}

// raiseEpochToSource is the end of PREPARING: the local leader epoch is raised above the
// source leader's before the first fetch, so a fresh start never meets EPOCH_FENCING.
func (r *Partition) raiseEpochToSource() error {
	src, _, err := r.mr.Sources()
	if err != nil {
		return err
	}
	info, err := RetryTransient(r.ctx, peerRetry(r.ctx), func() (fetcher.PartitionInfo, error) {
		return src.PartitionInfo(r.ctx, r.topic, r.partition, true)
	})
	if err != nil {
		return fmt.Errorf("source leader epoch: %w", err)
	}
	_, err = r.keepEpochAhead(max(info.LeaderEpoch, r.log.LatestEpoch()))
	return err
}

// onAppended is the proactive bump (§7.3 rule 2), run on the fetcher's event goroutine
// after a response was appended.
func (r *Partition) onAppended() {
	if _, err := r.keepEpochAhead(r.log.LatestEpoch()); err != nil {
		r.push(statemachine.Error{Reason: err.Error(), Cause: r.storageCause("bump the leader epoch", err)})
	}
}

// keepEpochsAhead is the periodic bump (§7.5): for every MIRRORING partition of the
// mirror, the source leader epoch from (cached) source metadata.
func (mr *Runtime) keepEpochsAhead(ctx context.Context) {
	src, _, err := mr.Sources()
	if err != nil {
		return
	}
	for _, r := range mr.e.partitionsOf(mr) {
		if s, _ := r.Current(); s != statemachine.Mirroring || !r.logReady.Load() {
			continue
		}
		info, err := src.PartitionInfo(ctx, r.topic, r.partition, false)
		if err != nil {
			continue // the fetcher reports source trouble
		}
		if _, err := r.keepEpochAhead(info.LeaderEpoch); err != nil {
			r.push(statemachine.Error{Reason: err.Error(), Cause: r.storageCause("bump the leader epoch", err)})
		}
	}
}
