package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// world is a set of in-process sites that mirror from each other: a mirror whose
// bootstrap.servers is "<site id>:9092" reads that site's destination logs through a
// fetcher.LocalSource and uses that site's *Mirror as its Peer.
type world struct {
	mu    sync.Mutex
	sites map[string]*site
	// coord configures the sites' coordinators (default: 5 partitions, no linger).
	coord *coordinator.Config
	// idle is the sites' FetchIdleWait (default 1 ms): LocalSource does not long-poll.
	idle time.Duration
	// active is the sites' ActiveReconcilers (0: the default).
	active int
}

// site is one in-process cluster: a Mirror over a memory LocalDestination.
type site struct {
	id   string
	dest *LocalDestination
	m    *Mirror
	w    *world

	mu sync.Mutex
	// prepEnd records, per partition, the log end offset when PREPARING finished (the
	// LME truncation point, before the fetcher starts).
	prepEnd map[TopicPartition]int64
	changes []StateChange
	// corrupt makes the source served to other sites flip a byte of every fetched
	// batch of these partitions.
	corrupt map[TopicPartition]bool
}

func newWorld() *world { return &world{sites: map[string]*site{}} }

func (w *world) site(bootstrap string) (*site, error) {
	host, _, _ := strings.Cut(bootstrap, ":")
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.sites[host]
	if !ok {
		return nil, fmt.Errorf("no site %q", host)
	}
	return s, nil
}

func (w *world) newSite(t testing.TB, id string, opts ...Option) *site {
	t.Helper()
	s := &site{id: id, w: w, dest: NewMemoryDestination(id, fetcher.MemoryLogOptions{}),
		prepEnd: map[TopicPartition]int64{}, corrupt: map[TopicPartition]bool{}}
	opts = append([]Option{
		WithSourceFactory(func(name string, cfg MirrorConfig) (fetcher.Source, SourceAdmin, error) {
			other, err := w.site(cfg.BootstrapServers[0])
			if err != nil {
				return nil, nil, err
			}
			return &siteSource{s: other, ls: fetcher.NewLocalSource(fetcher.ReadUncommitted), added: map[TopicPartition]bool{}},
				metasync.NewLocalSourceAdmin(other.dest, nil), nil
		}),
		WithPeerFactory(func(name string, cfg MirrorConfig) (Peer, error) {
			other, err := w.site(cfg.BootstrapServers[0])
			if err != nil {
				return nil, err
			}
			return other.m, nil
		}),
		WithEvents(s.onChange),
	}, opts...)
	cc := coordinator.Config{NumPartitions: 5, AppendLinger: -1}
	if w.coord != nil {
		cc = *w.coord
	}
	idle := time.Millisecond
	if w.idle > 0 {
		idle = w.idle
	}
	m, err := New(Config{Destination: s.dest, SyncInterval: -1, FetchIdleWait: idle, Coordinator: cc, ActiveReconcilers: w.active}, opts...)
	require.NoError(t, err)
	s.m = m
	w.mu.Lock()
	w.sites[id] = s
	w.mu.Unlock()
	t.Cleanup(func() {
		if err := m.Close(); !errors.Is(err, ErrClosed) {
			require.NoError(t, err)
		}
		require.NoError(t, s.dest.Close())
	})
	return s
}

func (s *site) onChange(c StateChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, c)
	if c.From == statemachine.Preparing && c.To == statemachine.Mirroring {
		if l, err := s.dest.Log(c.Topic, c.Partition); err == nil {
			s.prepEnd[TopicPartition{Topic: c.Topic, Partition: c.Partition}] = l.LogEndOffset()
		}
	}
}

func (s *site) prepared(topic string, p int32) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.prepEnd[TopicPartition{Topic: topic, Partition: p}]
	return off, ok
}

func (s *site) log(t testing.TB, topic string, p int32) fetcher.Log {
	t.Helper()
	l, err := s.dest.Log(topic, p)
	require.NoError(t, err)
	return l
}

// siteSource serves a site's destination logs as a fetch Source, adding partitions on
// first use.
type siteSource struct {
	s     *site
	ls    *fetcher.LocalSource
	mu    sync.Mutex
	added map[TopicPartition]bool
}

func (ss *siteSource) ensure(topic string, p int32) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	tp := TopicPartition{Topic: topic, Partition: p}
	if ss.added[tp] {
		return
	}
	spec, ok := ss.s.dest.Topic(topic)
	if !ok || p >= spec.Partitions {
		return
	}
	l, err := ss.s.dest.Log(topic, p)
	if err != nil {
		return
	}
	ss.ls.Add(topic, spec.TopicID, p, l)
	ss.added[tp] = true
}

func (ss *siteSource) Fetch(ctx context.Context, parts []fetcher.FetchPartition) ([]fetcher.FetchResult, error) {
	for _, p := range parts {
		ss.ensure(p.Topic, p.Partition)
	}
	res, err := ss.ls.Fetch(ctx, parts)
	if err != nil {
		return nil, err
	}
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	for i := range res {
		if ss.s.corrupt[TopicPartition{Topic: res[i].Topic, Partition: res[i].Partition}] && len(res[i].Records) > 61 {
			b := bytes.Clone(res[i].Records)
			b[61] ^= 0xff // inside the first batch's records: CRC mismatch
			res[i].Records = b
		}
	}
	return res, nil
}

func (ss *siteSource) OffsetForLeaderEpoch(ctx context.Context, qs []fetcher.EpochQuery) ([]fetcher.EpochResult, error) {
	for _, q := range qs {
		ss.ensure(q.Topic, q.Partition)
	}
	return ss.ls.OffsetForLeaderEpoch(ctx, qs)
}

func (ss *siteSource) ListOffsets(ctx context.Context, qs []fetcher.OffsetQuery) ([]fetcher.OffsetResult, error) {
	for _, q := range qs {
		ss.ensure(q.Topic, q.Partition)
	}
	return ss.ls.ListOffsets(ctx, qs)
}

func (ss *siteSource) PartitionInfo(ctx context.Context, topic string, partition int32, refresh bool) (fetcher.PartitionInfo, error) {
	ss.ensure(topic, partition)
	return ss.ls.PartitionInfo(ctx, topic, partition, refresh)
}

func (ss *siteSource) Close() error { return ss.ls.Close() }

// testCtx is a context bounded well below the package's test budget.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitCond waits, without polling on a timer, until cond holds: it re-checks after
// every state change or log progress of m.
func waitCond(t testing.TB, ctx context.Context, m *Mirror, what string, cond func() bool) {
	t.Helper()
	// Changed covers states and log progress, not everything a condition may
	// read (the destination's read-only flags): re-check now and then too.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ch := m.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			require.FailNow(t, "timed out waiting for "+what)
		}
	}
}

// appendBatch appends one batch of n records stamped with leaderEpoch at the log end.
func appendBatch(t testing.TB, l fetcher.Log, leaderEpoch int32, n int, tag string) {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{Key: []byte(tag), Value: []byte(fmt.Sprintf("%s-%d-%d", tag, l.LogEndOffset(), i))}
	}
	b, err := records.BuildBatch(records.BatchSpec{BaseOffset: l.LogEndOffset(), PartitionLeaderEpoch: leaderEpoch,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000}, recs)
	require.NoError(t, err)
	require.NoError(t, l.Append(b))
}

// logBytes returns every batch of l, raw.
func logBytes(t testing.TB, l fetcher.Log) []byte {
	t.Helper()
	var out []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.Read(off, 1<<20)
		require.NoError(t, err)
		if len(b) == 0 {
			break
		}
		out = append(out, b...)
		it := records.NewIterator(b)
		for it.Next() {
			off = it.Batch().NextOffset()
		}
		require.NoError(t, it.Err())
	}
	return out
}

// batchEpochs returns (base offset, leader epoch, control type or -1) of every batch.
func batchEpochs(t testing.TB, l fetcher.Log) [][3]int64 {
	t.Helper()
	var out [][3]int64
	it := records.NewIterator(logBytes(t, l))
	for it.Next() {
		b := it.Batch()
		ct := int64(-1)
		if b.Attributes().IsControl() {
			c, err := b.ControlType()
			require.NoError(t, err)
			ct = int64(c)
		}
		out = append(out, [3]int64{b.BaseOffset(), int64(b.PartitionLeaderEpoch()), ct})
	}
	require.NoError(t, it.Err())
	return out
}

func createTopic(t testing.TB, s *site, topic string, id records.UUID, partitions int32) {
	t.Helper()
	require.NoError(t, s.dest.CreateTopic(context.Background(), TopicSpec{Name: topic, TopicID: id, Partitions: partitions}))
}

func bootstrap(s *site) map[string]string {
	return map[string]string{KeyBootstrapServers: s.id + ":9092"}
}

// mustOK returns a checker of a lifecycle call's results: no error at all.
func mustOK(t testing.TB) func([]TopicResult, error) {
	return func(res []TopicResult, err error) {
		t.Helper()
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err, "topic %s", r.Topic)
		}
	}
}

// describePartition returns the description of one partition of mirror name on s.
func describePartition(t testing.TB, s *site, name, topic string, p int32) PartitionDescription {
	t.Helper()
	ds, err := s.m.DescribeClusterMirrors(context.Background(), []string{name},
		DescribeOptions{TopicPartitions: map[string][]int32{topic: {p}}, IncludeStates: true, IncludeLags: true})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Len(t, ds[0].Topics, 1)
	require.Len(t, ds[0].Topics[0].Partitions, 1)
	return ds[0].Topics[0].Partitions[0]
}

// TestFacadeLifecycle runs create, start, pause, resume, stop and delete between two
// in-process sites and checks the data, the read-only flag, the LME and the barrier.
func TestFacadeLifecycle(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	id := records.UUID{1}
	createTopic(t, a, "orders", id, 3)
	for p := int32(0); p < 3; p++ {
		l := a.log(t, "orders", p)
		_, err := l.BumpLeaderEpoch(4)
		require.NoError(t, err)
		for i := 0; i < 4; i++ {
			appendBatch(t, l, 5, 1+i, "a")
		}
	}
	require.NoError(t, b.m.CreateClusterMirror(ctx, "a-to-b", bootstrap(a)))
	require.ErrorContains(t, b.m.CreateClusterMirror(ctx, "a-to-b", bootstrap(a)), "CLUSTER_MIRROR_ALREADY_EXISTS")
	mustOK(t)(b.m.StartMirrorTopics(ctx, "a-to-b", []string{"orders"}, StartOptions{}))
	require.NoError(t, b.m.WaitForStates(ctx, "a-to-b", []string{"orders"}, statemachine.Mirroring))
	for p := int32(0); p < 3; p++ {
		src, dst := a.log(t, "orders", p), b.log(t, "orders", p)
		waitCond(t, ctx, b.m, "mirrored", func() bool { return dst.LogEndOffset() == src.LogEndOffset() })
		require.Equal(t, logBytes(t, src), logBytes(t, dst), "partition %d byte for byte", p)
		require.True(t, b.dest.ReadOnly("orders", p))
		d := describePartition(t, b, "a-to-b", "orders", p)
		require.Equal(t, statemachine.Mirroring, d.State)
		require.Equal(t, src.LogEndOffset(), d.DestinationOffset)
		waitCond(t, ctx, b.m, "source offset known", func() bool { return describePartition(t, b, "a-to-b", "orders", p).SourceOffset >= 0 })
		require.Equal(t, int64(0), describePartition(t, b, "a-to-b", "orders", p).Lag())
		// The destination leader epoch was raised above the source batches' (EPOCH_FENCING).
		require.Greater(t, dst.LeaderEpoch(), int32(5))
	}

	// Pause, more data on the source, resume.
	mustOK(t)(b.m.PauseMirrorTopics(ctx, "a-to-b", []string{"orders"}, LifecycleOptions{Wait: true}))
	appendBatch(t, a.log(t, "orders", 1), 5, 3, "late")
	mustOK(t)(b.m.ResumeMirrorTopics(ctx, "a-to-b", []string{"orders"}, LifecycleOptions{Wait: true}))
	src1, dst1 := a.log(t, "orders", 1), b.log(t, "orders", 1)
	waitCond(t, ctx, b.m, "resumed", func() bool { return dst1.LogEndOffset() == src1.LogEndOffset() })
	require.Equal(t, logBytes(t, src1), logBytes(t, dst1))

	// Listing.
	ls, err := b.m.ListClusterMirrors(ctx, ListFilter{IncludeTopicNames: true, SourceClusterIDs: []string{"A"}})
	require.NoError(t, err)
	require.Equal(t, []MirrorListing{{Name: "a-to-b", SourceBootstrap: "A:9092", SourceClusterID: "A", TopicCount: 1, TopicNames: []string{"orders"}}}, ls)
	ls, err = b.m.ListClusterMirrors(ctx, ListFilter{DesiredStates: []statemachine.Desired{statemachine.DesiredStopped}})
	require.NoError(t, err)
	require.Equal(t, 0, ls[0].TopicCount)

	// Stop (failover): writable, LME persisted, MIRROR_PID_RESET at the end.
	ends := make([]int64, 3)
	for p := int32(0); p < 3; p++ {
		ends[p] = b.log(t, "orders", p).LogEndOffset()
	}
	mustOK(t)(b.m.StopMirrorTopics(ctx, "a-to-b", []string{"orders"}, StopOptions{Wait: true}))
	for p := int32(0); p < 3; p++ {
		l := b.log(t, "orders", p)
		require.False(t, b.dest.ReadOnly("orders", p))
		require.Equal(t, ends[p]+1, l.LogEndOffset(), "the barrier takes one offset")
		eps := batchEpochs(t, l)
		last := eps[len(eps)-1]
		require.Equal(t, [3]int64{ends[p], int64(l.LeaderEpoch()), int64(records.ControlMirrorPIDReset)}, last)
		d := describePartition(t, b, "a-to-b", "orders", p)
		require.Equal(t, statemachine.Stopped, d.State)
		require.Equal(t, int32(5), d.LastMirrorEpoch)
		require.Equal(t, ends[p], d.LastMirrorOffset)
	}

	// Delete: the states are tombstoned.
	errs := b.m.DeleteClusterMirrors(ctx, []string{"a-to-b", "nope"})
	require.NoError(t, errs["a-to-b"])
	require.ErrorContains(t, errs["nope"], "UNKNOWN_CLUSTER_MIRROR")
	ls, err = b.m.ListClusterMirrors(ctx, ListFilter{})
	require.NoError(t, err)
	require.Empty(t, ls)
	res, err := b.m.coord.ReadMirrorStates(ctx, coordinator.ReadRequest{MirrorName: "a-to-b",
		Partitions: []coordinator.ReadPartition{{TopicID: id, Partition: 0, LeaderEpoch: -1}}})
	require.NoError(t, err)
	require.Equal(t, statemachine.Unknown, res.Partitions[0].State)
	require.Equal(t, int32(-1), res.Partitions[0].LastMirrorEpoch)
}

// TestFewActiveReconcilers: with two reconcilers running at once, forty partitions
// still start, mirror, pause, resume and stop (a failover) together: the others wait
// their turn in the queue, and none waits for one that cannot run.
func TestFewActiveReconcilers(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	w.active = 2
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	const parts = 40
	createTopic(t, a, "wide", records.UUID{7}, parts)
	for p := int32(0); p < parts; p++ {
		appendBatch(t, a.log(t, "wide", p), 1, 2, "a")
	}
	require.NoError(t, b.m.CreateClusterMirror(ctx, "a-to-b", bootstrap(a)))
	mustOK(t)(b.m.StartMirrorTopics(ctx, "a-to-b", []string{"wide"}, StartOptions{}))
	require.NoError(t, b.m.WaitForStates(ctx, "a-to-b", []string{"wide"}, statemachine.Mirroring))
	mirrored := func() {
		for p := int32(0); p < parts; p++ {
			src, dst := a.log(t, "wide", p), b.log(t, "wide", p)
			waitCond(t, ctx, b.m, "mirrored", func() bool { return dst.LogEndOffset() == src.LogEndOffset() })
			require.Equal(t, logBytes(t, src), logBytes(t, dst), "partition %d byte for byte", p)
		}
	}
	mirrored()
	mustOK(t)(b.m.PauseMirrorTopics(ctx, "a-to-b", []string{"wide"}, LifecycleOptions{Wait: true}))
	for p := int32(0); p < parts; p++ {
		appendBatch(t, a.log(t, "wide", p), 1, 2, "late")
	}
	mustOK(t)(b.m.ResumeMirrorTopics(ctx, "a-to-b", []string{"wide"}, LifecycleOptions{Wait: true}))
	mirrored()
	mustOK(t)(b.m.StopMirrorTopics(ctx, "a-to-b", []string{"wide"}, StopOptions{Wait: true}))
	for p := int32(0); p < parts; p++ {
		require.False(t, b.dest.ReadOnly("wide", p), "partition %d writable after the stop", p)
		require.Equal(t, statemachine.Stopped, describePartition(t, b, "a-to-b", "wide", p).State)
	}
}

// TestFailureIsolated: a corrupt batch fails its partition alone, with its reason kept;
// stop then start recovers it.
func TestFailureIsolated(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	// The KIP baseline: no automatic retry, the FAILED partition stays FAILED.
	a, b := w.newSite(t, "A"), w.newSite(t, "B", WithFailedRetry(RetryConfig{}))
	createTopic(t, a, "t", records.UUID{2}, 3)
	for p := int32(0); p < 3; p++ {
		appendBatch(t, a.log(t, "t", p), 0, 3, "x")
	}
	a.mu.Lock()
	a.corrupt[TopicPartition{Topic: "t", Partition: 1}] = true
	a.mu.Unlock()
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(b.m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	waitCond(t, ctx, b.m, "partition 1 FAILED", func() bool {
		return describePartition(t, b, "m", "t", 1).State == statemachine.Failed
	})
	d := describePartition(t, b, "m", "t", 1)
	require.Contains(t, d.ErrorMessage, "CRC")
	for _, p := range []int32{0, 2} {
		dst := b.log(t, "t", p)
		waitCond(t, ctx, b.m, "others mirrored", func() bool { return dst.LogEndOffset() == 3 })
		require.Equal(t, statemachine.Mirroring, describePartition(t, b, "m", "t", p).State)
	}
	// Pause is refused while a partition is FAILED; the message names it.
	res, err := b.m.PauseMirrorTopics(ctx, "m", []string{"t"}, LifecycleOptions{})
	require.NoError(t, err)
	require.ErrorContains(t, res[0].Err, `partition 1 in state FAILED`)
	// Recovery: stop, then start again.
	a.mu.Lock()
	delete(a.corrupt, TopicPartition{Topic: "t", Partition: 1})
	a.mu.Unlock()
	mustOK(t)(b.m.StopMirrorTopics(ctx, "m", []string{"t"}, StopOptions{Wait: true}))
	// No LME is known on A: the start truncates fully what B mirrored, so it says so.
	mustOK(t)(b.m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{AllowTruncation: true}))
	require.NoError(t, b.m.WaitForStates(ctx, "m", []string{"t"}, statemachine.Mirroring))
	src, dst := a.log(t, "t", 1), b.log(t, "t", 1)
	waitCond(t, ctx, b.m, "recovered", func() bool { return dst.LogEndOffset() == src.LogEndOffset() })
	require.Equal(t, logBytes(t, src), logBytes(t, dst))
}

// TestManualCoordinatorOwnership: with ManualCoordinatorOwnership the reconcilers wait
// (retrying NOT_COORDINATOR) until the host loads the __mirror_state partitions.
func TestManualCoordinatorOwnership(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a := w.newSite(t, "A")
	createTopic(t, a, "t", records.UUID{0x33}, 2)
	appendBatch(t, a.log(t, "t", 0), 0, 2, "x")
	dest := NewMemoryDestination("B", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { require.NoError(t, dest.Close()) })
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond, ManualCoordinatorOwnership: true,
		Coordinator: coordinator.Config{NumPartitions: 3, AppendLinger: -1}},
		WithSourceFactory(func(string, MirrorConfig) (fetcher.Source, SourceAdmin, error) {
			return &siteSource{s: a, ls: fetcher.NewLocalSource(fetcher.ReadUncommitted), added: map[TopicPartition]bool{}},
				metasync.NewLocalSourceAdmin(a.dest, nil), nil
		}),
		WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil }))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	res, err := m.coord.ReadMirrorStates(ctx, coordinator.ReadRequest{MirrorName: "m",
		Partitions: []coordinator.ReadPartition{{TopicID: records.UUID{0x33}, Partition: 0, LeaderEpoch: -1}}})
	require.NoError(t, err)
	require.Equal(t, "NOT_COORDINATOR", res.Partitions[0].ErrorCode.String())
	for p := int32(0); p < 3; p++ {
		require.NoError(t, m.Coordinator().Load(p, 7))
	}
	require.NoError(t, m.WaitForLag(ctx, "m", []string{"t"}, 0))
	l, err := dest.Log("t", 0)
	require.NoError(t, err)
	require.Equal(t, logBytes(t, a.log(t, "t", 0)), logBytes(t, l))
}

// TestRestartReasserts: a new Mirror over the same destination, controller log and state
// store takes over: MIRRORING partitions fetch again (their state's actions are re-run),
// a FAILED partition stays FAILED with its reason.
func TestRestartReasserts(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a := w.newSite(t, "A")
	createTopic(t, a, "t", records.UUID{0x44}, 2)
	for p := int32(0); p < 2; p++ {
		appendBatch(t, a.log(t, "t", p), 0, 2, "x")
	}
	a.mu.Lock()
	a.corrupt[TopicPartition{Topic: "t", Partition: 1}] = true
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
			WithFailedRetry(RetryConfig{})) // the baseline: FAILED stays FAILED
		require.NoError(t, err)
		return m
	}
	m := open()
	require.NoError(t, m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	waitCond(t, ctx, m, "partition 0 mirrored", func() bool {
		d := describeOn(t, m, "m", "t", 0)
		return d.DestinationOffset == 2 && d.State == statemachine.Mirroring
	})
	waitCond(t, ctx, m, "partition 1 FAILED", func() bool { return describeOn(t, m, "m", "t", 1).State == statemachine.Failed })
	reason := describeOn(t, m, "m", "t", 1).ErrorMessage
	require.Contains(t, reason, "CRC")
	require.NoError(t, m.Close())

	appendBatch(t, a.log(t, "t", 0), 0, 3, "after-restart")
	m = open()
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	l0, err := dest.Log("t", 0)
	require.NoError(t, err)
	waitCond(t, ctx, m, "partition 0 fetches again", func() bool { return l0.LogEndOffset() == a.log(t, "t", 0).LogEndOffset() })
	require.Equal(t, logBytes(t, a.log(t, "t", 0)), logBytes(t, l0))
	d := describeOn(t, m, "m", "t", 1)
	require.Equal(t, statemachine.Failed, d.State)
	require.Equal(t, reason, d.ErrorMessage)
}

// TestFailedRetry: with WithFailedRetry a FAILED partition restarts by itself, back to
// its previous state MIRRORING, once the cause is gone.
func TestFailedRetry(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a := w.newSite(t, "A")
	b := w.newSite(t, "B", WithFailedRetry(RetryConfig{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, MaxAttempts: 10}))
	createTopic(t, a, "t", records.UUID{0x55}, 1)
	appendBatch(t, a.log(t, "t", 0), 0, 2, "x")
	a.mu.Lock()
	a.corrupt[TopicPartition{Topic: "t", Partition: 0}] = true
	a.mu.Unlock()
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	mustOK(t)(b.m.StartMirrorTopics(ctx, "m", []string{"t"}, StartOptions{}))
	waitCond(t, ctx, b.m, "FAILED", func() bool { return b.sawTransition(statemachine.Mirroring, statemachine.Failed) })
	a.mu.Lock()
	delete(a.corrupt, TopicPartition{Topic: "t", Partition: 0})
	a.mu.Unlock()
	require.NoError(t, b.m.WaitForLag(ctx, "m", []string{"t"}, 0))
	// It failed while MIRRORING: the retry returns to MIRRORING, no truncation.
	require.True(t, b.sawTransition(statemachine.Failed, statemachine.Mirroring))
	require.Equal(t, logBytes(t, a.log(t, "t", 0)), logBytes(t, b.log(t, "t", 0)))
}
