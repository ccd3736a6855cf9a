package mirror

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// requireNonRetryable waits for FAILED and checks the failure is not retried: the wait
// for MIRRORING fails at once and describe shows RetryAttempt -1 with want in the error.
func requireNonRetryable(t *testing.T, ctx context.Context, b *site, want string) {
	t.Helper()
	waitCond(t, ctx, b.m, "FAILED", func() bool {
		d := describePartition(t, b, "m", "t", 0)
		return d.State == statemachine.Failed && d.RetryAttempt == records.NonRetryable
	})
	d := describePartition(t, b, "m", "t", 0)
	require.Contains(t, d.ErrorMessage, want)
	require.ErrorContains(t, b.m.WaitForStates(ctx, "m", []string{"t"}, statemachine.Mirroring), "is FAILED")
}

func TestSourceTopicDeletedIsNonRetryable(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	startMirrored(t, ctx, a, b, records.UUID{0x61})
	require.NoError(t, a.dest.DeleteTopic(ctx, "t")) // not a mirror topic on A
	require.NoError(t, b.m.Sync(ctx))                // the next metadata refresh
	requireNonRetryable(t, ctx, b, `source topic "t" was deleted`)
	// The data mirrored so far stays.
	require.Equal(t, int64(2), b.log(t, "t", 0).LogEndOffset())
}

func TestSourceTopicRecreatedIsNonRetryable(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	startMirrored(t, ctx, a, b, records.UUID{0x62})
	require.NoError(t, a.dest.DeleteTopic(ctx, "t"))
	createTopic(t, a, "t", records.UUID{0x63}, 1)
	require.NoError(t, b.m.Sync(ctx))
	requireNonRetryable(t, ctx, b, "recreated with another topic id")
	// A stop still works on the failed partition, and the topic becomes writable.
	mustOK(t)(b.m.StopMirrorTopics(ctx, "m", []string{"t"}, StopOptions{Wait: true}))
	require.False(t, b.dest.ReadOnly("t", 0))
}

func TestTieredStorageDestinationIsNonRetryable(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	createTopic(t, a, "t", records.UUID{0x64}, 1)
	appendBatch(t, a.log(t, "t", 0), 0, 2, "x")
	require.NoError(t, b.dest.CreateTopic(ctx, TopicSpec{Name: "t", TopicID: records.UUID{0x64}, Partitions: 1,
		Configs: map[string]string{KeyRemoteStorageEnable: "true"}}))
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(b.m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	requireNonRetryable(t, ctx, b, "tiered storage")
	require.Equal(t, int64(0), b.log(t, "t", 0).LogEndOffset(), "nothing mirrored into a tiered topic")

	// With tiered storage turned off, RecoverMirrorTopics brings it back.
	require.NoError(t, b.dest.AlterTopicConfigs(ctx, "t", map[string]string{KeyRemoteStorageEnable: "false"}))
	// Its plan first: the FAILED partition restarts; nothing changes.
	res, err := b.m.RecoverMirrorTopics(ctx, "m", []string{"t"}, RecoverOptions{ValidateOnly: true})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Len(t, res[0].Plan, 1)
	require.Equal(t, statemachine.Failed, res[0].Plan[0].StateNow)
	require.Equal(t, statemachine.Mirroring, res[0].Plan[0].StateAfter)
	require.Equal(t, int64(-1), res[0].Plan[0].TruncationOffset, "an empty log: nothing to cut")
	require.Equal(t, statemachine.Failed, describePartition(t, b, "m", "t", 0).State, "the dry run recovered nothing")
	res, err = b.m.RecoverMirrorTopics(ctx, "m", []string{"t"}, RecoverOptions{})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, b.m.WaitForLag(ctx, "m", []string{"t"}, 0))
	require.Equal(t, logBytes(t, a.log(t, "t", 0)), logBytes(t, b.log(t, "t", 0)))
}
