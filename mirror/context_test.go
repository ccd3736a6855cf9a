package mirror

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// TestCancelledContext: every public method of Mirror that takes a context
// returns ctx.Err() for an already-cancelled one, and changes nothing.
func TestCancelledContext(t *testing.T) {
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	require.NoError(t, b.m.CreateClusterMirror(testCtx(t), "m", bootstrap(a)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func() error{
		"CreateClusterMirror": func() error { return b.m.CreateClusterMirror(ctx, "n", bootstrap(a)) },
		"StartMirrorTopics":   func() error { _, err := b.m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}); return err },
		"StopMirrorTopics":    func() error { _, err := b.m.StopMirrorTopics(ctx, "m", []string{"t"}, StopOptions{}); return err },
		"PauseMirrorTopics": func() error {
			_, err := b.m.PauseMirrorTopics(ctx, "m", []string{"t"}, LifecycleOptions{})
			return err
		},
		"ResumeMirrorTopics": func() error {
			_, err := b.m.ResumeMirrorTopics(ctx, "m", []string{"t"}, LifecycleOptions{})
			return err
		},
		"DeleteClusterMirrors":   func() error { return b.m.DeleteClusterMirrors(ctx, []string{"m"})["m"] },
		"ListClusterMirrors":     func() error { _, err := b.m.ListClusterMirrors(ctx, ListFilter{}); return err },
		"DescribeClusterMirrors": func() error { _, err := b.m.DescribeClusterMirrors(ctx, nil, DescribeOptions{}); return err },
		"ReadMirrorStates": func() error {
			_, err := b.m.ReadMirrorStates(ctx, &admin.ReadMirrorStatesRequest{MirrorName: "m"})
			return err
		},
		"WriteMirrorStates": func() error {
			_, err := b.m.WriteMirrorStates(ctx, &admin.WriteMirrorStatesRequest{MirrorName: "m"})
			return err
		},
		"ReadMirrorOffsets": func() error {
			_, err := b.m.ReadMirrorOffsets(ctx, &admin.ReadMirrorOffsetsRequest{MirrorName: "m"})
			return err
		},
		"BumpLeaderEpochs": func() error {
			_, err := b.m.BumpLeaderEpochs(ctx, admin.NewPtrBumpLeaderEpochsRequest())
			return err
		},
		"WaitForStates": func() error { return b.m.WaitForStates(ctx, "m", nil, statemachine.Mirroring) },
		"WaitForLag":    func() error { return b.m.WaitForLag(ctx, "m", nil, 0) },
		"Sync":          func() error { return b.m.Sync(ctx) },
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), context.Canceled, name)
	}
	_, ok := b.m.ctrl.Mirror("n")
	require.False(t, ok, "a cancelled create must not create")
	_, ok = b.m.ctrl.Mirror("m")
	require.True(t, ok, "a cancelled delete must not delete")
}

// silentListener accepts TCP connections and never reads or answers.
func silentListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestUnresponsiveSource (Bar): against a source that accepts TCP and never
// answers, StartMirrorTopics with a 2 s deadline returns within 6 s with the
// deadline's error (it hung in sarama.NewClient for minutes), and so do the
// calls that resolve the source cluster id.
func TestUnresponsiveSource(t *testing.T) {
	addr := silentListener(t)
	dest := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	m, err := New(Config{Destination: dest, SyncInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.CreateClusterMirror(testCtx(t), "m", map[string]string{KeyBootstrapServers: addr}))
	calls := map[string]func(context.Context) error{
		"StartMirrorTopics": func(ctx context.Context) error {
			_, err := m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{})
			return err
		},
		"ListClusterMirrors": func(ctx context.Context) error {
			_, err := m.ListClusterMirrors(ctx, ListFilter{SourceClusterIDs: []string{"x"}})
			return err
		},
		"DescribeClusterMirrors": func(ctx context.Context) error {
			_, err := m.DescribeClusterMirrors(ctx, nil, DescribeOptions{ClusterID: "x"})
			return err
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		cancel()
		require.True(t, errors.Is(err, context.DeadlineExceeded), "%s: %v", name, err)
		require.Less(t, took, 6*time.Second, name)
		t.Logf("%s returned after %v: %v", name, took.Round(time.Millisecond), err)
	}
}
