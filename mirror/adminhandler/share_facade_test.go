package adminhandler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// alterShareStart sets the start offset of share group on one partition of the kfake
// source (AlterShareGroupOffsets).
func alterShareStart(t *testing.T, addrs []string, group, topic string, partition int32, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	rp.Partition, rp.StartOffset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
}

// TestShareGroupSyncThroughFacade: the facade's metadata sync (DefaultSourceFactory's
// source admin, the reconcilers' MIRRORING states) copies a kfake source's share-group
// start offsets into the LocalDestination, clamped to the mirrored data (50 → 5), and stops
// following them once the topic is PAUSED.
func TestShareGroupSyncThroughFacade(t *testing.T) {
	s := newHandlerSite(t, map[string]int32{"orders": 2})
	ctx := handlerCtx(t)
	addrs := s.src.ListenAddrs()
	require.NoError(t, s.m.CreateClusterMirror(ctx, "m1", map[string]string{mirror.KeyBootstrapServers: strings.Join(addrs, ",")}))
	res, err := s.m.StartMirrorTopics(ctx, "m1", []string{"orders"}, mirror.StartOptions{})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, s.m.WaitForLag(ctx, "m1", []string{"orders"}, 0))

	alterShareStart(t, addrs, "sg", "orders", 0, 3)
	alterShareStart(t, addrs, "sg", "orders", 1, 4)
	alterShareStart(t, addrs, "far", "orders", 0, 50) // kfake takes it; the destination holds 5
	require.NoError(t, s.m.Sync(ctx))
	p0, p1 := mirror.TopicPartition{Topic: "orders", Partition: 0}, mirror.TopicPartition{Topic: "orders", Partition: 1}
	require.Equal(t, map[mirror.TopicPartition]int64{p0: 3, p1: 4}, s.dest.ShareStartOffsets("sg"))
	require.Equal(t, map[mirror.TopicPartition]int64{p0: 5}, s.dest.ShareStartOffsets("far"), "clamped to the destination log end")

	_, err = s.m.PauseMirrorTopics(ctx, "m1", []string{"orders"}, mirror.LifecycleOptions{Wait: true})
	require.NoError(t, err)
	require.NoError(t, s.m.WaitForStates(ctx, "m1", []string{"orders"}, statemachine.Paused))
	alterShareStart(t, addrs, "sg", "orders", 0, 5)
	require.NoError(t, s.m.Sync(ctx))
	require.Equal(t, int64(3), s.dest.ShareStartOffsets("sg")[p0], "a PAUSED topic is not synced")
}
