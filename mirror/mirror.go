package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/internal/reconcile"
	"github.com/kmirror/kmirror/statemachine"
)

// Mirror is the KIP-1279 facade of one destination cluster (or one host instance of it).
// It owns the coordinator runtime of the actual partition states, the Controller of the
// desired states and mirror definitions, one fetcher and source per mirror (created
// lazily), the periodic metadata sync, and one reconciler per mirror partition that
// drives the partition's state machine (run on a bounded pool of workers, none held
// while the partition has nothing to do). Its methods are the Go admin API (spec §15.1)
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
	eng   *reconcile.Engine // the reconcilers, mirror runtimes and sync loops
	owned []io.Closer       // the default stores New opened (defaults.go), closed by Close
	// stopDiscards unregisters reportDiscard from a destination that reports
	// the removals of its log opens (nil when it does not; discard.go).
	stopDiscards func()

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex // guards closed
	closed bool
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
	m := &Mirror{cfg: cfg, opts: o, log: o.logger, dest: cfg.Destination, store: cfg.Store, owned: owned, ctx: ctx, cancel: cancel}
	if err := m.open(); err != nil {
		cancel()
		return nil, err
	}
	m.watchDiscards()
	for _, mi := range m.ctrl.Mirrors() {
		m.ensureMirror(mi.Name)
	}
	m.ctrl.Watch(m.eng.SyncTopic)
	m.refresh()
	return m, nil
}

// open opens the Controller, starts the coordinator runtime and the reconciler engine,
// and loads the __mirror_state partitions unless Config.ManualCoordinatorOwnership. On
// failure everything it started and the default stores are closed.
func (m *Mirror) open() error {
	cfg := m.cfg
	ctrl, err := OpenController(m.ctx, cfg.ControllerLog)
	if err != nil {
		return errors.Join(err, closeAll(m.owned))
	}
	coord, err := coordinator.New(cfg.Coordinator, cfg.Store)
	if err != nil {
		return errors.Join(err, closeAll(m.owned))
	}
	m.ctrl, m.coord = ctrl, coord
	if m.eng, err = reconcile.New(m.engineDeps()); err != nil {
		return errors.Join(err, coord.Close(), closeAll(m.owned))
	}
	if cfg.ManualCoordinatorOwnership {
		return nil
	}
	for p := int32(0); p < cfg.Coordinator.NumPartitions; p++ {
		if err := coord.Load(p, 1); err != nil {
			_ = m.Close()
			return err
		}
	}
	for p := int32(0); p < cfg.Coordinator.NumPartitions; p++ {
		if err := coord.WaitLoaded(m.ctx, p); err != nil {
			_ = m.Close()
			return fmt.Errorf("mirror: load __mirror_state partition %d: %w", p, err)
		}
	}
	return nil
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

// Metrics returns the Metrics the Mirror reports to (WithMetrics; NopMetrics when none
// was given), for the wire adapters that report to the same place (mirror/adminhandler).
func (m *Mirror) Metrics() Metrics { return m.opts.ops.metrics }

// Logger returns the Mirror's logger (WithLogger; a discarding one when none was given).
func (m *Mirror) Logger() *slog.Logger { return m.log }

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
	m.mu.Unlock()
	m.cancel()
	if m.stopDiscards != nil {
		m.stopDiscards()
	}
	return errors.Join(m.eng.Close(), m.coord.Close(), closeAll(m.owned))
}

// isClosed reports whether Close was called.
func (m *Mirror) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Changed returns a channel closed at the next change a waiter may be waiting for: an
// actual-state change, log progress, or the first source problem of a partition. A
// waiter re-checks its condition (DescribeClusterMirrors, ...) each time it is closed,
// taking the channel before the check. A test and CLI helper.
func (m *Mirror) Changed() <-chan struct{} { return m.eng.Changed() }

// ensureMirror creates the runtime of mirror name if missing (nil after Close).
func (m *Mirror) ensureMirror(name string) *reconcile.Runtime { return m.eng.EnsureMirror(name) }

// mirror returns the runtime of mirror name.
func (m *Mirror) mirror(name string) (*reconcile.Runtime, bool) { return m.eng.Runtime(name) }

// refresh makes sure every partition of every mirror topic has a reconciler.
func (m *Mirror) refresh() { m.eng.Refresh() }

// reconcilerOf returns the reconciler of one destination partition (nil when none).
func (m *Mirror) reconcilerOf(topic string, partition int32) *reconcile.Partition {
	return m.eng.Partition(topic, partition)
}

// dropMirror stops and forgets the runtime of mirror name and its reconcilers.
func (m *Mirror) dropMirror(name string) error { return m.eng.DropMirror(name) }

// WaitForStates blocks until every partition of topics of mirror name is actually in
// state want, as this instance's reconcilers last wrote it (and ran its entry actions:
// a STOPPED partition is writable). It returns early with an error when a partition is
// FAILED and nothing can lead out of it (want is not STOPPED and no automatic retry is
// left: off, exhausted or a non-retryable failure), when a topic is not a topic of the mirror, or when ctx is done. A test and CLI
// helper.
func (m *Mirror) WaitForStates(ctx context.Context, name string, topics []string, want statemachine.State) error {
	return m.eng.WaitForStates(ctx, name, topics, want)
}

// WaitForLag blocks until every partition of topics of mirror name is MIRRORING with a
// known source offset and a lag of at most maxLag (a controlled migration waits for 0
// before it stops the topics). It returns early with an error when a partition is
// FAILED, when a topic is not a topic of the mirror, or when ctx is done.
func (m *Mirror) WaitForLag(ctx context.Context, name string, topics []string, maxLag int64) error {
	return m.eng.WaitForLag(ctx, name, topics, maxLag)
}

// Sync runs one metadata-sync cycle (spec §17) of every mirror now, then starts the
// reconcilers of topics and partitions it created. Per-topic problems are logged; the
// returned error joins the failures of whole cycles.
func (m *Mirror) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return m.eng.SyncAll(ctx)
}
