package mirror

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// startMirrored starts mirror "m" of topic t (one partition, id) from a to b and waits
// until it caught up.
func startMirrored(t *testing.T, ctx context.Context, a, b *site, id records.UUID) {
	t.Helper()
	createTopic(t, a, "t", id, 1)
	appendBatch(t, a.log(t, "t", 0), 0, 2, "x")
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(b.m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	require.NoError(t, b.m.WaitForLag(ctx, "m", []string{"t"}, 0))
}

// TestMirrorTopicGuards: CreatePartitions, DeleteTopics and DeleteRecords of a mirror topic are refused
// with INVALID_CLUSTER_MIRROR_STATES until it is STOPPED; other topics are unaffected.
func TestMirrorTopicGuards(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	startMirrored(t, ctx, a, b, records.UUID{0x65})
	require.NoError(t, b.dest.CreateTopic(ctx, TopicSpec{Name: "local", TopicID: records.UUID{0x66}, Partitions: 1}))

	requireCode(t, admin.CodeInvalidClusterMirrorStates, b.dest.ClientCreatePartitions(ctx, "t", 3))
	err := b.dest.DeleteTopic(ctx, "t")
	requireCode(t, admin.CodeInvalidClusterMirrorStates, err)
	require.Contains(t, err.Error(), "stop the mirror topic first")
	spec, ok := b.dest.Topic("t")
	require.True(t, ok)
	require.Equal(t, int32(1), spec.Partitions)
	mustOK(t)(b.m.PauseMirrorTopics(ctx, "m", []string{"t"}, LifecycleOptions{Wait: true}))
	requireCode(t, admin.CodeInvalidClusterMirrorStates, b.dest.DeleteTopic(ctx, "t")) // PAUSED is not STOPPED

	_, err = b.dest.DeleteRecords(ctx, "t", 0, 1)
	requireCode(t, admin.CodeInvalidClusterMirrorStates, err)
	require.Equal(t, int64(0), b.log(t, "t", 0).LogStartOffset(), "nothing deleted")
	require.NoError(t, b.dest.ClientCreatePartitions(ctx, "local", 2), "not a mirror topic")
	appendBatch(t, b.log(t, "local", 0), 0, 3, "l")
	low, err := b.dest.DeleteRecords(ctx, "local", 0, 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), low)
	_, err = b.dest.DeleteRecords(ctx, "local", 0, 99)
	require.ErrorIs(t, err, fetcher.ErrOffsetOutOfRange)
	require.NoError(t, b.dest.DeleteTopic(ctx, "local"))
	_, ok = b.dest.Topic("local")
	require.False(t, ok)

	mustOK(t)(b.m.StopMirrorTopics(ctx, "m", []string{"t"}, StopOptions{Wait: true}))
	low, err = b.dest.DeleteRecords(ctx, "t", 0, -1)
	require.NoError(t, err, "allowed once STOPPED")
	require.Equal(t, b.log(t, "t", 0).HighWatermark(), low)
	require.NoError(t, b.dest.ClientCreatePartitions(ctx, "t", 2))
	require.NoError(t, b.dest.DeleteTopic(ctx, "t"))
	requireCode(t, admin.CodeUnknownTopicOrPartition, b.dest.DeleteTopic(ctx, "t"))
}

// TestStartRefusedLeavesNoDestinationTopic: a topic the controller refuses (it matches
// the mirror's exclude patterns) gets no destination topic.
func TestStartRefusedLeavesNoDestinationTopic(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	createTopic(t, a, "audit", records.UUID{0x67}, 1)
	createTopic(t, a, "t", records.UUID{0x68}, 1)
	cfg := bootstrap(a)
	cfg[KeyTopicsExclude] = "audit"
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", cfg))
	res, err := b.m.StartMirrorTopics(ctx, "m", []string{"audit", "t"}, StartOptions{})
	require.NoError(t, err)
	require.Len(t, res, 2)
	requireCode(t, admin.CodeInvalidRequest, res[0].Err)
	require.NoError(t, res[1].Err)
	_, ok := b.dest.Topic("audit")
	require.False(t, ok, "no destination topic for a refused start")
	_, ok = b.dest.Topic("t")
	require.True(t, ok)
}
