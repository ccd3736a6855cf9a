package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/adminhandler"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/statemachine"
)

// cutNet is the network between the mirror and its source: Cut closes every
// connection and refuses new ones until Restore.
type cutNet struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cutNet) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, host)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutNet) set(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// TestMirrorctlRecover: the source stays unreachable until the automatic retries of
// the partition ran out (MaxAttempts 1); with the source back it stays FAILED, and
// `mirrorctl --recover` brings it back to MIRRORING, caught up.
func TestMirrorctlRecover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	produce := func(v string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
		require.NoError(t, err)
		defer cl.Close()
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr())
	}
	produce("before")
	cut := &cutNet{}
	sources := func(name string, cfg mirror.MirrorConfig) (fetcher.Source, mirror.SourceAdmin, error) {
		opts, err := mirror.KgoOptions(cfg)
		if err != nil {
			return nil, nil, err
		}
		s, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{SeedBrokers: cfg.BootstrapServers,
			ClientOptions: append(opts, kgo.Dialer(cut.dial)), IsolationLevel: fetcher.ReadUncommitted, MaxWait: cfg.FetchMaxWait})
		if err != nil {
			return nil, nil, err
		}
		sa, err := metasync.NewKafkaSourceAdmin(cfg)
		return s, sa, err
	}
	dest := mirror.NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { _ = dest.Close() })
	m, err := mirror.New(mirror.Config{Destination: dest, SyncInterval: -1, FetchIdleWait: 10 * time.Millisecond},
		mirror.WithSourceFactory(sources),
		mirror.WithPeerFactory(func(string, mirror.MirrorConfig) (mirror.Peer, error) { return nil, nil }),
		mirror.WithFailedRetry(mirror.RetryConfig{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond, MaxAttempts: 1}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	srv, err := admin.NewServer(admin.ServerConfig{Handler: adminhandler.New(m)})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, admin.ErrServerClosed)
	})
	e := &env{addr: ln.Addr().String(), bootstrap: strings.Join(src.ListenAddrs(), ","), m: m}

	require.NoError(t, m.CreateClusterMirror(ctx, "m", map[string]string{
		mirror.KeyBootstrapServers: e.bootstrap, mirror.KeyFetchWaitMaxMs: "50", "mirror.socket.timeout.ms": "300"}))
	_, err = m.StartMirrorTopics(ctx, "m", []string{"orders"}, mirror.StartOptions{})
	require.NoError(t, err)
	require.NoError(t, m.WaitForLag(ctx, "m", []string{"orders"}, 0))

	cut.set(true)
	part := func() mirror.PartitionDescription {
		ds, err := m.DescribeClusterMirrors(ctx, []string{"m"}, mirror.DescribeOptions{IncludeStates: true, IncludeLags: true})
		require.NoError(t, err)
		return ds[0].Topics[0].Partitions[0]
	}
	// The topic is never paused: the wait ends only with the error of a FAILED
	// partition that has no retry left.
	err = m.WaitForStates(ctx, "m", []string{"orders"}, statemachine.Paused)
	require.ErrorContains(t, err, "is FAILED")
	require.NoError(t, ctx.Err())
	p := part()
	require.Equal(t, statemachine.Failed, p.State)
	require.Equal(t, int16(1), p.RetryAttempt, "the one automatic retry ran")
	require.Contains(t, p.ErrorMessage, "source unreachable")
	produce("during")
	cut.set(false)
	require.ErrorContains(t, m.WaitForStates(ctx, "m", []string{"orders"}, statemachine.Mirroring), "is FAILED")

	code, out, errOut := e.ctl(t, "--describe", "--mirror", "m", "--failed")
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `(?m)^m\s+orders\s+0\s+1\s+.*source unreachable`, out)
	code, out, errOut = e.ctl(t, "--recover", "--mirror", "m", "--topics", "orders")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `Topic "orders" of mirror "m" is recovering: 1 FAILED partition restarted.`)
	require.NoError(t, m.WaitForLag(ctx, "m", []string{"orders"}, 0))
	l, err := dest.Log("orders", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), l.LogEndOffset())

	code, out, errOut = e.ctl(t, "--recover", "--mirror", "m", "--topics", "orders")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "Topic \"orders\" of mirror \"m\" had no FAILED partition: nothing to recover.\n", out)

	code, _, errOut = e.ctl(t, "--recover", "--mirror", "m")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--recover requires --topics")
}
