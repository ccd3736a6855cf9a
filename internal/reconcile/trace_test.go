package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/localdest"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// TestReconcilerTrace runs the reconciler traces in testdata/: one partition (topic t,
// partition 0, of mirror m) driven step by step on the test goroutine (the reconciler's
// own goroutine is not started), over a memory coordinator and destination, a source
// that never answers a fetch (so nothing arrives but what the script injects), and no
// peer. Commands:
//
//	mirror [ule=true|false]          define mirror m (mirror.support.unclean.leader.election)
//	topic [ule=true|false]           create destination topic t (its own ULE config)
//	desire state=D                   set the desired state of t
//	source epoch=N                   the source leader epoch (PartitionInfo)
//	append epoch=N [count=K]         append K mirrored batches at source epoch N, as the fetcher would
//	leader-gained                    a new owner takes the partition over (restart, leader change)
//	fetch-error [errno=E] [reason=R] the fetcher reports a failed partition (OnFailed)
//	epoch-fencing batch=N            the fetcher met a batch above the local leader epoch
//	divergence offset=N              the partition's fetch loop truncated it to N after a divergence
//	retry                            the pending FAILED-retry timer fires
//	step                             run the reconciler until it has nothing to do
//
// Every command but mirror, topic and source then steps and prints what the step did, in
// order: the durable state changes (StateChange) and the effects on the destination
// (read-only flag, truncations, leader-epoch bumps, control batches); then the fetch loop
// the partition moved to, and the state stored in the coordinator.
func TestReconcilerTrace(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newTraceHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

// traceHarness is the world of one trace.
type traceHarness struct {
	ctx   context.Context
	e     *Engine
	coord *coordinator.Runtime
	dst   *recordingDest
	ctrl  *fakeController
	src   *silentSource
	r     *Partition
	fetch string // the fetch loop the partition was in after the last step
}

var traceTopicID = records.UUID{1, 2, 3}

func newTraceHarness(t *testing.T) *traceHarness {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	coord, err := coordinator.New(coordinator.Config{}.WithDefaults(), coordinator.NewMemoryStore())
	require.NoError(t, err)
	nparts := coordinator.Config{}.WithDefaults().NumPartitions
	for p := range nparts {
		require.NoError(t, coord.Load(p, 1))
		require.NoError(t, coord.WaitLoaded(ctx, p))
	}
	h := &traceHarness{ctx: ctx, coord: coord, dst: newRecordingDest(), ctrl: &fakeController{},
		src: &silentSource{}, fetch: "none"}
	h.e, err = New(Deps{Coordinator: coord, Destination: h.dst, Controller: h.ctrl,
		Sources: func(string, controller.MirrorConfig) (fetcher.Source, metasync.SourceAdmin, error) {
			return h.src, noAdmin{}, nil
		},
		Peers: func(string, controller.MirrorConfig) (PeerView, error) { return nil, nil },
		NewSyncer: func(string, metasync.SourceAdmin) (*metasync.Syncer, error) {
			return nil, fmt.Errorf("no sync in a trace")
		},
		Events: h.onEvent,
		Config: Config{FetchersPerMirror: 1, SyncInterval: -1, Retry: RetryConfig{Initial: 1, Max: 1, MaxAttempts: 3}},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if h.r != nil {
			retire(h.r)
		}
		require.NoError(t, h.e.Close())
		require.NoError(t, coord.Close())
	})
	return h
}

// onEvent records a durable state change in the same stream as the effects, so that
// the trace shows which state's actions did what.
func (h *traceHarness) onEvent(sc StateChange) {
	line := fmt.Sprintf("state %s -> %s", sc.From, sc.To)
	if sc.Reason != "" {
		line += fmt.Sprintf(" (%s)", sc.Reason)
	}
	h.dst.record("%s", line)
}

func (h *traceHarness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "mirror":
		raw := map[string]string{controller.KeyBootstrapServers: "source:9092"}
		if v := argOr(t, d, "ule", ""); v != "" {
			raw[controller.KeyUncleanLeaderElection] = v
		}
		cfg, err := controller.ParseMirrorConfig(raw)
		require.NoError(t, err)
		h.ctrl.setMirror(controller.MirrorInfo{Name: "m", Config: cfg})
		return "ok"
	case "topic":
		spec := dest.TopicSpec{Name: "t", TopicID: traceTopicID, Partitions: 1}
		if v := argOr(t, d, "ule", ""); v != "" {
			spec.Configs = map[string]string{controller.KeyUncleanLeaderElection: v}
		}
		require.NoError(t, h.dst.CreateTopic(h.ctx, spec))
		return "ok"
	case "source":
		var n int
		d.ScanArgs(t, "epoch", &n)
		h.src.setEpoch(int32(n))
		return "ok"
	case "desire":
		var name string
		d.ScanArgs(t, "state", &name)
		desired, err := statemachine.ParseDesired(name)
		require.NoError(t, err)
		h.ctrl.setTopic(controller.TopicState{Topic: "t", TopicID: traceTopicID, Mirror: "m", Desired: desired})
		return h.step(t)
	}
	h.inject(t, d)
	return h.step(t)
}

// inject carries out the commands that feed the reconciler before a step.
func (h *traceHarness) inject(t *testing.T, d *datadriven.TestData) {
	tp := fetcher.TopicPartition{Topic: "t", Partition: 0}
	switch d.Cmd {
	case "step":
	case "append":
		var ep int
		d.ScanArgs(t, "epoch", &ep)
		for range atoiArg(t, d, "count", 1) {
			l := h.r.log
			b, err := records.BuildBatch(records.BatchSpec{BaseOffset: l.LogEndOffset(), PartitionLeaderEpoch: int32(ep),
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000},
				[]records.Record{{Value: []byte("v")}})
			require.NoError(t, err)
			require.NoError(t, l.Append(b))
		}
	case "leader-gained":
		h.takeOver(t)
	case "fetch-error":
		var err error = fmt.Errorf("%s", argOr(t, d, "reason", "fetch failed"))
		if argOr(t, d, "errno", "") == "ENOSPC" {
			err = fmt.Errorf("append: %w", syscall.ENOSPC)
		}
		fetchEvents{mr: h.r.mr}.OnFailed(tp, err)
	case "divergence":
		// Reported by the fetch loop that has the partition: one of the ULE pool has
		// stopped it, one of the plain pool truncated it and goes on.
		fetchEvents{mr: h.r.mr, ule: h.fetch == "ule"}.OnDivergence(tp, epoch.Divergence{}, int64(atoiArg(t, d, "offset", -1)))
	case "epoch-fencing":
		batch := atoiArg(t, d, "batch", -1)
		fetchEvents{mr: h.r.mr}.OnEpochFencing(tp, int32(batch), h.r.log.LeaderEpoch())
	case "source-gone":
		// What failSourceTopics pushes after a sync found the source topic deleted.
		h.r.push(statemachine.Error{Reason: "source topic gone", Cause: metasync.ErrSourceTopicMissing})
	case "retry":
		if h.r.retryEvent == nil {
			d.Fatalf(t, "no retry pending")
		}
		h.r.disarmRetry()
		h.r.push(h.r.retryEvent)
		h.r.retryEvent = nil
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
}

// takeOver replaces the partition's reconciler with a new owner that has seen nothing,
// as after a restart or a leader change.
func (h *traceHarness) takeOver(t *testing.T) {
	mr := h.e.EnsureMirror("m")
	require.NotNil(t, mr)
	if h.r != nil {
		retire(h.r)
	}
	r := newPartition(h.e, mr, "t", traceTopicID, 0)
	r.sched.Store(schedQueued) // a kick queues no turn: the trace steps it
	require.Equal(t, logOpen, r.openLog())
	h.e.mu.Lock()
	h.e.parts[dest.TopicPartition{Topic: "t", Partition: 0}] = r
	h.e.mu.Unlock()
	h.r = r
}

// retire stops a reconciler that the scheduler never ran (the trace steps it).
func retire(r *Partition) {
	r.cancel()
	close(r.done)
}

// step runs the reconciler until it has nothing to do and prints what it did.
func (h *traceHarness) step(t *testing.T) string {
	if h.r == nil {
		h.takeOver(t)
	}
	h.r.step()
	var b strings.Builder
	for _, ef := range h.dst.take() {
		fmt.Fprintf(&b, "%s\n", ef)
	}
	if f := h.fetchLoop(); f != h.fetch {
		fmt.Fprintf(&b, "fetch: %s -> %s\n", h.fetch, f)
		h.fetch = f
	}
	b.WriteString(h.persisted(t))
	return b.String()
}

// fetchLoop names the fetch loop that has the partition: plain, ule (stops it after
// a divergence truncation) or none.
func (h *traceHarness) fetchLoop() string {
	mr := h.r.mr
	mr.mu.Lock()
	defer mr.mu.Unlock()
	for pool, name := range []string{"plain", "ule"} {
		for _, f := range mr.fetch[pool] {
			if f == nil {
				continue
			}
			for _, st := range f.Status() {
				if st.Topic == "t" && st.Partition == 0 && st.Err == nil {
					return name
				}
			}
		}
	}
	return "none"
}

// persisted prints the partition's state as the coordinator stores it.
func (h *traceHarness) persisted(t *testing.T) string {
	resp, err := h.coord.ReadMirrorStates(h.ctx, coordinator.ReadRequest{MirrorName: "m",
		Partitions: []coordinator.ReadPartition{{TopicID: traceTopicID, Partition: 0, LeaderEpoch: -1}}})
	require.NoError(t, err)
	p := resp.Partitions[0]
	s := fmt.Sprintf("stored: %s stateEpoch=%d leaderEpoch=%d lme=%d lmo=%d retry=%d", p.State, p.StateEpoch,
		p.LeaderEpoch, p.LastMirrorEpoch, p.LastMirrorOffset, p.RetryAttempt)
	if p.State == statemachine.Failed {
		s += fmt.Sprintf(" prev=%s", p.PreviousState)
		if errors.Is(h.r.failCause, ErrStorage) {
			s += " cause=storage"
		}
	}
	if p.ErrorMessage != nil {
		s += fmt.Sprintf(" reason=%q", *p.ErrorMessage)
	}
	return s
}

func argOr(t *testing.T, d *datadriven.TestData, key, def string) string {
	v := def
	d.MaybeScanArgs(t, key, &v)
	return v
}

func atoiArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	v := def
	d.MaybeScanArgs(t, key, &v)
	return v
}

// fakeController is a ControllerView whose mirror and topic the script sets.
type fakeController struct {
	mu     sync.Mutex
	mirror *controller.MirrorInfo
	topic  *controller.TopicState
}

func (c *fakeController) setMirror(mi controller.MirrorInfo) {
	c.mu.Lock()
	c.mirror = &mi
	c.mu.Unlock()
}

func (c *fakeController) setTopic(ts controller.TopicState) {
	c.mu.Lock()
	c.topic = &ts
	c.mu.Unlock()
}

func (c *fakeController) Mirror(name string) (controller.MirrorInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mirror == nil || c.mirror.Name != name {
		return controller.MirrorInfo{}, false
	}
	return *c.mirror, true
}

func (c *fakeController) Topic(topic string) (controller.TopicState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topic == nil || c.topic.Topic != topic {
		return controller.TopicState{}, false
	}
	return *c.topic, true
}

func (c *fakeController) Topics(mirror string) []controller.TopicState {
	if ts, ok := c.Topic("t"); ok && (mirror == "" || ts.Mirror == mirror) {
		return []controller.TopicState{ts}
	}
	return nil
}

// silentSource is a source whose fetches never answer (until cancelled); it reports a
// settable leader epoch and log start 0.
type silentSource struct {
	mu    sync.Mutex
	epoch int32
}

func (s *silentSource) setEpoch(e int32) {
	s.mu.Lock()
	s.epoch = e
	s.mu.Unlock()
}

func (s *silentSource) Fetch(ctx context.Context, _ []fetcher.FetchPartition) ([]fetcher.FetchResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *silentSource) OffsetForLeaderEpoch(ctx context.Context, _ []fetcher.EpochQuery) ([]fetcher.EpochResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *silentSource) ListOffsets(_ context.Context, qs []fetcher.OffsetQuery) ([]fetcher.OffsetResult, error) {
	return make([]fetcher.OffsetResult, len(qs)), nil
}

func (s *silentSource) PartitionInfo(context.Context, string, int32, bool) (fetcher.PartitionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fetcher.PartitionInfo{Leader: 1, LeaderEpoch: s.epoch}, nil
}

// noAdmin is a SourceAdmin a trace never calls (no sync runs).
type noAdmin struct{ metasync.SourceAdmin }

func (noAdmin) Close() error { return nil }

// recordingDest is a memory destination that records what the reconciler does to it.
type recordingDest struct {
	*localdest.LocalDestination
	mu      sync.Mutex
	effects []string
	logs    map[int32]*recordingLog
}

func newRecordingDest() *recordingDest {
	return &recordingDest{LocalDestination: localdest.NewMemory("dst", fetcher.MemoryLogOptions{}), logs: map[int32]*recordingLog{}}
}

func (d *recordingDest) record(format string, args ...any) {
	d.mu.Lock()
	d.effects = append(d.effects, fmt.Sprintf(format, args...))
	d.mu.Unlock()
}

func (d *recordingDest) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.effects
	d.effects = nil
	return out
}

func (d *recordingDest) Log(topic string, partition int32) (fetcher.Log, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.logs[partition]; ok {
		return l, nil
	}
	l, err := d.LocalDestination.Log(topic, partition)
	if err != nil {
		return nil, err
	}
	rl := &recordingLog{Log: l, d: d}
	d.logs[partition] = rl
	return rl, nil
}

func (d *recordingDest) SetReadOnly(topic string, partition int32, readOnly bool) error {
	d.record("read-only %v", readOnly)
	return d.LocalDestination.SetReadOnly(topic, partition, readOnly)
}

// recordingLog records the truncations, leader-epoch bumps and leader appends of the
// reconciler (the fetcher's follower appends are not recorded).
type recordingLog struct {
	fetcher.Log
	d *recordingDest
}

func (l *recordingLog) Truncate(offset int64) error {
	l.d.record("truncate to %d (end %d)", offset, l.Log.LogEndOffset())
	return l.Log.Truncate(offset)
}

func (l *recordingLog) TruncateFullyAndStartAt(offset int64) error {
	l.d.record("truncate fully, start at %d (end %d)", offset, l.Log.LogEndOffset())
	return l.Log.TruncateFullyAndStartAt(offset)
}

func (l *recordingLog) BumpLeaderEpoch(min int32) (int32, error) {
	before := l.Log.LeaderEpoch()
	e, err := l.Log.BumpLeaderEpoch(min)
	if e != before {
		l.d.record("leader epoch %d -> %d", before, e)
	}
	return e, err
}

func (l *recordingLog) AppendAsLeader(batch []byte) (int64, error) {
	off, err := l.Log.AppendAsLeader(batch)
	kind := "batch"
	if it := records.NewIterator(batch); it.Next() && it.Batch().Attributes().IsControl() {
		if typ, terr := it.Batch().ControlType(); terr == nil {
			kind = fmt.Sprint(typ)
		}
	}
	l.d.record("append %s at %d", kind, off)
	return off, err
}
