package epoch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func recs(epoch int32, labels ...string) []simRecord {
	out := make([]simRecord, len(labels))
	for i, l := range labels {
		out[i] = simRecord{Epoch: epoch, Label: l}
	}
	return out
}

// exampleALogs builds the logs of KIP-1279 §6.4 Example A after the failover to B: A still
// holds its unmirrored offset 2 at LE 10; B bumped to 10, wrote PID_RESET at 2 and new data
// at 3. B's LME (latest epoch of its log at stop) is 0.
func exampleALogs(t *testing.T) (a, b *simLog, lme int32) {
	a = &simLog{name: "A"}
	a.append(recs(0, "A0", "A1")...)
	a.append(recs(10, "A2")...)
	b = &simLog{name: "B"}
	b.append(recs(0, "A0", "A1")...)
	lme = b.cache.LatestEpoch() // persisted at stop
	b.append(recs(10, "PID_RESET", "B3")...)
	require.Equal(t, []Entry{{0, 0}, {10, 2}}, a.cache.Entries())
	require.Equal(t, []Entry{{0, 0}, {10, 2}}, b.cache.Entries())
	require.Equal(t, int32(0), lme)
	return a, b, lme
}

func TestSpecExampleA_WithoutLMEDiverges(t *testing.T) {
	a, b, _ := exampleALogs(t)
	// Reverse mirroring without LME truncation: A fetches with its latest epoch 10 at 3.
	d, diverged := LeaderDivergence(&b.cache, b.leo(), a.cache.LatestEpoch(), a.leo())
	require.False(t, diverged, "epoch 10 ends at B's LEO 4 ≥ 3: the check passes (%v)", d)
	_, done := syncLogs(b, a, 5)
	require.True(t, done)
	require.Equal(t, int64(2), firstDifference(a, b), "offset 2 silently differs")
}

func TestSpecExampleA_WithLME(t *testing.T) {
	a, b, lme := exampleALogs(t)
	off, full := LMETruncationOffset(&a.cache, a.start, a.leo(), lme)
	require.False(t, full)
	require.Equal(t, int64(2), off, "end of epoch 0 on A")
	a.truncateTo(off)
	require.Equal(t, []Entry{{0, 0}}, a.cache.Entries())

	_, diverged := LeaderDivergence(&b.cache, b.leo(), a.cache.LatestEpoch(), a.leo())
	require.False(t, diverged, "epoch 0 on B also ends at 2")
	trace, done := syncLogs(b, a, 5)
	require.True(t, done)
	require.Equal(t, []string{
		"fetch lastFetchedEpoch=0 fetchOffset=2: copied offsets 2..3",
		"fetch lastFetchedEpoch=10 fetchOffset=4: up to date",
	}, trace)
	require.Equal(t, int64(-1), firstDifference(a, b))
	require.Equal(t, b.cache.Entries(), a.cache.Entries())
}

func TestSpecExampleB(t *testing.T) {
	a := &simLog{name: "A"}
	a.append(recs(0, "A0", "A1", "A2")...)
	a.append(recs(1, "A3")...)
	b := &simLog{name: "B"}
	b.append(recs(0, "A0", "A1")...)
	lme := b.cache.LatestEpoch()
	require.Equal(t, int32(0), lme)
	b.append(recs(10, "PID_RESET", "B3")...)

	// Step 2: epoch 0 on A covers 0–2; truncate at 3.
	off, full := LMETruncationOffset(&a.cache, a.start, a.leo(), lme)
	require.False(t, full)
	require.Equal(t, int64(3), off)
	a.truncateTo(off)

	// Step 3: B answers DivergingEpoch{0, 2}.
	d, diverged := LeaderDivergence(&b.cache, b.leo(), a.cache.LatestEpoch(), a.leo())
	require.True(t, diverged)
	require.Equal(t, Divergence{Epoch: 0, EndOffset: 2}, d)

	// Step 4: A truncates to 2 and refetches.
	require.Equal(t, int64(2), FollowerTruncationOffset(&a.cache, a.leo(), d))
	trace, done := syncLogs(b, a, 5)
	require.True(t, done)
	require.Equal(t, []string{
		"fetch lastFetchedEpoch=0 fetchOffset=3: diverging epoch=0 endOffset=2; truncate to 2 (complete=true)",
		"fetch lastFetchedEpoch=0 fetchOffset=2: copied offsets 2..3",
		"fetch lastFetchedEpoch=10 fetchOffset=4: up to date",
	}, trace)
	require.Equal(t, int64(-1), firstDifference(a, b))
}

func TestSpecExampleC(t *testing.T) {
	build := func() (a, b *simLog, lme int32) {
		b = &simLog{name: "B"}
		b.append(recs(0, "A0", "A1")...)
		lme = b.cache.LatestEpoch()
		b.append(recs(10, "PID_RESET")...)
		// A: unclean election onto an empty replica, epochs up to 10, new local data.
		a = &simLog{name: "A"}
		a.append(recs(10, "X0", "X1")...)
		return a, b, lme
	}

	// Truncating to an offset (LMO = 1, i.e. keep 0..1) changes nothing, and the first fetch
	// passes the divergence check: offsets 0–1 stay different.
	a, b, _ := build()
	a.truncateTo(2)
	d, diverged := LeaderDivergence(&b.cache, b.leo(), a.cache.LatestEpoch(), a.leo())
	require.False(t, diverged, "epoch 10 ends at B's LEO 3 ≥ 2 (%v)", d)
	_, done := syncLogs(b, a, 5)
	require.True(t, done)
	require.Equal(t, int64(0), firstDifference(a, b))

	// With LME = 0: A has no epoch-0 data, so everything goes.
	a, b, lme := build()
	off, full := LMETruncationOffset(&a.cache, a.start, a.leo(), lme)
	require.Equal(t, int64(0), off)
	require.False(t, full, "the end of epoch 0 is offset 0 = log start: nothing kept")
	a.truncateTo(off)
	require.Zero(t, a.cache.Len())
	trace, done := syncLogs(b, a, 5)
	require.True(t, done)
	require.Equal(t, []string{
		"fetch lastFetchedEpoch=-1 fetchOffset=0: copied offsets 0..2",
		"fetch lastFetchedEpoch=10 fetchOffset=3: up to date",
	}, trace)
	require.Equal(t, int64(-1), firstDifference(a, b))
}

// TestFollowerUnknownEpochTakesTwoRounds shows Kafka's incomplete truncation: the leader
// answers with an epoch the follower never had, the follower truncates to the end of its own
// lower epoch, and the next fetch finishes the job.
func TestFollowerUnknownEpochTakesTwoRounds(t *testing.T) {
	leader := &simLog{name: "L"}
	leader.append(recs(1, "a", "b")...)
	leader.append(recs(3, "c", "d")...)
	leader.append(recs(5, "e")...)
	follower := &simLog{name: "F"}
	follower.append(recs(1, "a", "b")...)
	follower.append(recs(2, "x", "y", "z")...)
	follower.append(recs(4, "w")...)

	// Leader: epoch 4 unknown → (3, 4). Follower: largest epoch ≤ 3 is 2, which ends at 5.
	d, diverged := LeaderDivergence(&leader.cache, leader.leo(), 4, follower.leo())
	require.True(t, diverged)
	require.Equal(t, Divergence{3, 4}, d)
	off, complete := FollowerTruncation(&follower.cache, follower.leo(), d)
	require.Equal(t, int64(5), off)
	require.False(t, complete)

	trace, done := syncLogs(leader, follower, 10)
	require.True(t, done)
	require.Equal(t, []string{
		"fetch lastFetchedEpoch=4 fetchOffset=6: diverging epoch=3 endOffset=4; truncate to 5 (complete=false)",
		"fetch lastFetchedEpoch=2 fetchOffset=5: diverging epoch=1 endOffset=2; truncate to 2 (complete=true)",
		"fetch lastFetchedEpoch=1 fetchOffset=2: copied offsets 2..4",
		"fetch lastFetchedEpoch=5 fetchOffset=5: up to date",
	}, trace)
	require.Equal(t, int64(-1), firstDifference(leader, follower))
}
