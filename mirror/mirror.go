package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/statemachine"
)

// Mirror is the KIP-1279 facade of one destination cluster (or one host instance of it).
// It owns the coordinator runtime of the actual partition states, the Controller of the
// desired states and mirror definitions, one fetcher and source per mirror (created
// lazily), the periodic metadata sync, and one reconciler goroutine per mirror partition
// that drives the partition's state machine. Its methods are the Go admin API (spec §15.1)
// and the instance-to-instance RPCs (ReadMirrorStates, WriteMirrorStates,
// ReadMirrorOffsets, BumpLeaderEpochs). *Mirror implements Peer, so that an in-process
// site can be the other side of a failback.
//
// Safe for concurrent use. Close stops every goroutine the Mirror started.
type Mirror struct {
	cfg   Config
	opts  options
	log   *slog.Logger
	dest  Destination
	ctrl  *Controller
	coord *coordinator.Runtime
	store coordinator.Store
	owned []io.Closer // the default stores New opened (defaults.go), closed by Close

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // reconcilers and sync loops

	mu      sync.Mutex // guards the fields below
	closed  bool
	mirrors map[string]*mirrorRuntime
	parts   map[TopicPartition]*reconciler // by destination topic/partition

	changeMu sync.Mutex
	changeCh chan struct{} // closed and replaced on every actual-state change

	// noReconcile keeps syncTopic from starting reconcilers (tests that drive the
	// coordinator states by hand).
	noReconcile bool
}

// New builds a Mirror: it opens the Controller on cfg.ControllerLog, starts the
// coordinator runtime on cfg.Store (loading every __mirror_state partition with owner
// epoch 1 unless cfg.ManualCoordinatorOwnership), and starts a reconciler for every
// partition of every mirror topic the controller knows.
func New(cfg Config, opts ...Option) (*Mirror, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	owned, err := openDefaultStores(&cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctrl, err := OpenController(ctx, cfg.ControllerLog)
	if err != nil {
		cancel()
		return nil, errors.Join(err, closeAll(owned))
	}
	coord, err := coordinator.New(cfg.Coordinator, cfg.Store)
	if err != nil {
		cancel()
		return nil, errors.Join(err, closeAll(owned))
	}
	m := &Mirror{
		cfg: cfg, opts: o, log: o.logger, dest: cfg.Destination, ctrl: ctrl, coord: coord, store: cfg.Store, owned: owned,
		ctx: ctx, cancel: cancel, mirrors: map[string]*mirrorRuntime{}, parts: map[TopicPartition]*reconciler{},
		changeCh: make(chan struct{}),
	}
	if !cfg.ManualCoordinatorOwnership {
		for p := int32(0); p < cfg.Coordinator.NumPartitions; p++ {
			if err := coord.Load(p, 1); err != nil {
				_ = m.Close()
				return nil, err
			}
		}
		for p := int32(0); p < cfg.Coordinator.NumPartitions; p++ {
			if err := coord.WaitLoaded(ctx, p); err != nil {
				_ = m.Close()
				return nil, fmt.Errorf("mirror: load __mirror_state partition %d: %w", p, err)
			}
		}
	}
	for _, mi := range ctrl.Mirrors() {
		m.ensureMirror(mi.Name)
	}
	ctrl.Watch(m.onTopicChange)
	m.refresh()
	return m, nil
}

// Coordinator returns the coordinator runtime. A multi-instance host (Config.
// ManualCoordinatorOwnership) calls Load(p, epoch) when this instance becomes the owner
// of __mirror_state partition p and Unload(p, epoch) when it loses it; reconcilers whose
// state partition is loading wait for the load, and NOT_COORDINATOR answers are retried.
func (m *Mirror) Coordinator() *coordinator.Runtime { return m.coord }

// Controller returns the read-only view of the controller of desired states and mirror
// definitions. Desired states change only through the workflows (StartMirrorTopics,
// StopMirrorTopics, ...), which check the actual partition states first.
func (m *Mirror) Controller() ControllerView { return m.ctrl.View() }

// Destination returns the destination cluster.
func (m *Mirror) Destination() Destination { return m.dest }

// ClusterID returns the destination cluster's id.
func (m *Mirror) ClusterID() string { return m.dest.ClusterID() }

// Close stops every reconciler, fetcher, sync loop and source the Mirror started, closes
// the coordinator runtime and waits for every goroutine, then closes the default state
// stores New opened. It does not close the Destination, nor a ControllerLog or Store the
// host passed. A second Close returns ErrClosed.
func (m *Mirror) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.closed = true
	parts := make([]*reconciler, 0, len(m.parts))
	for _, r := range m.parts {
		parts = append(parts, r)
	}
	mirrors := make([]*mirrorRuntime, 0, len(m.mirrors))
	for _, mr := range m.mirrors {
		mirrors = append(mirrors, mr)
	}
	m.mu.Unlock()
	m.cancel()
	for _, r := range parts {
		r.stop()
	}
	m.wg.Wait()
	var errs []error
	for _, mr := range mirrors {
		errs = append(errs, mr.close())
	}
	errs = append(errs, m.coord.Close(), closeAll(m.owned))
	return errors.Join(errs...)
}

// isClosed reports whether Close was called.
func (m *Mirror) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// notifyChange wakes every WaitForStates.
func (m *Mirror) notifyChange() {
	m.changeMu.Lock()
	close(m.changeCh)
	m.changeCh = make(chan struct{})
	m.changeMu.Unlock()
}

// changed returns a channel closed at the next actual-state change.
func (m *Mirror) changed() <-chan struct{} {
	m.changeMu.Lock()
	defer m.changeMu.Unlock()
	return m.changeCh
}

// ensureMirror creates the runtime of mirror name if missing.
func (m *Mirror) ensureMirror(name string) *mirrorRuntime {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if mr, ok := m.mirrors[name]; ok {
		return mr
	}
	mr := newMirrorRuntime(m, name)
	m.mirrors[name] = mr
	if m.cfg.SyncInterval > 0 {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			mr.syncLoop(m.cfg.SyncInterval)
		}()
	}
	return mr
}

// mirror returns the runtime of mirror name.
func (m *Mirror) mirror(name string) (*mirrorRuntime, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mr, ok := m.mirrors[name]
	return mr, ok
}

// onTopicChange is the Controller watch: it starts, kicks or stops the reconcilers of
// the topic.
func (m *Mirror) onTopicChange(ts TopicState) {
	m.syncTopic(ts)
}

// refresh makes sure every partition of every mirror topic has a reconciler (topics
// created after their desired state was set, partitions grown by the sync).
func (m *Mirror) refresh() {
	for _, ts := range m.ctrl.Topics("") {
		m.syncTopic(ts)
	}
}

// syncTopic reconciles the set of reconcilers of one topic with its desired state and
// wakes them.
func (m *Mirror) syncTopic(ts TopicState) {
	var spec TopicSpec
	var haveTopic bool
	if ts.Mirror != "" {
		spec, haveTopic = m.dest.Topic(ts.Topic)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	var stale, kick []*reconciler
	prev := map[TopicPartition]*reconciler{}
	for tp, r := range m.parts {
		if tp.Topic != ts.Topic {
			continue
		}
		if r.mirror != ts.Mirror || r.topicID != ts.TopicID || ts.Mirror == "" {
			stale = append(stale, r)
			prev[tp] = r
			delete(m.parts, tp)
			continue
		}
		kick = append(kick, r)
	}
	var mr *mirrorRuntime
	if ts.Mirror != "" {
		mr = m.mirrors[ts.Mirror]
	}
	var fresh []*reconciler
	if mr != nil && haveTopic && !m.noReconcile {
		for p := int32(0); p < spec.Partitions; p++ {
			tp := TopicPartition{Topic: ts.Topic, Partition: p}
			if _, ok := m.parts[tp]; ok {
				continue
			}
			// The reconciler opens the log itself: a log that cannot be opened makes
			// the partition FAILED at once (openLog), the others go on.
			r := newReconciler(m, mr, ts.Topic, ts.TopicID, p)
			r.prev = prev[tp] // the new owner starts once the old one has stopped
			m.parts[tp] = r
			fresh = append(fresh, r)
		}
	}
	for _, r := range fresh {
		m.wg.Add(1)
		go r.run()
	}
	m.mu.Unlock()
	for _, r := range stale {
		r.cancel()
	}
	for _, r := range kick {
		r.kick()
	}
}

// reconcilerOf returns the reconciler of one destination partition.
func (m *Mirror) reconcilerOf(topic string, partition int32) *reconciler {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[TopicPartition{Topic: topic, Partition: partition}]
}

// reconcilersOf returns the reconcilers of mirror runtime mr.
func (m *Mirror) reconcilersOf(mr *mirrorRuntime) []*reconciler {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*reconciler
	for _, r := range m.parts {
		if r.mr == mr {
			out = append(out, r)
		}
	}
	return out
}

// dropMirror stops and forgets the runtime of mirror name and its reconcilers.
func (m *Mirror) dropMirror(name string) error {
	m.mu.Lock()
	mr := m.mirrors[name]
	delete(m.mirrors, name)
	var rs []*reconciler
	for tp, r := range m.parts {
		if r.mirror == name {
			rs = append(rs, r)
			delete(m.parts, tp)
		}
	}
	m.mu.Unlock()
	for _, r := range rs {
		r.stop()
	}
	if mr == nil {
		return nil
	}
	return mr.close()
}

// WaitForStates blocks until every partition of topics of mirror name is actually in
// state want, as this instance's reconcilers last wrote it (and ran its entry actions:
// a STOPPED partition is writable). It returns early with an error when a partition is
// FAILED and nothing can lead out of it (want is not STOPPED and no automatic retry is
// left: off, exhausted or a non-retryable failure), when a topic is not a topic of the mirror, or when ctx is done. A test and CLI
// helper.
func (m *Mirror) WaitForStates(ctx context.Context, name string, topics []string, want statemachine.State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, ok := m.ctrl.Mirror(name); !ok {
		return controller.UnknownMirror(name)
	}
	for _, topic := range topics {
		ts, ok := m.ctrl.Topic(topic)
		if !ok || ts.Mirror != name {
			return fmt.Errorf("mirror: topic %q is not a topic of mirror %q", topic, name)
		}
		for p := int32(0); ; p++ {
			spec, ok := m.dest.Topic(topic)
			if !ok {
				return fmt.Errorf("mirror: destination topic %q does not exist", topic)
			}
			if p >= spec.Partitions {
				break
			}
			for {
				ch := m.changed()
				r := m.reconcilerOf(topic, p)
				if r != nil && r.mirror == name {
					st, reason := r.current()
					if st == want {
						break
					}
					// FAILED is final unless a stop (FAILED -> STOPPING) or an automatic
					// retry can lead out of it.
					if st == statemachine.Failed && want != statemachine.Stopped && r.failureFinal() {
						return fmt.Errorf("mirror: topic %q partition %d is FAILED: %s", topic, p, reason)
					}
				}
				select {
				case <-ch:
				case <-ctx.Done():
					st := statemachine.Unknown
					if r != nil {
						st, _ = r.current()
					}
					return fmt.Errorf("mirror: waiting for topic %q partition %d to be %s (now %s): %w", topic, p, want, st, ctx.Err())
				case <-m.ctx.Done():
					return ErrClosed
				}
			}
		}
	}
	return nil
}

// WaitForLag blocks until every partition of topics of mirror name is MIRRORING with a
// known source offset and a lag of at most maxLag (a controlled migration waits for 0
// before it stops the topics). It returns early with an error when a partition is
// FAILED, when a topic is not a topic of the mirror, or when ctx is done.
func (m *Mirror) WaitForLag(ctx context.Context, name string, topics []string, maxLag int64) error {
	if err := m.WaitForStates(ctx, name, topics, statemachine.Mirroring); err != nil {
		return err
	}
	for _, topic := range topics {
		spec, ok := m.dest.Topic(topic)
		if !ok {
			return fmt.Errorf("mirror: destination topic %q does not exist", topic)
		}
		for p := int32(0); p < spec.Partitions; p++ {
			for {
				ch := m.changed()
				r := m.reconcilerOf(topic, p)
				if r == nil || r.mirror != name {
					return fmt.Errorf("mirror: topic %q partition %d is not mirrored by %q", topic, p, name)
				}
				st, reason := r.current()
				// FAILED is final unless an automatic retry can lead out of it.
				if st == statemachine.Failed && r.failureFinal() {
					return fmt.Errorf("mirror: topic %q partition %d is FAILED: %s", topic, p, reason)
				}
				src, dst := r.offsets()
				if st == statemachine.Mirroring && src >= 0 && src-dst <= maxLag {
					break
				}
				select {
				case <-ch:
				case <-ctx.Done():
					return fmt.Errorf("mirror: waiting for topic %q partition %d to catch up (source %d, destination %d): %w", topic, p, src, dst, ctx.Err())
				case <-m.ctx.Done():
					return ErrClosed
				}
			}
		}
	}
	return nil
}

// Sync runs one metadata-sync cycle (spec §17) of every mirror now, then starts the
// reconcilers of topics and partitions it created. Per-topic problems are logged; the
// returned error joins the failures of whole cycles.
func (m *Mirror) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	mirrors := make([]*mirrorRuntime, 0, len(m.mirrors))
	for _, mr := range m.mirrors {
		mirrors = append(mirrors, mr)
	}
	m.mu.Unlock()
	var errs []error
	for _, mr := range mirrors {
		if _, err := mr.syncOnce(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	m.refresh()
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

// fetcherConfig returns the fetcher configuration of a mirror.
func (m *Mirror) fetcherConfig(cfg MirrorConfig, ev fetcher.Events) fetcher.Config {
	return fetcher.Config{
		PartitionMaxBytes: cfg.FetchPartitionMaxBytes,
		Events:            ev,
		Logger:            m.log,
		StopOnDivergence:  cfg.SupportUncleanLeaderElec,
		IdleWait:          m.cfg.FetchIdleWait,
		// socket.timeout.ms: a source unreachable for longer fails the partitions
		// (retryable, fetcher.ErrSourceUnreachable) instead of hiding in MIRRORING.
		UnreachableTimeout: cfg.SocketTimeout,
	}
}
