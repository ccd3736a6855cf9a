package mirror

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// TestPlanStartRefusesLocalWrites: after B's failover, writes on B, then the old
// direction started again on B: no LME on A, a full truncation of B's log. ValidateOnly
// answers the plan and changes nothing; the start without AllowTruncation is refused
// with a *TruncationRefusedError carrying the plan and changes nothing; with it the
// planned records go and a Removal reports them.
func TestPlanStartRefusesLocalWrites(t *testing.T) {
	ctx := testCtx(t)
	ex := newSpecExample(t, []int32{0, 0})
	var mu sync.Mutex
	var removals []Removal
	ex.b = ex.w.newSite(t, "B2", WithRemovals(func(r Removal) { mu.Lock(); removals = append(removals, r); mu.Unlock() }))
	ex.mirrorAndFailOver()
	lmo := describePartition(t, ex.b, "a-to-b", "t", 0).LastMirrorOffset
	appendBatch(t, ex.lb, ex.lb.LeaderEpoch(), 3, "B-local") // a client write on B after its stop
	end := ex.lb.LogEndOffset()

	res, err := ex.b.m.StartMirrorTopics(ctx, "a-to-b", []string{"t"}, StartOptions{ValidateOnly: true})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.ErrorIs(t, res[0].Err, ErrTruncationRefused, "the dry run says the start would be refused")
	require.Len(t, res[0].Plan, 1)
	pl := res[0].Plan[0]
	require.Equal(t, statemachine.Stopped, pl.StateNow)
	require.Equal(t, statemachine.Mirroring, pl.StateAfter)
	require.True(t, pl.FullTruncation)
	require.Equal(t, OffsetRange{From: 0, To: end, Records: 5}, pl.Removed)
	require.Equal(t, OffsetRange{From: lmo, To: end, Records: 3}, pl.LocalWrites)
	requireUntouched(t, ex, end)

	res, err = ex.b.m.StartMirrorTopics(ctx, "a-to-b", []string{"t"}, StartOptions{})
	require.NoError(t, err)
	var tre *TruncationRefusedError
	require.ErrorAs(t, res[0].Err, &tre)
	require.Equal(t, []PartitionPlan{pl}, tre.Plan)
	require.Equal(t, []PartitionPlan{pl}, res[0].Plan)
	requireUntouched(t, ex, end)

	res, err = ex.b.m.StartMirrorTopics(ctx, "a-to-b", []string{"t"}, StartOptions{AllowTruncation: true})
	mustOK(t)(res, err)
	require.Equal(t, []PartitionPlan{pl}, res[0].Plan)
	require.NoError(t, ex.b.m.WaitForStates(ctx, "a-to-b", []string{"t"}, statemachine.Mirroring))
	waitCond(t, ctx, ex.b.m, "B mirrored A again", func() bool { return ex.lb.LogEndOffset() == ex.la.LogEndOffset() })
	require.Equal(t, logBytes(t, ex.la), logBytes(t, ex.lb), "the local writes went, as planned")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []Removal{{Ref: PartitionRef{Mirror: "a-to-b", Topic: "t", Partition: 0}, Removed: pl.Removed, LocalWrites: pl.LocalWrites}}, removals)
}

// requireUntouched checks that B's refused or planned start changed nothing.
func requireUntouched(t *testing.T, ex *specExample, end int64) {
	t.Helper()
	require.False(t, ex.b.dest.ReadOnly("t", 0), "still writable")
	require.Equal(t, end, ex.lb.LogEndOffset())
	ts, ok := ex.b.m.Controller().Topic("t")
	require.True(t, ok)
	require.Equal(t, statemachine.DesiredStopped, ts.Desired)
	require.Equal(t, statemachine.Stopped, describePartition(t, ex.b, "a-to-b", "t", 0).State)
}

// TestPlanStopValidateOnly: a stop's plan names the LME it persists; ValidateOnly
// changes nothing, and the stop then persists that LME.
func TestPlanStopValidateOnly(t *testing.T) {
	ctx := testCtx(t)
	ex := newSpecExample(t, []int32{0, 3})
	require.NoError(t, ex.b.m.CreateClusterMirror(ctx, "a-to-b", bootstrap(ex.a)))
	mustOK(t)(ex.b.m.StartMirrorTopics(ctx, "a-to-b", []string{"t"}, StartOptions{}))
	ex.lb = ex.b.log(t, "t", 0)
	waitCond(t, ctx, ex.b.m, "B mirrored A", func() bool { return ex.lb.LogEndOffset() == ex.la.LogEndOffset() })
	res, err := ex.b.m.StopMirrorTopics(ctx, "a-to-b", []string{"t"}, StopOptions{ValidateOnly: true})
	mustOK(t)(res, err)
	require.Len(t, res[0].Plan, 1)
	pl := res[0].Plan[0]
	require.Equal(t, statemachine.Mirroring, pl.StateNow)
	require.Equal(t, statemachine.Stopped, pl.StateAfter)
	require.Equal(t, int32(3), pl.LastMirrorEpoch)
	require.Empty(t, pl.OpenTransactions)
	require.True(t, ex.b.dest.ReadOnly("t", 0))
	ts, _ := ex.b.m.Controller().Topic("t")
	require.Equal(t, statemachine.DesiredMirroring, ts.Desired, "the dry run changed no desired state")

	mustOK(t)(ex.b.m.StopMirrorTopics(ctx, "a-to-b", []string{"t"}, StopOptions{Wait: true}))
	require.Equal(t, pl.LastMirrorEpoch, describePartition(t, ex.b, "a-to-b", "t", 0).LastMirrorEpoch)

	res, err = ex.b.m.PauseMirrorTopics(ctx, "a-to-b", []string{"t"}, LifecycleOptions{ValidateOnly: true})
	require.NoError(t, err)
	var ae *admin.Error
	require.True(t, errors.As(res[0].Err, &ae) && ae.Code == admin.CodeInvalidClusterMirrorStates, "a STOPPED topic cannot pause: %v", res[0].Err)
}
