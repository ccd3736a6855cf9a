package adminhandler_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// wireMetrics records the admin requests a Mirror's Metrics is told of.
type wireMetrics struct {
	mirror.NopMetrics
	mu    sync.Mutex
	admin map[string]admin.Code
}

func newWireMetrics() *wireMetrics { return &wireMetrics{admin: map[string]admin.Code{}} }

func (r *wireMetrics) AdminRequest(o admin.RequestObservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.admin[o.API] = o.Code
}

func (r *wireMetrics) adminCode(api string) (admin.Code, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.admin[api]
	return c, ok
}

// TestAdminPeerOverHandler: a Mirror with a non-nop Metrics behind an admin server
// reports the requests it serves to Metrics.AdminRequest; the wire Peer (AdminPeer)
// lists the mirror and finds the LME of a stopped partition through it; and describe
// over the wire carries the source health of a MIRRORING partition whose source is
// gone in its tagged fields, which the Peer reads back.
func TestAdminPeerOverHandler(t *testing.T) {
	ctx := handlerCtx(t)
	rec := newWireMetrics()
	s := newHandlerSite(t, map[string]int32{"orders": 1, "events": 1},
		mirror.WithMetrics(rec), mirror.WithSourceUnreachableAfter(0))
	_, err := s.client.ListClusterMirrors(ctx, admin.NewPtrListClusterMirrorsRequest())
	require.NoError(t, err)
	code, ok := rec.adminCode("ListClusterMirrors")
	require.True(t, ok, "the request is reported to Metrics.AdminRequest")
	require.Equal(t, admin.CodeNone, code)

	require.NoError(t, s.m.CreateClusterMirror(ctx, "a-to-b", map[string]string{
		mirror.KeyBootstrapServers: strings.Join(s.src.ListenAddrs(), ","), mirror.KeyFetchWaitMaxMs: "50"}))
	topics := []string{"orders", "events"}
	requireTopicsOK(t)(s.m.StartMirrorTopics(ctx, "a-to-b", topics, mirror.StartOptions{}))
	require.NoError(t, s.m.WaitForLag(ctx, "a-to-b", topics, 0))
	requireTopicsOK(t)(s.m.StopMirrorTopics(ctx, "a-to-b", []string{"orders"}, mirror.StopOptions{Wait: true}))

	cfg, err := mirror.ParseMirrorConfig(map[string]string{mirror.KeyBootstrapServers: s.addr})
	require.NoError(t, err)
	peer, err := mirror.NewKafkaPeer(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = peer.Close() })
	ls, err := peer.ListClusterMirrors(ctx, mirror.ListFilter{SourceClusterIDs: []string{"handler-source"}})
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, "a-to-b", ls[0].Name)
	stopped := mirror.DescribeOptions{TopicPartitions: map[string][]int32{"orders": {0}}, IncludeStates: true, ClusterID: "handler-source"}
	ds, err := peer.DescribeClusterMirrors(ctx, []string{"a-to-b"}, stopped)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	got := ds[0].Topics[0].Partitions[0]
	require.Equal(t, statemachine.Stopped, got.State)
	local := describeLocal(t, s.m, "orders")
	require.GreaterOrEqual(t, local.LastMirrorEpoch, int32(0))
	require.Equal(t, local.LastMirrorEpoch, got.LastMirrorEpoch, "the peer finds the LME")

	s.src.Close() // the source goes away
	d := waitSourceError(ctx, t, s.m)
	require.Equal(t, statemachine.Mirroring, d.State, "the state stays the KIP's")
	checkHealthOverWire(ctx, t, s, peer, d)
}

// requireTopicsOK fails t on an error of the call or of one of its topics.
func requireTopicsOK(t *testing.T) func([]mirror.TopicResult, error) {
	return func(res []mirror.TopicResult, err error) {
		t.Helper()
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err, "topic %s", r.Topic)
		}
	}
}

// describeLocal describes partition 0 of topic of mirror a-to-b with m's Go API.
func describeLocal(t *testing.T, m *mirror.Mirror, topic string) mirror.PartitionDescription {
	t.Helper()
	ds, err := m.DescribeClusterMirrors(context.Background(), []string{"a-to-b"}, mirror.DescribeOptions{
		TopicPartitions: map[string][]int32{topic: {0}}, IncludeStates: true, IncludeLags: true})
	require.NoError(t, err)
	return ds[0].Topics[0].Partitions[0]
}

// waitSourceError waits until describe names a source error for events-0, re-checking
// at every change of m (Mirror.Changed), and returns that description.
func waitSourceError(ctx context.Context, t *testing.T, m *mirror.Mirror) mirror.PartitionDescription {
	t.Helper()
	for {
		ch := m.Changed()
		if d := describeLocal(t, m, "events"); d.SourceErrorCode != admin.CodeNone {
			return d
		}
		select {
		case <-ch:
		case <-ctx.Done():
			require.FailNow(t, "timed out waiting for a source error in describe")
		}
	}
}

// checkHealthOverWire: describe over the wire carries the source health of d (events-0)
// in its tagged fields, and the peer reads them back.
func checkHealthOverWire(ctx context.Context, t *testing.T, s *handlerSite, peer *mirror.AdminPeer, d mirror.PartitionDescription) {
	require.NotEmpty(t, d.SourceErrorMessage)
	require.False(t, d.SourceUnreachableSince.IsZero())
	req := admin.NewPtrDescribeClusterMirrorsRequest()
	req.IncludeMirrorStates, req.IncludeMirrorLags = true, true
	resp, err := s.client.DescribeClusterMirrors(ctx, req)
	require.NoError(t, err)
	var wire *admin.DescribeClusterMirrorsResponseMirrorTopicPartition
	for _, tp := range resp.Mirrors[0].Topics {
		if tp.TopicName == "events" {
			wire = &tp.Partitions[0]
		}
	}
	require.NotNil(t, wire)
	require.Equal(t, int16(d.SourceErrorCode), wire.SourceErrorCode)
	require.NotNil(t, wire.SourceErrorMessage)
	require.Positive(t, wire.LastFetchTimestamp)
	require.Equal(t, d.SourceUnreachableSince.UnixMilli(), wire.SourceUnreachableSince)

	ds, err := peer.DescribeClusterMirrors(ctx, []string{"a-to-b"}, mirror.DescribeOptions{
		TopicPartitions: map[string][]int32{"events": {0}}, IncludeStates: true, IncludeLags: true, ClusterID: "handler-source"})
	require.NoError(t, err)
	back := ds[0].Topics[0].Partitions[0]
	require.Equal(t, d.SourceErrorCode, back.SourceErrorCode)
	require.Equal(t, *wire.SourceErrorMessage, back.SourceErrorMessage)
	require.Equal(t, d.SourceUnreachableSince.UnixMilli(), back.SourceUnreachableSince.UnixMilli())
	require.Equal(t, wire.LastFetchTimestamp, back.LastFetch.UnixMilli())
}
