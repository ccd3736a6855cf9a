package mirror

import (
	"context"
	"fmt"
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
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

func TestRetryConfigValidation(t *testing.T) {
	require.NoError(t, DefaultRetryConfig().Validate())
	require.Equal(t, RetryConfig{Initial: time.Second, Max: 5 * time.Minute, MaxAttempts: 100}, DefaultRetryConfig())
	for _, bad := range []RetryConfig{{Initial: -1}, {Initial: 2 * time.Second, Max: time.Second}, {MaxAttempts: -1}, {MaxAttempts: 40000}} {
		_, err := New(Config{Destination: NewMemoryDestination("d", fetcher.MemoryLogOptions{})}, WithFailedRetry(bad))
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", bad)
	}
}

// TestConfigValidationRefusesNegativeCounts: a negative count of fetch loops or of
// active reconcilers is refused, not taken for its default.
func TestConfigValidationRefusesNegativeCounts(t *testing.T) {
	d := NewMemoryDestination("d", fetcher.MemoryLogOptions{})
	for _, bad := range []Config{{Destination: d, FetchersPerMirror: -1}, {Destination: d, ActiveReconcilers: -1}} {
		_, err := New(bad)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", bad)
	}
}

// cutDialer is the network between the mirror and its source: Cut closes every open
// connection and refuses new ones until Restore.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	dials int
}

func (c *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dials++
	if c.cut {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, host)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutDialer) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func (c *cutDialer) Restore() {
	c.mu.Lock()
	c.cut = false
	c.mu.Unlock()
}

// cutSourceFactory is DefaultSourceFactory with the fetch client's connections going
// through cut.
func cutSourceFactory(cut *cutDialer) SourceFactory {
	return func(name string, cfg MirrorConfig) (fetcher.Source, SourceAdmin, error) {
		opts, err := KgoOptions(cfg)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, kgo.Dialer(cut.dial), kgo.ClientID("kmirror-"+name))
		src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{
			SeedBrokers: cfg.BootstrapServers, ClientOptions: opts, IsolationLevel: fetcher.ReadUncommitted,
			MaxWait: cfg.FetchMaxWait, MinBytes: cfg.FetchMinBytes, MaxBytes: cfg.FetchResponseMaxBytes,
		})
		if err != nil {
			return nil, nil, err
		}
		sa, err := metasync.NewKafkaSourceAdmin(cfg)
		if err != nil {
			_ = src.Close()
			return nil, nil, err
		}
		return src, sa, nil
	}
}

// outage is a kfake source behind a cuttable network and a Mirror of its topic "events".
type outage struct {
	src  *kfake.Cluster
	cut  *cutDialer
	m    *Mirror
	dest *LocalDestination
	raw  *kgo.Client
}

func newOutage(t *testing.T, retry RetryConfig) *outage {
	t.Helper()
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	o := &outage{src: src, cut: &cutDialer{}, dest: NewMemoryDestination("dst", fetcher.MemoryLogOptions{})}
	t.Cleanup(func() { require.NoError(t, o.dest.Close()) })
	o.produce(t, "before", 10)
	o.m, err = New(Config{Destination: o.dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		WithSourceFactory(cutSourceFactory(o.cut)),
		WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil }),
		WithFailedRetry(retry))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, o.m.Close()) })
	require.NoError(t, o.m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "50",
		"mirror." + KeySocketTimeoutMs: "400"})) // the prototype test's spelling
	mustOK(t)(o.m.StartMirrorTopics(ctx, "k", []string{"events"}, StartOptions{}))
	require.NoError(t, o.m.WaitForLag(ctx, "k", []string{"events"}, 0))
	o.raw, err = kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(o.raw.Close)
	return o
}

func (o *outage) produce(t *testing.T, tag string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for p := int32(0); p < 2; p++ {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: "events", Partition: p, Value: []byte(fmt.Sprintf("%s-%d", tag, i))})
		}
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
}

// waitFailed waits, partition by partition, until each is FAILED by the outage with
// cond holding, and returns the descriptions seen then. (The partitions retry on their
// own schedule, so they need not be FAILED at the same moment.)
func (o *outage) waitFailed(t *testing.T, ctx context.Context, what string, cond func(PartitionDescription) bool) []PartitionDescription {
	t.Helper()
	var ds []PartitionDescription
	for p := int32(0); p < 2; p++ {
		var d PartitionDescription
		waitCond(t, ctx, o.m, what, func() bool {
			d = describeOn(t, o.m, "k", "events", p)
			return d.State == statemachine.Failed && cond(d)
		})
		ds = append(ds, d)
	}
	return ds
}

// requireCaughtUp checks that both partitions are MIRRORING with the source's exact bytes.
func (o *outage) requireCaughtUp(t *testing.T, ctx context.Context) {
	t.Helper()
	require.NoError(t, o.m.WaitForLag(ctx, "k", []string{"events"}, 0))
	spec, _ := o.dest.Topic("events")
	for p := int32(0); p < 2; p++ {
		d := describeOn(t, o.m, "k", "events", p)
		require.Equal(t, statemachine.Mirroring, d.State)
		l, err := o.dest.Log("events", p)
		require.NoError(t, err)
		require.Equal(t, int64(20), l.LogEndOffset())
		require.Equal(t, rawFetch(t, o.raw, "events", spec.TopicID, p, d.SourceOffset), logBytes(t, l), "partition %d byte for byte", p)
	}
}

// TestSourceOutageFailsThenRecoversByItself: with the source unreachable for longer than
// socket.timeout.ms, the partitions go FAILED with the cause, retryable, and keep
// retrying; once the source is back they return to MIRRORING, caught up, with no action.
func TestSourceOutageFailsThenRecoversByItself(t *testing.T) {
	ctx := testCtx(t)
	o := newOutage(t, RetryConfig{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, MaxAttempts: 1000})
	o.cut.Cut()
	ds := o.waitFailed(t, ctx, "FAILED, retried twice", func(d PartitionDescription) bool { return d.RetryAttempt >= 2 })
	for _, d := range ds {
		require.Contains(t, d.ErrorMessage, "source unreachable")
		require.Contains(t, d.ErrorMessage, "connection refused", "the cause is named")
		require.Equal(t, statemachine.Mirroring, d.PreviousState)
	}
	o.produce(t, "during", 10) // written to the source while the mirror cannot reach it
	o.cut.Restore()
	o.requireCaughtUp(t, ctx)
	waitCond(t, ctx, o.m, "retry attempts reset", func() bool {
		return describeOn(t, o.m, "k", "events", 0).RetryAttempt == 0 && describeOn(t, o.m, "k", "events", 1).RetryAttempt == 0
	})
}

// TestRetriesExhaustedThenRecover: once MaxAttempts retries failed the partitions stay
// FAILED (WaitForStates gives up at once) even with the source back;
// RecoverMirrorTopics brings them back, caught up.
func TestRetriesExhaustedThenRecover(t *testing.T) {
	ctx := testCtx(t)
	o := newOutage(t, RetryConfig{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond, MaxAttempts: 2})
	o.cut.Cut()
	o.waitFailed(t, ctx, "retries exhausted", func(d PartitionDescription) bool { return d.RetryAttempt == 2 })
	o.produce(t, "during", 10)
	o.cut.Restore()
	err := o.m.WaitForStates(ctx, "k", []string{"events"}, statemachine.Mirroring)
	require.ErrorContains(t, err, "is FAILED", "no retry left: the wait fails at once")
	require.NoError(t, ctx.Err())

	res, err := o.m.RecoverMirrorTopics(ctx, "k", []string{"events", "nope"}, RecoverOptions{})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	requireCode(t, admin.CodeUnknownTopicOrPartition, res[1].Err)
	o.requireCaughtUp(t, ctx)
}

// TestRetryAttemptSurvivesRestart: RetryAttempt is stored with the state, so a Mirror
// reopened on the same stores neither forgets exhausted retries nor starts them again;
// RecoverMirrorTopics still works after the restart.
func TestRetryAttemptSurvivesRestart(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a := w.newSite(t, "A")
	createTopic(t, a, "t", records.UUID{0x71}, 1)
	appendBatch(t, a.log(t, "t", 0), 0, 2, "x")
	a.mu.Lock()
	a.corrupt[TopicPartition{Topic: "t", Partition: 0}] = true
	a.mu.Unlock()
	dest := NewMemoryDestination("B", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { require.NoError(t, dest.Close()) })
	store, clog := coordinator.NewMemoryStore(), &MemoryControllerLog{}
	open := func() *Mirror {
		m, err := New(Config{Destination: dest, ControllerLog: clog, Store: store, SyncInterval: -1, FetchIdleWait: time.Millisecond,
			Coordinator: coordinator.Config{NumPartitions: 3, AppendLinger: -1}},
			WithSourceFactory(func(string, MirrorConfig) (fetcher.Source, SourceAdmin, error) {
				return &siteSource{s: a, ls: fetcher.NewLocalSource(fetcher.ReadUncommitted), added: map[TopicPartition]bool{}},
					metasync.NewLocalSourceAdmin(a.dest, nil), nil
			}),
			WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil }),
			WithFailedRetry(RetryConfig{Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond, MaxAttempts: 3}))
		require.NoError(t, err)
		return m
	}
	m := open()
	require.NoError(t, m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	// Never PAUSED: the wait ends with the error of a FAILED partition with no retry left.
	require.ErrorContains(t, m.WaitForStates(ctx, "m", []string{"t"}, statemachine.Paused), "CRC")
	d := describeOn(t, m, "m", "t", 0)
	require.Equal(t, statemachine.Failed, d.State)
	require.Equal(t, int16(3), d.RetryAttempt, "every retry ran")
	require.Equal(t, statemachine.Mirroring, d.PreviousState)
	require.NoError(t, m.Close())

	m = open()
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.ErrorContains(t, m.WaitForStates(ctx, "m", []string{"t"}, statemachine.Paused), "CRC",
		"still no retry left after the restart")
	d = describeOn(t, m, "m", "t", 0)
	require.Equal(t, int16(3), d.RetryAttempt)
	require.Equal(t, statemachine.Mirroring, d.PreviousState)

	a.mu.Lock()
	delete(a.corrupt, TopicPartition{Topic: "t", Partition: 0})
	a.mu.Unlock()
	res, err := m.RecoverMirrorTopics(ctx, "m", []string{"t"}, RecoverOptions{})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, m.WaitForLag(ctx, "m", []string{"t"}, 0))
	l, err := dest.Log("t", 0)
	require.NoError(t, err)
	require.Equal(t, logBytes(t, a.log(t, "t", 0)), logBytes(t, l))
}
