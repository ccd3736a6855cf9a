package reconcile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/logsample"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/metasync"
)

// Engine runs the reconcilers of every mirror partition of one Mirror, one Runtime per
// mirror, and their metadata-sync loops. Safe for concurrent use; Close stops every
// goroutine it started.
type Engine struct {
	log *slog.Logger
	// sampled logs what can happen to every partition at once (FAILED on a
	// source outage) within a bounded number of lines per second.
	sampled   *logsample.Sampler
	dest      dest.Destination
	ctrl      ControllerView
	coord     Coordinator
	sources   SourceFactory
	peers     PeerFactory
	newSyncer func(string, metasync.SourceAdmin) (*metasync.Syncer, error)
	recordID  func(ctx context.Context, mirror, id string) error
	metrics   Metrics
	events    func(StateChange)
	removals  func(Removal)
	clock     func() time.Time
	cfg       Config
	// clearApproval clears a partition's durable removal approval once PREPARING used it.
	clearApproval func(ctx context.Context, mirror, topic string, partition int32) error

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // reconcilers (until they end), their workers, sync loops, group-commit drains
	sched  *scheduler     // runs the reconcilers' turns

	mu          sync.Mutex // guards the fields below
	closed      bool
	noReconcile bool
	mirrors     map[string]*Runtime
	parts       map[dest.TopicPartition]*Partition // by destination topic/partition

	changeMu sync.Mutex
	changeCh chan struct{} // closed and replaced on an actual-state change once taken
	// changeTaken is set (under changeMu) when Changed hands out changeCh and
	// cleared when it is closed: a change nobody waits for costs an atomic
	// load, where a failover's thousands of state changes each took changeMu
	// to close a channel nobody held (a convoy of 5,000 reconcilers).
	changeTaken atomic.Bool
}

// sampledBurst is how many lines per second and kind Engine.sampled logs
// before it folds the rest into a summary line.
const sampledBurst = 10

// New builds an Engine over d. It starts nothing: EnsureMirror and SyncTopic do.
func New(d Deps) (*Engine, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{log: d.Logger, sampled: logsample.New(d.Logger, sampledBurst, time.Second), dest: d.Destination, ctrl: d.Controller, coord: d.Coordinator,
		sources: d.Sources, peers: d.Peers, newSyncer: d.NewSyncer, recordID: d.SourceClusterID, metrics: d.Metrics, events: d.Events, removals: d.Removals,
		clearApproval: d.ClearApproval, clock: d.Clock, cfg: d.Config, ctx: ctx, cancel: cancel,
		mirrors: map[string]*Runtime{}, parts: map[dest.TopicPartition]*Partition{}, changeCh: make(chan struct{})}
	e.sched = newScheduler(&e.wg, d.Config.MaxActive)
	return e, nil
}

// DisableReconcilers keeps SyncTopic from starting reconcilers, for tests and tools that
// drive the coordinator states by hand. Call it before the first topic starts.
func (e *Engine) DisableReconcilers() {
	e.mu.Lock()
	e.noReconcile = true
	e.mu.Unlock()
}

// Close stops every reconciler and sync loop, waits for every goroutine, then closes
// the fetchers, sources and peers of every mirror. A second Close does nothing.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	parts := make([]*Partition, 0, len(e.parts))
	for _, r := range e.parts {
		parts = append(parts, r)
	}
	mirrors := make([]*Runtime, 0, len(e.mirrors))
	for _, mr := range e.mirrors {
		mirrors = append(mirrors, mr)
	}
	e.mu.Unlock()
	e.cancel()
	for _, r := range parts {
		r.cancel() // each ends in its next turn
	}
	for _, r := range parts {
		<-r.done
	}
	e.wg.Wait()
	var errs []error
	for _, mr := range mirrors {
		errs = append(errs, mr.close())
	}
	e.sampled.Close()
	return errors.Join(errs...)
}

// notifyChange wakes every waiter on Changed.
func (e *Engine) notifyChange() {
	if !e.changeTaken.Load() {
		return // nobody got the channel since it was last closed
	}
	e.changeMu.Lock()
	if e.changeTaken.Load() {
		close(e.changeCh)
		e.changeCh = make(chan struct{})
		e.changeTaken.Store(false)
	}
	e.changeMu.Unlock()
}

// Changed returns a channel closed at the next actual-state change (or log progress).
func (e *Engine) Changed() <-chan struct{} {
	e.changeMu.Lock()
	defer e.changeMu.Unlock()
	e.changeTaken.Store(true)
	return e.changeCh
}

// EnsureMirror returns the Runtime of mirror name, created (with its sync loop) when
// missing; nil after Close.
func (e *Engine) EnsureMirror(name string) *Runtime {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	if mr, ok := e.mirrors[name]; ok {
		return mr
	}
	mr := newRuntime(e, name)
	e.mirrors[name] = mr
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		mr.fidelityLoop()
	}()
	if e.cfg.SyncInterval > 0 {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			mr.syncLoop(e.cfg.SyncInterval)
		}()
	}
	return mr
}

// Runtime returns the Runtime of mirror name.
func (e *Engine) Runtime(name string) (*Runtime, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	mr, ok := e.mirrors[name]
	return mr, ok
}

// Refresh makes sure every partition of every mirror topic has a reconciler (topics
// created after their desired state was set, partitions grown by the sync).
func (e *Engine) Refresh() {
	for _, ts := range e.ctrl.Topics("") {
		e.SyncTopic(ts)
	}
}

// SyncTopic reconciles the set of reconcilers of one topic with its desired state and
// wakes them. It is the Controller watch of the facade.
func (e *Engine) SyncTopic(ts controller.TopicState) {
	var spec dest.TopicSpec
	var haveTopic bool
	if ts.Mirror != "" {
		spec, haveTopic = e.dest.Topic(ts.Topic)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	stale, kick, prev := e.splitTopicLocked(ts)
	var mr *Runtime
	if ts.Mirror != "" {
		mr = e.mirrors[ts.Mirror]
	}
	if mr != nil && haveTopic && !e.noReconcile {
		for p := int32(0); p < spec.Partitions; p++ {
			tp := dest.TopicPartition{Topic: ts.Topic, Partition: p}
			if _, ok := e.parts[tp]; ok {
				continue
			}
			// The reconciler opens the log itself: a log that cannot be opened makes
			// the partition FAILED at once (openLog), the others go on.
			r := newPartition(e, mr, ts.Topic, ts.TopicID, p)
			r.prev = prev[tp] // the new owner starts once the old one has stopped
			e.parts[tp] = r
			e.wg.Add(1) // until end
			r.start()
		}
	}
	e.mu.Unlock()
	for _, r := range stale {
		r.cancel()
	}
	for _, r := range kick {
		r.kick()
	}
}

// splitTopicLocked removes the reconcilers of ts.Topic that no longer match its
// desired state (stale, by partition in prev) and returns the ones to wake (kick).
func (e *Engine) splitTopicLocked(ts controller.TopicState) (stale, kick []*Partition, prev map[dest.TopicPartition]*Partition) {
	prev = map[dest.TopicPartition]*Partition{}
	for tp, r := range e.parts {
		if tp.Topic != ts.Topic {
			continue
		}
		if r.mirror != ts.Mirror || r.topicID != ts.TopicID || ts.Mirror == "" {
			stale = append(stale, r)
			prev[tp] = r
			delete(e.parts, tp)
			continue
		}
		kick = append(kick, r)
	}
	return stale, kick, prev
}

// Partition returns the reconciler of one destination partition, nil when none runs.
func (e *Engine) Partition(topic string, partition int32) *Partition {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.parts[dest.TopicPartition{Topic: topic, Partition: partition}]
}

// partitionsOf returns the reconcilers of mirror runtime mr.
func (e *Engine) partitionsOf(mr *Runtime) []*Partition {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*Partition
	for _, r := range e.parts {
		if r.mr == mr {
			out = append(out, r)
		}
	}
	return out
}

// DropMirror stops and forgets the Runtime of mirror name and its reconcilers.
func (e *Engine) DropMirror(name string) error {
	e.mu.Lock()
	mr := e.mirrors[name]
	delete(e.mirrors, name)
	var rs []*Partition
	for tp, r := range e.parts {
		if r.mirror == name {
			rs = append(rs, r)
			delete(e.parts, tp)
		}
	}
	e.mu.Unlock()
	for _, r := range rs {
		r.stop()
	}
	if mr == nil {
		return nil
	}
	return mr.close()
}

// SyncAll runs one metadata-sync cycle of every mirror now, then starts the reconcilers
// of topics and partitions it created. The error joins the failures of whole cycles.
func (e *Engine) SyncAll(ctx context.Context) error {
	e.mu.Lock()
	mirrors := make([]*Runtime, 0, len(e.mirrors))
	for _, mr := range e.mirrors {
		mirrors = append(mirrors, mr)
	}
	e.mu.Unlock()
	var errs []error
	for _, mr := range mirrors {
		if _, err := mr.syncOnce(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	e.Refresh()
	return errors.Join(errs...)
}

// closeAny closes v when it has a Close method.
func closeAny(v any) error {
	switch c := v.(type) {
	case io.Closer:
		return c.Close()
	case interface{ Close() }:
		c.Close()
	}
	return nil
}
