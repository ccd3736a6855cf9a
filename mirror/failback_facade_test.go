package mirror

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// The worked examples of spec §6.4, reproduced through the facade: site A is the
// original source, site B mirrors it with mirror "a-to-b", B fails over (stop), and A
// fails back by creating and starting mirror "b-to-a". Each site reaches the other's logs
// through a fetcher.LocalSource and uses the other *Mirror as its Peer.

// specExample prepares the common part: topic t (one partition) on A with the given
// batches, B mirrors it until it holds mirrored offsets, then B stops with its leader epoch
// raised so that the stop bump gives epoch 10 (the examples' "B bumps to 10").
type specExample struct {
	t      *testing.T
	w      *world
	a, b   *site
	la, lb fetcher.Log
	// stopEpoch is B's leader epoch after the stop: its barrier's and new writes' epoch
	// (the spec's examples call it 10).
	stopEpoch int64
}

func newSpecExample(t *testing.T, aEpochs []int32) *specExample {
	w := newWorld()
	ex := &specExample{t: t, w: w, a: w.newSite(t, "A"), b: w.newSite(t, "B")}
	createTopic(t, ex.a, "t", records.UUID{0xA}, 1)
	ex.la = ex.a.log(t, "t", 0)
	for _, e := range aEpochs {
		if ex.la.LeaderEpoch() < e {
			_, err := ex.la.BumpLeaderEpoch(e - 1)
			require.NoError(t, err)
		}
		appendBatch(t, ex.la, e, 1, "A")
	}
	return ex
}

// mirrorAndFailOver mirrors A to B until B holds A's log, then stops the mirror on B.
func (ex *specExample) mirrorAndFailOver() {
	t, ctx := ex.t, testCtx(ex.t)
	require.NoError(t, ex.b.m.CreateClusterMirror(ctx, "a-to-b", bootstrap(ex.a)))
	mustOK(t)(ex.b.m.StartMirrorTopics(ctx, "a-to-b", []string{"t"}, StartOptions{}))
	ex.lb = ex.b.log(t, "t", 0)
	waitCond(t, ctx, ex.b.m, "B mirrored A", func() bool { return ex.lb.LogEndOffset() == ex.la.LogEndOffset() })
	require.Equal(t, logBytes(t, ex.la), logBytes(t, ex.lb))
	// The host raises B's leader epoch to at least 9 (as if leadership moved; B keeps it
	// ahead of A's by itself too, spec §7.5), and the stop's bump goes above it.
	if ex.lb.LeaderEpoch() < 9 {
		_, err := ex.lb.BumpLeaderEpoch(8)
		require.NoError(t, err)
	}
	before := ex.lb.LeaderEpoch()
	require.GreaterOrEqual(t, before, ex.la.LatestEpoch(), "B's leader epoch is not below A's epochs")
	mustOK(t)(ex.b.m.StopMirrorTopics(ctx, "a-to-b", []string{"t"}, StopOptions{Wait: true}))
	require.Greater(t, ex.lb.LeaderEpoch(), before)
	ex.stopEpoch = int64(ex.lb.LeaderEpoch())
	d := describePartition(t, ex.b, "a-to-b", "t", 0)
	require.Equal(t, statemachine.Stopped, d.State)
	require.False(t, ex.b.dest.ReadOnly("t", 0))
}

// failBack starts the reverse mirror on A and returns the LME truncation offset A used.
func (ex *specExample) failBack() int64 {
	t, ctx := ex.t, testCtx(ex.t)
	// While a-to-b is not STOPPED, failback is a mirror loop: exercised in TestMirrorLoop.
	require.NoError(t, ex.a.m.CreateClusterMirror(ctx, "b-to-a", bootstrap(ex.b)))
	// The spec's examples cut A's writes that B never mirrored: a removal of this
	// site's records, refused unless allowed (TestFailbackRefusesLocalWrites).
	mustOK(t)(ex.a.m.StartMirrorTopics(ctx, "b-to-a", []string{"t"}, StartOptions{AllowTruncation: true}))
	require.NoError(t, ex.a.m.WaitForStates(ctx, "b-to-a", []string{"t"}, statemachine.Mirroring))
	off, ok := ex.a.prepared("t", 0)
	require.True(t, ok)
	waitCond(t, ctx, ex.a.m, "A caught up with B", func() bool {
		return ex.la.LogEndOffset() == ex.lb.LogEndOffset() && bytesEqual(t, ex.la, ex.lb)
	})
	require.Equal(t, logBytes(t, ex.lb), logBytes(t, ex.la), "logs identical after failback")
	return off
}

func bytesEqual(t testing.TB, a, b fetcher.Log) bool {
	return string(logBytes(t, a)) == string(logBytes(t, b))
}

func TestSpecExampleA(t *testing.T) {
	ex := newSpecExample(t, []int32{0, 0})
	ex.mirrorAndFailOver()
	// B: 0,1 A(LE 0); 2 PID_RESET(LE 10); LME 0 stored.
	require.Equal(t, int32(0), describePartition(t, ex.b, "a-to-b", "t", 0).LastMirrorEpoch)
	require.Equal(t, [][3]int64{{0, 0, -1}, {1, 0, -1}, {2, ex.stopEpoch, int64(records.ControlMirrorPIDReset)}}, batchEpochs(t, ex.lb))
	// A had offset 2 at LE 10 that B never got; B writes new data at offset 3.
	_, err := ex.la.BumpLeaderEpoch(9)
	require.NoError(t, err)
	appendBatch(t, ex.la, 10, 1, "A-stale")
	_, err = ex.lb.AppendAsLeader(mustBatch(t, "B-new"))
	require.NoError(t, err)
	require.Equal(t, [][3]int64{{0, 0, -1}, {1, 0, -1}, {2, 10, -1}}, batchEpochs(t, ex.la))
	// Failback: A truncates after the end of epoch 0 (offset 2, removing the stale
	// A(LE 10)), then copies B's offsets 2 and 3.
	require.Equal(t, int64(2), ex.failBack())
	require.Equal(t, [][3]int64{{0, 0, -1}, {1, 0, -1}, {2, ex.stopEpoch, int64(records.ControlMirrorPIDReset)}, {3, ex.stopEpoch, -1}}, batchEpochs(t, ex.la))
}

func TestSpecExampleB(t *testing.T) {
	ex := newSpecExample(t, []int32{0, 0})
	ex.mirrorAndFailOver()
	require.Equal(t, int32(0), describePartition(t, ex.b, "a-to-b", "t", 0).LastMirrorEpoch)
	_, err := ex.lb.AppendAsLeader(mustBatch(t, "B-new"))
	require.NoError(t, err)
	// A had offsets 2 (LE 0) and 3 (LE 1) that B never got.
	appendBatch(t, ex.la, 0, 1, "A-2")
	_, err = ex.la.BumpLeaderEpoch(0)
	require.NoError(t, err)
	appendBatch(t, ex.la, 1, 1, "A-3")
	require.Equal(t, [][3]int64{{0, 0, -1}, {1, 0, -1}, {2, 0, -1}, {3, 1, -1}}, batchEpochs(t, ex.la))
	// Step 2: epoch 0 covers 0-2 on A, so A truncates at 3 (offset 3, LE 1, removed);
	// steps 3-4: the first fetch (offset 3, lastFetchedEpoch 0) diverges at B's end of
	// epoch 0 (offset 2), A drops its offset 2 and copies B's.
	require.Equal(t, int64(3), ex.failBack())
	require.Equal(t, [][3]int64{{0, 0, -1}, {1, 0, -1}, {2, ex.stopEpoch, int64(records.ControlMirrorPIDReset)}, {3, ex.stopEpoch, -1}}, batchEpochs(t, ex.la))
	// B's batches at its stop epoch were above A's leader epoch 1: PREPARING raised A's
	// epoch above B's before the first fetch (spec §7.5), so A never met EPOCH_FENCING.
	require.GreaterOrEqual(t, int64(ex.la.LeaderEpoch()), ex.stopEpoch)
	require.False(t, ex.a.sawTransition(statemachine.Mirroring, statemachine.EpochFencing))
}

func TestSpecExampleC(t *testing.T) {
	ex := newSpecExample(t, []int32{0, 0})
	ex.mirrorAndFailOver()
	// Unclean leader election on A: the new leader has an empty log; several leader
	// changes bring A to epoch 10 and A gets new local records at offsets 0-1.
	require.NoError(t, ex.la.TruncateFullyAndStartAt(0))
	_, err := ex.la.BumpLeaderEpoch(9)
	require.NoError(t, err)
	appendBatch(t, ex.la, 10, 1, "A-new")
	appendBatch(t, ex.la, 10, 1, "A-new")
	require.Equal(t, [][3]int64{{0, 10, -1}, {1, 10, -1}}, batchEpochs(t, ex.la))
	// Truncating after LME 0 removes A's offsets 0-1 (A has no epoch-0 data); A then
	// refetches everything.
	require.Equal(t, int64(0), ex.failBack())
	require.Equal(t, [][3]int64{{0, 0, -1}, {1, 0, -1}, {2, ex.stopEpoch, int64(records.ControlMirrorPIDReset)}}, batchEpochs(t, ex.la))
}

// TestMirrorLoop: starting the reverse mirror while the forward one still mirrors the
// partition is refused with "mirror loop" before anything changes: A's topic stays
// writable and outside the reverse mirror.
func TestMirrorLoop(t *testing.T) {
	ctx := testCtx(t)
	ex := newSpecExample(t, []int32{0})
	require.NoError(t, ex.b.m.CreateClusterMirror(ctx, "a-to-b", bootstrap(ex.a)))
	mustOK(t)(ex.b.m.StartMirrorTopics(ctx, "a-to-b", []string{"t"}, StartOptions{}))
	require.NoError(t, ex.b.m.WaitForStates(ctx, "a-to-b", []string{"t"}, statemachine.Mirroring))
	require.NoError(t, ex.a.m.CreateClusterMirror(ctx, "b-to-a", bootstrap(ex.b)))
	res, err := ex.a.m.StartMirrorTopics(ctx, "b-to-a", []string{"t"}, StartOptions{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.ErrorContains(t, res[0].Err, "mirror loop")
	require.ErrorContains(t, res[0].Err, `mirror "a-to-b" on the source cluster`)
	var ae *admin.Error
	require.ErrorAs(t, res[0].Err, &ae)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, ae.Code)
	require.False(t, ex.a.dest.ReadOnly("t", 0), "the refused start left A's topic writable")
	_, known := ex.a.m.Controller().Topic("t")
	require.False(t, known, "the refused start recorded no desired state")
}

func mustBatch(t testing.TB, tag string) []byte {
	t.Helper()
	b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000},
		[]records.Record{{Key: []byte(tag), Value: []byte(tag)}})
	require.NoError(t, err)
	return b
}

func (s *site) sawTransition(from, to statemachine.State) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.changes {
		if c.From == from && c.To == to {
			return true
		}
	}
	return false
}

// TestUncleanElectionOnSource: with mirror.support.unclean.leader.election=true a
// divergence found while MIRRORING (the source lost a suffix in an unclean election and
// wrote other records at a new epoch) goes through ULE_LOG_TRUNCATION and back to
// MIRRORING; the logs converge. The destination topic's setting, when present, overrides
// the mirror's: with the topic's false the fetcher truncates like a follower and goes on
// (no ULE_LOG_TRUNCATION), with the topic's true ULE applies though the mirror's is off.
func TestUncleanElectionOnSource(t *testing.T) {
	for _, tc := range []struct{ mirror, topic string }{{"true", ""}, {"false", "true"}, {"", "true"}, {"true", "false"}} {
		t.Run(fmt.Sprintf("mirror=%q,topic=%q", tc.mirror, tc.topic), func(t *testing.T) {
			uncleanElectionOnSource(t, tc.mirror, tc.topic)
		})
	}
}

// uncleanElectionOnSource sets mirror.support.unclean.leader.election on the mirror and
// on the destination topic ("" = not set there).
func uncleanElectionOnSource(t *testing.T, mirrorULE, topicULE string) {
	ctx := testCtx(t)
	ex := newSpecExample(t, []int32{0, 0, 0, 0})
	cfg := bootstrap(ex.a)
	if topicULE != "" {
		spec, ok := ex.a.dest.Topic("t")
		require.True(t, ok)
		spec.Configs = map[string]string{KeyUncleanLeaderElection: topicULE}
		require.NoError(t, ex.b.dest.CreateTopic(ctx, spec))
	}
	if mirrorULE != "" {
		cfg[KeyUncleanLeaderElection] = mirrorULE
	}
	ule := topicULE == "true" || (topicULE == "" && mirrorULE == "true")
	require.NoError(t, ex.b.m.CreateClusterMirror(ctx, "a-to-b", cfg))
	mustOK(t)(ex.b.m.StartMirrorTopics(ctx, "a-to-b", []string{"t"}, StartOptions{}))
	lb := ex.b.log(t, "t", 0)
	waitCond(t, ctx, ex.b.m, "mirrored", func() bool { return lb.LogEndOffset() == 4 })
	// Unclean election on A: offsets 2-3 are lost, other records written at epoch 1.
	require.NoError(t, ex.la.Truncate(2))
	_, err := ex.la.BumpLeaderEpoch(0)
	require.NoError(t, err)
	appendBatch(t, ex.la, 1, 1, "A-ule")
	appendBatch(t, ex.la, 1, 1, "A-ule")
	waitCond(t, ctx, ex.b.m, "converged", func() bool {
		return (!ule || ex.b.sawTransition(statemachine.ULELogTruncation, statemachine.Mirroring)) && bytesEqual(t, ex.la, lb)
	})
	require.Equal(t, ule, ex.b.sawTransition(statemachine.Mirroring, statemachine.ULELogTruncation))
	require.Equal(t, [][3]int64{{0, 0, -1}, {1, 0, -1}, {2, 1, -1}, {3, 1, -1}}, batchEpochs(t, lb))
}
