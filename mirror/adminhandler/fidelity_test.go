package adminhandler_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// wirePartition describes partition 0 of "orders" in mirror m1 over the wire.
func wirePartition(t *testing.T, s *handlerSite) admin.DescribeClusterMirrorsResponseMirrorTopicPartition {
	t.Helper()
	req := admin.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{"m1"}
	req.IncludeMirrorStates, req.IncludeMirrorLags = true, true
	resp, err := s.client.DescribeClusterMirrors(handlerCtx(t), req)
	require.NoError(t, err)
	require.Len(t, resp.Mirrors, 1)
	require.Len(t, resp.Mirrors[0].Topics, 1)
	require.Len(t, resp.Mirrors[0].Topics[0].Partitions, 1)
	return resp.Mirrors[0].Topics[0].Partitions[0]
}

// waitWire polls the wire describe until cond holds (each answer is a new request; the
// facade's Changed channel paces the polls).
func waitWire(t *testing.T, s *handlerSite, what string, cond func(admin.DescribeClusterMirrorsResponseMirrorTopicPartition) bool) admin.DescribeClusterMirrorsResponseMirrorTopicPartition {
	t.Helper()
	ctx := handlerCtx(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		p := wirePartition(t, s)
		if cond(p) {
			return p
		}
		select {
		case <-ctx.Done():
			require.FailNow(t, "timed out waiting over the wire: "+what, "last %+v", p)
		case <-s.m.Changed():
		case <-tick.C:
		}
	}
}

// TestFidelityOverWire: DescribeClusterMirrors v1 carries the fidelity check's
// verified offset and the source offset's time; a frozen source (every Fetch held
// by kfake) is shown unreachable within socket.timeout.ms and stays shown through a
// FAILED retry that moved the partition back to MIRRORING.
func TestFidelityOverWire(t *testing.T) {
	s := newHandlerSite(t, map[string]int32{"orders": 1},
		mirror.WithSourceUnreachableAfter(400*time.Millisecond),
		mirror.WithFailedRetry(mirror.RetryConfig{Initial: 50 * time.Millisecond, Max: 100 * time.Millisecond, MaxAttempts: 1000}))
	ctx := handlerCtx(t)
	require.NoError(t, s.m.CreateClusterMirror(ctx, "m1", map[string]string{
		mirror.KeyBootstrapServers: s.src.ListenAddrs()[0], mirror.KeyFetchWaitMaxMs: "50",
		"socket.timeout.ms": "400", "fidelity.check.interval.ms": "50"}))
	res, err := s.m.StartMirrorTopics(ctx, "m1", []string{"orders"}, mirror.StartOptions{})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	p := waitWire(t, s, "verified to the log end", func(p admin.DescribeClusterMirrorsResponseMirrorTopicPartition) bool {
		return p.DestinationOffset == 5 && p.VerifiedOffset == 5
	})
	require.Positive(t, p.VerifiedTimestamp)
	require.Positive(t, p.SourceOffsetTimestamp)
	require.Equal(t, int64(5), p.SourceOffset)

	var mu sync.Mutex
	thaw, frozen := make(chan struct{}), true
	unfreeze := func() {
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			frozen = false
			close(thaw)
		}
	}
	t.Cleanup(unfreeze)
	s.src.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		s.src.KeepControl()
		mu.Lock()
		f := frozen
		mu.Unlock()
		if f {
			s.src.SleepControl(func() { <-thaw })
		}
		return nil, nil, false
	})
	freeze := time.Now()
	p = waitWire(t, s, "frozen source shown", func(p admin.DescribeClusterMirrorsResponseMirrorTopicPartition) bool {
		return p.SourceUnreachableSince >= 0
	})
	require.LessOrEqual(t, p.SourceUnreachableSince, freeze.Add(400*time.Millisecond).UnixMilli(), "within one socket.timeout.ms")
	require.Equal(t, int16(admin.CodeRequestTimedOut), p.SourceErrorCode)
	require.Equal(t, int64(-1), p.TimeLagMs, "no stale time lag")
	p = waitWire(t, s, "shown through a retry", func(p admin.DescribeClusterMirrorsResponseMirrorTopicPartition) bool {
		return p.RetryAttempt >= 1 && statemachine.State(p.State) != statemachine.Failed && p.SourceUnreachableSince >= 0
	})
	require.NotNil(t, p.SourceErrorMessage)
	unfreeze()
	waitWire(t, s, "reachable again", func(p admin.DescribeClusterMirrorsResponseMirrorTopicPartition) bool {
		return statemachine.State(p.State) == statemachine.Mirroring && p.SourceUnreachableSince < 0
	})
}

// TestDescribeResponseVersion0StillDecodes: a version 0 answer (an older server) has
// none of the version 1 fields and decodes with their defaults; a version 1 answer
// round-trips them.
func TestDescribeResponseVersion0StillDecodes(t *testing.T) {
	resp := admin.NewPtrDescribeClusterMirrorsResponse()
	m := admin.NewDescribeClusterMirrorsResponseMirror()
	m.MirrorName = "m1"
	tp := admin.NewDescribeClusterMirrorsResponseMirrorTopic()
	tp.TopicName = "orders"
	pp := admin.NewDescribeClusterMirrorsResponseMirrorTopicPartition()
	pp.SourceOffset, pp.VerifiedOffset, pp.VerifiedTimestamp, pp.SourceOffsetTimestamp = 9, 7, 1000, 2000
	tp.Partitions = append(tp.Partitions, pp)
	m.Topics = append(m.Topics, tp)
	resp.Mirrors = append(resp.Mirrors, m)
	for _, v := range []int16{0, 1} {
		resp.SetVersion(v)
		got := admin.NewPtrDescribeClusterMirrorsResponse()
		got.SetVersion(v)
		require.NoError(t, got.ReadFrom(resp.AppendTo(nil)))
		gp := got.Mirrors[0].Topics[0].Partitions[0]
		require.Equal(t, int64(9), gp.SourceOffset)
		if v == 0 {
			require.Equal(t, int64(-1), gp.VerifiedOffset)
			require.Equal(t, int64(-1), gp.SourceOffsetTimestamp)
		} else {
			require.Equal(t, int64(7), gp.VerifiedOffset)
			require.Equal(t, int64(1000), gp.VerifiedTimestamp)
			require.Equal(t, int64(2000), gp.SourceOffsetTimestamp)
		}
	}
}
