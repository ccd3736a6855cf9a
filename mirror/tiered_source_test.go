package mirror

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// A tiered source topic mirrors into a local topic: remote.storage.enable and the
// local retention of a tiered log are never synced, the rest of its configs are.
func TestTieredSourceTopicMirrors(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	require.NoError(t, a.dest.CreateTopic(ctx, TopicSpec{Name: "t", TopicID: records.UUID{0x71}, Partitions: 1,
		Configs: map[string]string{KeyRemoteStorageEnable: "true", "local.retention.ms": "1000", "retention.ms": "5000"}}))
	appendBatch(t, a.log(t, "t", 0), 0, 2, "x")
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(b.m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	require.NoError(t, b.m.WaitForLag(ctx, "m", []string{"t"}, 0))
	require.NoError(t, b.m.Sync(ctx))
	spec, ok := b.dest.Topic("t")
	require.True(t, ok)
	require.Equal(t, map[string]string{"retention.ms": "5000"}, spec.Configs)
	require.Equal(t, statemachine.Mirroring, describePartition(t, b, "m", "t", 0).State)
	require.Equal(t, logBytes(t, a.log(t, "t", 0)), logBytes(t, b.log(t, "t", 0)))
}

// A mirror topic whose remote.storage.enable=true an earlier version copied from the
// tiered source failed non-retryably; the sync turns it off, and a recover mirrors.
func TestTieredStorageCopiedFromTheSourceRecovers(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	require.NoError(t, a.dest.CreateTopic(ctx, TopicSpec{Name: "t", TopicID: records.UUID{0x72}, Partitions: 1,
		Configs: map[string]string{KeyRemoteStorageEnable: "true"}}))
	appendBatch(t, a.log(t, "t", 0), 0, 2, "x")
	require.NoError(t, b.dest.CreateTopic(ctx, TopicSpec{Name: "t", TopicID: records.UUID{0x72}, Partitions: 1,
		Configs: map[string]string{KeyRemoteStorageEnable: "true"}})) // what the earlier sync created
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(b.m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	requireNonRetryable(t, ctx, b, "tiered storage")

	require.NoError(t, b.m.Sync(ctx))
	spec, _ := b.dest.Topic("t")
	require.Equal(t, "false", spec.Configs[KeyRemoteStorageEnable])
	res, err := b.m.RecoverMirrorTopics(ctx, "m", []string{"t"}, RecoverOptions{})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, b.m.WaitForLag(ctx, "m", []string{"t"}, 0))
	require.Equal(t, logBytes(t, a.log(t, "t", 0)), logBytes(t, b.log(t, "t", 0)))
}
