package mirror

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// truncWatch is a file destination that records every truncation of its logs.
type truncWatch struct {
	*LocalDestination
	mu     sync.Mutex
	truncs []string
	logs   map[TopicPartition]fetcher.Log
}

type watchedLog struct {
	fetcher.Log
	w  *truncWatch
	tp TopicPartition
}

func (l *watchedLog) Truncate(offset int64) error {
	if offset < l.LogEndOffset() {
		l.w.note(fmt.Sprintf("%s-%d truncate to %d (end %d)", l.tp.Topic, l.tp.Partition, offset, l.LogEndOffset()))
	}
	return l.Log.Truncate(offset)
}

func (l *watchedLog) TruncateFullyAndStartAt(offset int64) error {
	l.w.note(fmt.Sprintf("%s-%d truncate fully at %d (end %d)", l.tp.Topic, l.tp.Partition, offset, l.LogEndOffset()))
	return l.Log.TruncateFullyAndStartAt(offset)
}

func (w *truncWatch) note(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.truncs = append(w.truncs, s)
}

func (w *truncWatch) truncations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.truncs...)
}

func (w *truncWatch) Log(topic string, partition int32) (fetcher.Log, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tp := TopicPartition{Topic: topic, Partition: partition}
	if l, ok := w.logs[tp]; ok {
		return l, nil
	}
	l, err := w.LocalDestination.Log(topic, partition)
	if err != nil {
		return nil, err
	}
	wl := &watchedLog{Log: l, w: w, tp: tp}
	w.logs[tp] = wl
	return wl, nil
}

// restartSite is the README's default setup on one root: OpenFileDestination and New
// with no stores given (the durable defaults), a plain Kafka (kfake) source.
type restartSite struct {
	root string
	dest *truncWatch
	m    *Mirror
}

func openRestartSite(t *testing.T, root string) *restartSite {
	t.Helper()
	d, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	dest := &truncWatch{LocalDestination: d, logs: map[TopicPartition]fetcher.Log{}}
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil }))
	require.NoError(t, err)
	return &restartSite{root: root, dest: dest, m: m}
}

func (s *restartSite) close(t *testing.T) {
	t.Helper()
	require.NoError(t, s.m.Close())
	require.NoError(t, s.dest.Close())
}

func produceTo(t *testing.T, ctx context.Context, src *kfake.Cluster, topic string, partitions int32, n int, tag string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for p := range partitions {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%d", tag, p, i))})
		}
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// restartSnapshot is what must survive a restart.
type restartSnapshot struct {
	listing []MirrorListing
	configs map[string]string
	desired map[string]statemachine.Desired
	parts   map[TopicPartition]PartitionDescription // State, LastMirrorEpoch, LastMirrorOffset only
	ends    map[TopicPartition]int64
	bytes   map[TopicPartition][]byte
	ro      map[TopicPartition]bool
}

func snapshot(t *testing.T, s *restartSite, topics map[string]int32) restartSnapshot {
	t.Helper()
	ctx := testCtx(t)
	ls, err := s.m.ListClusterMirrors(ctx, ListFilter{})
	require.NoError(t, err)
	for i := range ls {
		ls[i].SourceClusterID = "" // a cache of the source's answer, resolved lazily
	}
	mi, ok := s.m.Controller().Mirror("k")
	require.True(t, ok)
	snap := restartSnapshot{listing: ls, configs: mi.Configs, desired: map[string]statemachine.Desired{},
		parts: map[TopicPartition]PartitionDescription{}, ends: map[TopicPartition]int64{},
		bytes: map[TopicPartition][]byte{}, ro: map[TopicPartition]bool{}}
	for topic, n := range topics {
		ts, ok := s.m.Controller().Topic(topic)
		require.True(t, ok)
		snap.desired[topic] = ts.Desired
		for p := range n {
			tp := TopicPartition{Topic: topic, Partition: p}
			d := describeOn(t, s.m, "k", topic, p)
			snap.parts[tp] = PartitionDescription{Partition: p, State: d.State, LastMirrorEpoch: d.LastMirrorEpoch, LastMirrorOffset: d.LastMirrorOffset}
			l, err := s.dest.Log(topic, p)
			require.NoError(t, err)
			snap.ends[tp], snap.bytes[tp], snap.ro[tp] = l.LogEndOffset(), logBytes(t, l), s.dest.ReadOnly(topic, p)
		}
	}
	return snap
}

// TestRestartDurableDefault: with the README's default setup, close and reopen of the
// same root keeps every mirror, config, desired state and partition state: a MIRRORING
// partition resumes from its log end (no re-copy, no truncation), a PAUSED one stays
// paused, a STOPPED one stays STOPPED and writable with its LME.
func TestRestartDurableDefault(t *testing.T) {
	ctx := testCtx(t)
	topics := map[string]int32{"run": 2, "paused": 1, "stopped": 1}
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "run"), kfake.SeedTopics(1, "paused", "stopped"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	for topic, n := range topics {
		produceTo(t, ctx, src, topic, n, 20, "before")
	}
	raw, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(raw.Close)

	root := t.TempDir()
	s := openRestartSite(t, root)
	require.NoError(t, s.m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
	mustOK(t)(s.m.StartMirrorTopics(ctx, "k", []string{"run", "paused", "stopped"}, StartOptions{}))
	caughtUp := func(s *restartSite, topic string, n int32) {
		for p := range n {
			waitCond(t, ctx, s.m, "caught up", func() bool {
				d := describeOn(t, s.m, "k", topic, p)
				return d.State == statemachine.Mirroring && d.SourceOffset > 0 && d.DestinationOffset == d.SourceOffset
			})
		}
	}
	for topic, n := range topics {
		caughtUp(s, topic, n)
	}
	mustOK(t)(s.m.PauseMirrorTopics(ctx, "k", []string{"paused"}, LifecycleOptions{Wait: true}))
	mustOK(t)(s.m.StopMirrorTopics(ctx, "k", []string{"stopped"}, StopOptions{Wait: true}))
	before := snapshot(t, s, topics)
	require.Equal(t, statemachine.Stopped, before.parts[TopicPartition{Topic: "stopped", Partition: 0}].State)
	require.GreaterOrEqual(t, before.parts[TopicPartition{Topic: "stopped", Partition: 0}].LastMirrorEpoch, int32(0))
	require.Equal(t, statemachine.Paused, before.parts[TopicPartition{Topic: "paused", Partition: 0}].State)
	s.close(t)

	s = openRestartSite(t, root)
	t.Cleanup(func() { s.close(t) })
	after := snapshot(t, s, topics)
	require.Equal(t, before, after, "mirrors, configs, desired and actual states, logs and read-only flags survive")
	require.True(t, after.ro[TopicPartition{Topic: "run", Partition: 0}] && after.ro[TopicPartition{Topic: "paused", Partition: 0}])
	require.False(t, after.ro[TopicPartition{Topic: "stopped", Partition: 0}], "STOPPED stays writable")
	ls, err := s.m.ListClusterMirrors(ctx, ListFilter{SourceClusterIDs: []string{"kfake"}})
	require.NoError(t, err)
	require.Len(t, ls, 1, "found by the source cluster id, as a failback peer looks it up")

	produceTo(t, ctx, src, "run", 2, 15, "after")
	produceTo(t, ctx, src, "paused", 1, 15, "after")
	for p := range int32(2) { // the source HW of a fetch before the produce must not pass for caught up
		end := before.ends[TopicPartition{Topic: "run", Partition: p}] + 15
		waitCond(t, ctx, s.m, "caught up after the restart", func() bool { return describeOn(t, s.m, "k", "run", p).DestinationOffset == end })
	}
	spec, ok := s.dest.Topic("run")
	require.True(t, ok)
	for p := range int32(2) {
		tp := TopicPartition{Topic: "run", Partition: p}
		l, err := s.dest.Log("run", p)
		require.NoError(t, err)
		got := logBytes(t, l)
		require.Equal(t, before.bytes[tp], got[:len(before.bytes[tp])], "the mirrored prefix is untouched")
		require.Equal(t, rawFetch(t, raw, "run", spec.TopicID, p, l.LogEndOffset()), got, "byte for byte, nothing copied twice")
		require.Greater(t, l.LogEndOffset(), before.ends[tp])
	}
	require.Empty(t, s.dest.truncations(), "no truncation after the restart")
	d := describeOn(t, s.m, "k", "paused", 0)
	require.Equal(t, statemachine.Paused, d.State)
	l, err := s.dest.Log("paused", 0)
	require.NoError(t, err)
	require.Equal(t, before.ends[TopicPartition{Topic: "paused", Partition: 0}], l.LogEndOffset(), "a PAUSED partition does not fetch")

	// STOPPED is writable: a producer's batch appended as leader lands after the LME.
	st, err := s.dest.Log("stopped", 0)
	require.NoError(t, err)
	b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []records.Record{{Value: []byte("local")}})
	require.NoError(t, err)
	off, err := st.AppendAsLeader(b)
	require.NoError(t, err)
	require.Equal(t, before.ends[TopicPartition{Topic: "stopped", Partition: 0}], off)
	d = describeOn(t, s.m, "k", "stopped", 0)
	require.Equal(t, statemachine.Stopped, d.State)
	require.Equal(t, before.parts[TopicPartition{Topic: "stopped", Partition: 0}].LastMirrorEpoch, d.LastMirrorEpoch)
}
