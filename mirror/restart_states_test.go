package mirror

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// openSite opens root with the default stores, the destination wrapped by wrap (nil:
// the truncWatch itself), and a plain Kafka source (no peer).
func openSite(t *testing.T, root string, wrap func(*truncWatch) Destination, opts ...Option) (*truncWatch, *Mirror) {
	t.Helper()
	d, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	w := &truncWatch{LocalDestination: d, logs: map[TopicPartition]fetcher.Log{}}
	var dest Destination = w
	if wrap != nil {
		dest = wrap(w)
	}
	opts = append([]Option{WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil })}, opts...)
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond}, opts...)
	require.NoError(t, err)
	return w, m
}

// replicaGate is a ReplicaWaiter: PREPARING's WaitReplicas counts calls and, while
// block is set, waits for the Mirror to close.
type replicaGate struct {
	*truncWatch
	block   bool
	calls   atomic.Int32
	reached chan struct{}
}

func (g *replicaGate) WaitReplicas(ctx context.Context, topic string, partition int32, offset int64, all bool) error {
	if g.calls.Add(1) == 1 && g.reached != nil {
		close(g.reached)
	}
	if g.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func startSource(t *testing.T, ctx context.Context, n int) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	produceTo(t, ctx, src, "t", 1, n, "a")
	raw, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	return src, raw
}

// TestRestartInsidePreparingRedoesPreparing: a site killed while a partition is
// PREPARING (held in WaitReplicas) comes back PREPARING and runs PREPARING again (its
// replica wait is called again), then mirrors byte for byte, read-only.
func TestRestartInsidePreparingRedoesPreparing(t *testing.T) {
	ctx := testCtx(t)
	src, raw := startSource(t, ctx, 10)
	root := t.TempDir()
	gate := &replicaGate{block: true, reached: make(chan struct{})}
	w, m := openSite(t, root, func(w *truncWatch) Destination { gate.truncWatch = w; return gate })
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
	mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{}))
	<-gate.reached
	require.Equal(t, statemachine.Preparing, describeOn(t, m, "k", "t", 0).State)
	require.NoError(t, m.Close())
	require.NoError(t, w.Close())

	var evs eventLog
	gate2 := &replicaGate{}
	w, m = openSite(t, root, func(w *truncWatch) Destination { gate2.truncWatch = w; return gate2 }, WithEvents(evs.add))
	t.Cleanup(func() { require.NoError(t, m.Close()); require.NoError(t, w.Close()) })
	require.NoError(t, m.WaitForStates(ctx, "k", []string{"t"}, statemachine.Mirroring))
	require.GreaterOrEqual(t, gate2.calls.Load(), int32(1), "PREPARING ran again after the restart")
	first, ok := evs.find(func(StateChange) bool { return true })
	require.True(t, ok)
	require.Equal(t, StateChange{Mirror: "k", Topic: "t", Partition: 0, From: statemachine.Preparing, To: statemachine.Mirroring}, first)
	waitCond(t, ctx, m, "caught up", func() bool { return describeOn(t, m, "k", "t", 0).DestinationOffset == 10 })
	l, err := w.Log("t", 0)
	require.NoError(t, err)
	spec, _ := w.Topic("t")
	require.Equal(t, rawFetch(t, raw, "t", spec.TopicID, 0, 10), logBytes(t, l))
	require.True(t, w.ReadOnly("t", 0) && l.ReadOnly())
}

// barrierGate holds STOPPING at its MIRROR_PID_RESET append until release; then the
// append fails (crash before the barrier) or goes through (crash after it, before
// the STOPPED write).
type barrierGate struct {
	*truncWatch
	reached, release chan struct{}
	appendIt         bool
}

type barrierGateLog struct {
	fetcher.Log
	g *barrierGate
}

func (g *barrierGate) Log(topic string, partition int32) (fetcher.Log, error) {
	l, err := g.truncWatch.Log(topic, partition)
	if err != nil {
		return nil, err
	}
	return &barrierGateLog{Log: l, g: g}, nil
}

func (l *barrierGateLog) AppendAsLeader(batch []byte) (int64, error) {
	if b, err := records.ParseBatch(batch); err == nil && b.Attributes().IsControl() {
		if typ, _ := b.ControlType(); typ == records.ControlMirrorPIDReset {
			close(l.g.reached)
			<-l.g.release
			if !l.g.appendIt {
				return 0, errors.New("injected: killed before the barrier")
			}
		}
	}
	return l.Log.AppendAsLeader(batch)
}

// TestRestartInsideStoppingFinishes: a site killed inside STOPPING (LME persisted,
// epoch bumped), before or after the barrier append, comes back and finishes the stop:
// STOPPED and writable, the LME and its offset unchanged, exactly one barrier.
func TestRestartInsideStoppingFinishes(t *testing.T) {
	for _, after := range []bool{false, true} {
		name := map[bool]string{false: "before-barrier", true: "after-barrier"}[after]
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			src, _ := startSource(t, ctx, 10)
			root := t.TempDir()
			gate := &barrierGate{reached: make(chan struct{}), release: make(chan struct{}), appendIt: after}
			w, m := openSite(t, root, func(w *truncWatch) Destination { gate.truncWatch = w; return gate })
			require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
				KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
			mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{}))
			waitCond(t, ctx, m, "caught up", func() bool {
				d := describeOn(t, m, "k", "t", 0)
				return d.State == statemachine.Mirroring && d.DestinationOffset == 10
			})
			mustOK(t)(m.StopMirrorTopics(ctx, "k", []string{"t"}, StopOptions{}))
			<-gate.reached
			during := describeOn(t, m, "k", "t", 0)
			require.Equal(t, statemachine.Stopping, during.State)
			require.Equal(t, int32(0), during.LastMirrorEpoch)
			require.Equal(t, int64(10), during.LastMirrorOffset)
			closed := make(chan error, 1)
			go func() { closed <- m.Close() }()
			<-m.ctx.Done() // the kill: nothing after the barrier step is written
			close(gate.release)
			require.NoError(t, <-closed)
			require.NoError(t, w.Close())

			w, m = openSite(t, root, nil)
			t.Cleanup(func() { require.NoError(t, m.Close()); require.NoError(t, w.Close()) })
			require.NoError(t, m.WaitForStates(ctx, "k", []string{"t"}, statemachine.Stopped))
			d := describeOn(t, m, "k", "t", 0)
			require.Equal(t, during.LastMirrorEpoch, d.LastMirrorEpoch, "no lost LME")
			require.Equal(t, during.LastMirrorOffset, d.LastMirrorOffset)
			l, err := w.Log("t", 0)
			require.NoError(t, err)
			barriers := 0
			for _, e := range batchEpochs(t, l) {
				if e[2] == int64(records.ControlMirrorPIDReset) {
					barriers++
				}
			}
			require.Equal(t, 1, barriers, "one barrier")
			require.Equal(t, int64(11), l.LogEndOffset())
			require.False(t, w.ReadOnly("t", 0) || l.ReadOnly(), "STOPPED is writable")
			require.Empty(t, w.truncations(), "the restart truncated nothing")
		})
	}
}

// TestRestartRepairsReadOnlyFlags: a crash between a state write and the read-only
// flag write leaves the flag disagreeing with the state (simulated by flipping the
// flags on the closed root: a MIRRORING partition writable, a STOPPED one read-only).
// After the restart both agree with the states again, on the destination and on the
// Log, and a client write to the MIRRORING partition is refused.
func TestRestartRepairsReadOnlyFlags(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "run", "stopped"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	produceTo(t, ctx, src, "run", 1, 5, "a")
	produceTo(t, ctx, src, "stopped", 1, 5, "a")
	root := t.TempDir()
	w, m := openSite(t, root, nil)
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
	mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"run", "stopped"}, StartOptions{}))
	require.NoError(t, m.WaitForStates(ctx, "k", []string{"run", "stopped"}, statemachine.Mirroring))
	mustOK(t)(m.StopMirrorTopics(ctx, "k", []string{"stopped"}, StopOptions{Wait: true}))
	require.NoError(t, m.Close())
	require.NoError(t, w.Close())

	d, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	require.NoError(t, d.SetReadOnly("run", 0, false))
	require.NoError(t, d.SetReadOnly("stopped", 0, true))
	require.NoError(t, d.Close())

	w, m = openSite(t, root, nil)
	t.Cleanup(func() { require.NoError(t, m.Close()); require.NoError(t, w.Close()) })
	require.NoError(t, m.WaitForStates(ctx, "k", []string{"run"}, statemachine.Mirroring))
	require.NoError(t, m.WaitForStates(ctx, "k", []string{"stopped"}, statemachine.Stopped))
	run, err := w.Log("run", 0)
	require.NoError(t, err)
	stopped, err := w.Log("stopped", 0)
	require.NoError(t, err)
	waitCond(t, ctx, m, "flags agree with the states", func() bool {
		return w.ReadOnly("run", 0) && run.ReadOnly() && !w.ReadOnly("stopped", 0) && !stopped.ReadOnly()
	})
	_, err = w.Produce(ctx, "run", 0, clientBatch(t, "client"))
	require.ErrorIs(t, err, admin.CodeReadOnlyTopic.Err())
	_, err = w.Produce(ctx, "stopped", 0, clientBatch(t, "client"))
	require.NoError(t, err)
}
