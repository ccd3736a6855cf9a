package adminhandler_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// TestStartRefusesUnplaceableReplicationFactor: a destination that cannot place the
// replicas of a new mirror topic (a one-node LocalDestination whose replication factor is
// 3) answers StartMirrorTopics with INVALID_REPLICATION_FACTOR on the wire, for that
// topic only, and nothing is created: no destination topic, no mirror topic.
func TestStartRefusesUnplaceableReplicationFactor(t *testing.T) {
	s := newHandlerSite(t, map[string]int32{"orders": 2})
	ctx := handlerCtx(t)
	bootstrap := strings.Join(s.src.ListenAddrs(), ",")
	create := admin.NewPtrCreateClusterMirrorRequest()
	create.MirrorName = "m1"
	create.Configs = []admin.CreateClusterMirrorRequestConfig{{Name: mirror.KeyBootstrapServers, Value: &bootstrap}}
	_, err := s.client.CreateClusterMirror(ctx, create)
	require.NoError(t, err)
	require.NoError(t, s.dest.SetReplicationFactor(3))

	start := admin.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = "m1"
	for _, n := range []string{"orders", "nope"} {
		tp := admin.NewStartMirrorTopicsRequestTopic()
		tp.Name = n
		start.Topics = append(start.Topics, tp)
	}
	resp, err := s.client.StartMirrorTopics(ctx, start)
	require.NoError(t, err)
	codes := handlerTopicCodes(resp.Topics, func(t admin.StartMirrorTopicsResponseTopic) string { return t.Name },
		func(t admin.StartMirrorTopicsResponseTopic) int16 { return t.ErrorCode })
	require.Equal(t, map[string]admin.Code{"orders": admin.CodeInvalidReplicationFactor, "nope": admin.CodeUnknownTopicOrPartition}, codes)
	require.Equal(t, admin.Code(38), admin.CodeInvalidReplicationFactor, "Kafka's number")
	for _, tr := range resp.Topics {
		if tr.Name == "orders" {
			require.NotNil(t, tr.ErrorMessage)
			require.Contains(t, *tr.ErrorMessage, "3 time(s)")
		}
	}
	_, exists := s.dest.Topic("orders")
	require.False(t, exists, "no destination topic")
	_, known := s.m.Controller().Topic("orders")
	require.False(t, known, "no mirror topic")

	// Once the destination can place the replicas the same start succeeds.
	require.NoError(t, s.dest.SetReplicationFactor(1))
	resp, err = s.client.StartMirrorTopics(ctx, start)
	require.NoError(t, err)
	codes = handlerTopicCodes(resp.Topics, func(t admin.StartMirrorTopicsResponseTopic) string { return t.Name },
		func(t admin.StartMirrorTopicsResponseTopic) int16 { return t.ErrorCode })
	require.Equal(t, admin.CodeNone, codes["orders"])
	require.NoError(t, s.m.WaitForStates(ctx, "m1", []string{"orders"}, statemachine.Mirroring))
}

// TestDiscoveryRefusesUnplaceableReplicationFactor: the metadata sync does not create a
// discovered topic's destination topic either; the cycle reports
// INVALID_REPLICATION_FACTOR for it, and creates it once the replicas can be placed.
func TestDiscoveryRefusesUnplaceableReplicationFactor(t *testing.T) {
	s := newHandlerSite(t, map[string]int32{"orders": 1})
	ctx := handlerCtx(t)
	require.NoError(t, s.m.CreateClusterMirror(ctx, "m1", map[string]string{
		mirror.KeyBootstrapServers: strings.Join(s.src.ListenAddrs(), ","), mirror.KeyTopicsInclude: ".*"}))
	require.NoError(t, s.dest.SetReplicationFactor(2))

	// Per-topic failures are not cycle failures: Sync logs them and creates no
	// destination topic (the discovered mirror topic waits for one).
	require.NoError(t, s.m.Sync(ctx))
	_, exists := s.dest.Topic("orders")
	require.False(t, exists, "discovered topic created with replicas the destination cannot place")

	require.NoError(t, s.dest.SetReplicationFactor(1))
	require.NoError(t, s.m.Sync(ctx))
	_, exists = s.dest.Topic("orders")
	require.True(t, exists)
}

// threeReplicas is a host Destination that answers ReplicaPlacement itself (factor 3, two
// brokers live) over a LocalDestination that would create the topic.
type threeReplicas struct{ *mirror.LocalDestination }

func (threeReplicas) ReplicationFactor() int16 { return 3 }
func (threeReplicas) PlaceableReplicas() int   { return 2 }

// TestStartChecksHostReplicaPlacement: StartMirrorTopics asks the Destination's
// ReplicaPlacement before CreateTopic, so a host Destination whose CreateTopic does not
// check it creates nothing either.
func TestStartChecksHostReplicaPlacement(t *testing.T) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	require.NoError(t, src.CreateTopic("orders", 1, nil))
	inner := mirror.NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { _ = inner.Close() })
	m, err := mirror.New(mirror.Config{Destination: threeReplicas{inner}, SyncInterval: -1},
		mirror.WithPeerFactory(func(string, mirror.MirrorConfig) (mirror.Peer, error) { return nil, nil }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	ctx := handlerCtx(t)
	require.NoError(t, m.CreateClusterMirror(ctx, "m1", map[string]string{mirror.KeyBootstrapServers: src.ListenAddrs()[0]}))
	res, err := m.StartMirrorTopics(ctx, "m1", []string{"orders"}, mirror.StartOptions{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, admin.CodeInvalidReplicationFactor, admin.CodeOf(res[0].Err), "%v", res[0].Err)
	require.Contains(t, res[0].Err.Error(), "can place 2 replica(s)")
	_, exists := inner.Topic("orders")
	require.False(t, exists)
}
