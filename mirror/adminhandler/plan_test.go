package adminhandler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// TestPlanOverWire: a start that would truncate a stopped topic's mirrored records
// fully (no LME: the peer is none) is refused over the wire with
// MIRROR_TRUNCATION_REFUSED; version 1 carries the plan, a version 0 client (which
// cannot ask to allow it) gets the same refusal; ValidateOnly changes nothing and
// AllowTruncation lets it through.
func TestPlanOverWire(t *testing.T) {
	s := newHandlerSite(t, map[string]int32{"orders": 2})
	ctx := handlerCtx(t)
	bootstrap := strings.Join(s.src.ListenAddrs(), ",")
	require.NoError(t, s.m.CreateClusterMirror(ctx, "m1", map[string]string{mirror.KeyBootstrapServers: bootstrap}))
	res, err := s.m.StartMirrorTopics(ctx, "m1", []string{"orders"}, mirror.StartOptions{})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	for p := range int32(2) {
		l, err := s.dest.Log("orders", p)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return l.LogEndOffset() == 5 }, 10*time.Second, 5*time.Millisecond)
	}
	_, err = s.m.StopMirrorTopics(ctx, "m1", []string{"orders"}, mirror.StopOptions{Wait: true})
	require.NoError(t, err)

	start := func(validateOnly, allow bool) *admin.StartMirrorTopicsRequest {
		req := admin.NewPtrStartMirrorTopicsRequest()
		req.MirrorName, req.ValidateOnly, req.AllowTruncation = "m1", validateOnly, allow
		tp := admin.NewStartMirrorTopicsRequestTopic()
		tp.Name = "orders"
		req.Topics = append(req.Topics, tp)
		return req
	}
	for _, validateOnly := range []bool{true, false} {
		resp, err := s.client.StartMirrorTopics(ctx, start(validateOnly, false))
		require.NoError(t, err)
		require.Len(t, resp.Topics, 1)
		rt := resp.Topics[0]
		require.Equal(t, admin.CodeMirrorTruncationRefused, admin.Code(rt.ErrorCode), "validateOnly %v", validateOnly)
		require.Len(t, rt.Partitions, 2)
		for _, p := range rt.Partitions {
			require.True(t, p.FullTruncation)
			require.Equal(t, int64(5), p.RemovedRecords)
			require.Equal(t, [2]int64{0, 6}, [2]int64{p.RemovedFromOffset, p.RemovedToOffset}, "5 records and the stop's barrier")
			require.Equal(t, int8(statemachine.Stopped), p.StateNow)
			require.Equal(t, int8(statemachine.Mirroring), p.StateAfter)
		}
		ts, _ := s.m.Controller().Topic("orders")
		require.Equal(t, statemachine.DesiredStopped, ts.Desired, "validateOnly %v: nothing changed", validateOnly)
		require.False(t, s.dest.ReadOnly("orders", 0))
	}

	v := admin.Versions()
	v.SetMaxKeyVersion(admin.KeyStartMirrorTopics, 0)
	kcl, err := kgo.NewClient(append(admin.ClientOpts(), kgo.SeedBrokers(s.addr), kgo.MaxVersions(v), kgo.RequestRetries(0))...)
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	resp, err := admin.NewClient(kcl).StartMirrorTopics(ctx, start(false, false))
	require.NoError(t, err)
	require.Equal(t, int16(0), resp.Version)
	require.Equal(t, admin.CodeMirrorTruncationRefused, admin.Code(resp.Topics[0].ErrorCode), "a version 0 start is refused too")

	resp, err = s.client.StartMirrorTopics(ctx, start(false, true))
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	require.Len(t, resp.Topics[0].Partitions, 2)
	require.NoError(t, s.m.WaitForStates(ctx, "m1", []string{"orders"}, statemachine.Mirroring))
}
