package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/statemachine"
)

// Runtime is what one mirror has at run time: its source (fetch Source and
// SourceAdmin), its Fetcher, its Peer and its Syncer, each created on first use, and the
// cached source cluster id.
type Runtime struct {
	e     *Engine
	name  string
	batch *stateBatcher // group commit of the reconcilers' coordinator calls
	gate  *retryGate    // the FAILED-retry backoff shared by the mirror's partitions
	stop  chan struct{} // closed by close: the mirror's own loops end

	mu           sync.Mutex // guards the fields below
	closed       bool
	source       fetcher.Source
	sadmin       metasync.SourceAdmin
	fetch        [2][]*fetcher.Fetcher // by StopOnDivergence (ulePool): FetchersPerMirror loops each, made on first use
	peer         PeerView
	peerMade     bool
	syncer       *metasync.Syncer
	srcClusterID string
}

func newRuntime(e *Engine, name string) *Runtime {
	return &Runtime{e: e, name: name, batch: newStateBatcher(e, name), gate: newRetryGate(), stop: make(chan struct{})}
}

// Name is the mirror's name.
func (mr *Runtime) Name() string { return mr.name }

// config returns the mirror's current configuration.
func (mr *Runtime) config() (controller.MirrorConfig, error) {
	mi, ok := mr.e.ctrl.Mirror(mr.name)
	if !ok {
		return controller.MirrorConfig{}, controller.UnknownMirror(mr.name)
	}
	return mi.Config, nil
}

// Sources returns the mirror's fetch Source and SourceAdmin, built on first use.
func (mr *Runtime) Sources() (fetcher.Source, metasync.SourceAdmin, error) {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	return mr.sourcesLocked()
}

func (mr *Runtime) sourcesLocked() (fetcher.Source, metasync.SourceAdmin, error) {
	if mr.closed {
		return nil, nil, ErrClosed
	}
	if mr.source != nil {
		return mr.source, mr.sadmin, nil
	}
	cfg, err := mr.config()
	if err != nil {
		return nil, nil, err
	}
	src, sa, err := mr.e.sources(mr.name, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: source of mirror %q: %w", mr.name, err)
	}
	if src == nil || sa == nil {
		return nil, nil, fmt.Errorf("mirror: source factory returned no source for mirror %q", mr.name)
	}
	mr.source, mr.sadmin = src, sa
	return src, sa, nil
}

// shard picks the fetch loop of a partition.
func (mr *Runtime) shard(topic string, partition int32) int {
	h := uint32(2166136261) // FNV-1a of the topic, then the partition
	for i := 0; i < len(topic); i++ {
		h = (h ^ uint32(topic[i])) * 16777619
	}
	h = (h ^ uint32(partition)) * 16777619
	return int(h % uint32(mr.e.cfg.FetchersPerMirror))
}

// ulePool is the index in Runtime.fetch of the fetch loops with StopOnDivergence = ule.
func ulePool(ule bool) int {
	if ule {
		return 1
	}
	return 0
}

// fetcher returns the Fetcher of a partition, started on first use: one of the loops
// that stop a partition after a divergence truncation (ule: unclean leader election
// supported for its topic, spec §7.4) or one of those that truncate and go on.
func (mr *Runtime) fetcher(topic string, partition int32, ule bool) (*fetcher.Fetcher, error) {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if mr.closed {
		return nil, ErrClosed
	}
	pool := &mr.fetch[ulePool(ule)]
	if *pool == nil {
		*pool = make([]*fetcher.Fetcher, mr.e.cfg.FetchersPerMirror)
	}
	i := mr.shard(topic, partition)
	if (*pool)[i] != nil {
		return (*pool)[i], nil
	}
	src, _, err := mr.sourcesLocked()
	if err != nil {
		return nil, err
	}
	cfg, err := mr.config()
	if err != nil {
		return nil, err
	}
	f, err := fetcher.NewFetcher(src, mr.e.fetcherConfig(cfg, ule, fetchEvents{mr: mr, ule: ule}))
	if err != nil {
		return nil, err
	}
	(*pool)[i] = f
	return f, nil
}

// currentFetchers returns the started Fetchers a partition may be in (one per pool).
func (mr *Runtime) currentFetchers(topic string, partition int32) []*fetcher.Fetcher {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	var out []*fetcher.Fetcher
	for _, pool := range mr.fetch {
		if pool != nil && pool[mr.shard(topic, partition)] != nil {
			out = append(out, pool[mr.shard(topic, partition)])
		}
	}
	return out
}

// getPeer returns the mirror's Peer (nil = none), built on first use.
func (mr *Runtime) getPeer() (PeerView, error) {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if mr.closed {
		return nil, ErrClosed
	}
	if mr.peerMade {
		return mr.peer, nil
	}
	cfg, err := mr.config()
	if err != nil {
		return nil, err
	}
	p, err := mr.e.peers(mr.name, cfg)
	if err != nil {
		return nil, fmt.Errorf("mirror: peer of mirror %q: %w", mr.name, err)
	}
	mr.peer, mr.peerMade = p, true
	return p, nil
}

// ClusterID returns the cached source cluster id ("" until resolved).
func (mr *Runtime) ClusterID() string {
	mr.mu.Lock()
	id := mr.srcClusterID
	mr.mu.Unlock()
	if id != "" {
		return id
	}
	if cfg, err := mr.config(); err == nil {
		return cfg.SourceClusterID // recorded the last time the source answered
	}
	return ""
}

// ResolveClusterID asks the source for its cluster id once, and has it recorded with
// the mirror (Deps.SourceClusterID) when it differs from the recorded one; failures are
// logged and retried on the next call.
func (mr *Runtime) ResolveClusterID(ctx context.Context) {
	mr.mu.Lock()
	resolved := mr.srcClusterID != ""
	mr.mu.Unlock()
	if resolved {
		return
	}
	_, sa, err := mr.Sources()
	if err == nil {
		var id string
		if id, err = sa.ClusterID(ctx); err == nil && id != "" {
			mr.mu.Lock()
			mr.srcClusterID = id
			mr.mu.Unlock()
			if cfg, cerr := mr.config(); cerr == nil && cfg.SourceClusterID != id && mr.e.recordID != nil {
				if rerr := mr.e.recordID(ctx, mr.name, id); rerr != nil {
					mr.e.log.Warn("mirror: cannot record the source cluster id", "mirror", mr.name, "id", id, "err", rerr)
				}
			}
			return
		}
	}
	if err == nil {
		return // an empty id: nothing to record, asked again next time
	}
	mr.e.log.Warn("mirror: cannot resolve the source cluster id", "mirror", mr.name, "err", err)
}

// syncOnce runs one sync cycle of the mirror.
func (mr *Runtime) syncOnce(ctx context.Context) (metasync.SyncStats, error) {
	mr.mu.Lock()
	if mr.syncer == nil {
		_, sa, err := mr.sourcesLocked()
		if err != nil {
			mr.mu.Unlock()
			return metasync.SyncStats{}, err
		}
		s, err := mr.e.newSyncer(mr.name, sa)
		if err != nil {
			mr.mu.Unlock()
			return metasync.SyncStats{}, err
		}
		mr.syncer = s
	}
	s := mr.syncer
	mr.mu.Unlock()
	mr.ResolveClusterID(ctx)
	st, err := s.SyncOnce(ctx)
	mr.failSourceTopics(st)
	mr.keepEpochsAhead(ctx)
	return st, err
}

// syncLoop runs syncOnce every interval (the mirror's own when it sets
// mirror.metadata.refresh.interval.ms) until the Mirror closes or the mirror is
// dropped.
func (mr *Runtime) syncLoop(interval time.Duration) {
	t := time.NewTimer(mr.syncInterval(interval))
	defer t.Stop()
	var failed int64 // consecutive failed cycles, logged at the first and when they end
	var lastErr string
	for {
		select {
		case <-mr.e.ctx.Done():
			return
		case <-t.C:
		}
		if mr.isClosed() {
			return
		}
		if cfg, err := mr.config(); err != nil || !cfg.MetadataRefreshSet || cfg.MetadataRefreshInterval > 0 {
			_, err := mr.syncOnce(mr.e.ctx)
			switch {
			case err != nil && mr.e.ctx.Err() == nil:
				if failed++; failed == 1 || err.Error() != lastErr {
					mr.e.log.Warn("mirror: sync cycle failed", "mirror", mr.name, "failed_cycles", failed, "err", err)
				}
				lastErr = err.Error()
			case err == nil && failed > 0:
				mr.e.log.Info("mirror: sync cycles succeed again", "mirror", mr.name, "failed_cycles", failed, "last_err", lastErr)
				failed, lastErr = 0, ""
			}
			mr.e.Refresh()
		}
		t.Reset(mr.syncInterval(interval))
	}
}

// syncInterval is the period of the mirror's metadata sync: its
// mirror.metadata.refresh.interval.ms when set and positive, else the host's interval
// (with the config at 0 the loop wakes at the host's interval and skips the cycle).
func (mr *Runtime) syncInterval(host time.Duration) time.Duration {
	if cfg, err := mr.config(); err == nil && cfg.MetadataRefreshSet && cfg.MetadataRefreshInterval > 0 {
		return cfg.MetadataRefreshInterval
	}
	return host
}

// close stops the fetcher and closes the source, source admin and peer.
func (mr *Runtime) close() error {
	mr.mu.Lock()
	if mr.closed {
		mr.mu.Unlock()
		return nil
	}
	mr.closed = true
	close(mr.stop)
	fs, src, sa, p := slices.Concat(mr.fetch[0], mr.fetch[1]), mr.source, mr.sadmin, mr.peer
	mr.mu.Unlock()
	errs := closeFetchers(fs)
	if src != nil {
		errs = append(errs, closeAny(src))
	}
	if sa != nil {
		errs = append(errs, sa.Close())
	}
	if p != nil {
		errs = append(errs, closeAny(p))
	}
	return errors.Join(errs...)
}

// fetchEvents routes fetcher events of a mirror to the partition reconcilers; ule is
// the StopOnDivergence of the fetch loops it serves.
type fetchEvents struct {
	mr  *Runtime
	ule bool
}

func (e fetchEvents) reconciler(tp fetcher.TopicPartition) *Partition {
	r := e.mr.e.Partition(tp.Topic, tp.Partition)
	if r == nil || r.mr != e.mr {
		return nil
	}
	return r
}

// OnDivergence implements fetcher.Events: a fetch loop of the ULE pool (unclean leader
// election supported for the topic) has stopped the partition after the truncation; the
// reconciler moves it to ULE_LOG_TRUNCATION. The other loops truncate and go on.
func (e fetchEvents) OnDivergence(tp fetcher.TopicPartition, d epoch.Divergence, truncatedTo int64) {
	e.mr.e.metrics.Truncation(PartitionRef{e.mr.name, tp.Topic, tp.Partition}, TruncationDivergence, 0)
	r := e.reconciler(tp)
	if r != nil {
		r.fidelityTruncated()
	}
	if r != nil && e.ule {
		r.push(statemachine.DivergenceULE{TruncateOffset: truncatedTo})
	}
}

// OnOutOfRange implements fetcher.Events.
func (e fetchEvents) OnOutOfRange(tp fetcher.TopicPartition, fetchOffset, sourceLogStart, gap int64) {
	e.mr.e.log.Warn("mirror: fetch offset below the source log start", "mirror", e.mr.name,
		"partition", tp.String(), "fetchOffset", fetchOffset, "sourceLogStart", sourceLogStart, "gap", gap)
	e.mr.e.metrics.Truncation(PartitionRef{e.mr.name, tp.Topic, tp.Partition}, TruncationOutOfRange, gap)
	if r := e.reconciler(tp); r != nil {
		r.fidelityTruncated()
		r.fid.verified.Store(-1) // fully truncated: start again at the new log start
	}
}

// OnEpochFencing implements fetcher.Events.
func (e fetchEvents) OnEpochFencing(tp fetcher.TopicPartition, batchEpoch, localEpoch int32) {
	if r := e.reconciler(tp); r != nil {
		r.onEpochFencing(batchEpoch, localEpoch)
	}
}

// OnFailed implements fetcher.Events.
func (e fetchEvents) OnFailed(tp fetcher.TopicPartition, err error) {
	if r := e.reconciler(tp); r != nil {
		r.onFetchFailed(err)
	}
}

// OnProgress implements fetcher.Events.
func (e fetchEvents) OnProgress(tp fetcher.TopicPartition, p fetcher.Progress) {
	if r := e.reconciler(tp); r != nil {
		r.observeProgress(p)
		r.fid.noteSourceEnd(p.SourceHighWatermark, r.e.clock())
		if old := r.srcHW.Swap(p.SourceHighWatermark); p.Bytes > 0 || old != p.SourceHighWatermark {
			e.mr.e.notifyChange() // wakes waiters on log progress (tests, CLI)
		}
		if p.Bytes > 0 {
			r.onAppended()
		}
		r.onHealthy()
	}
}

// fetcherConfig returns the fetcher configuration of a mirror's fetch loops that stop a
// partition after a divergence truncation (ule) or not.
func (e *Engine) fetcherConfig(cfg controller.MirrorConfig, ule bool, ev fetcher.Events) fetcher.Config {
	return fetcher.Config{
		PartitionMaxBytes: cfg.FetchPartitionMaxBytes,
		Events:            ev,
		Logger:            e.log,
		StopOnDivergence:  ule,
		IdleWait:          e.cfg.FetchIdleWait,
		// socket.timeout.ms: a source unreachable for longer fails the partitions
		// (retryable, fetcher.ErrSourceUnreachable) instead of hiding in MIRRORING.
		UnreachableTimeout: cfg.SocketTimeout,
	}
}

// closeFetchers closes the fetchers all at once: each Close waits for its fetch in
// flight, which can be a long poll of up to fetch.wait.max.ms, so closing them one
// after the other would add those waits up (seconds per mirror at shutdown).
func closeFetchers(fs []*fetcher.Fetcher) []error {
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		if f == nil {
			continue
		}
		wg.Go(func() {
			if err := f.Close(); err != nil && !errors.Is(err, fetcher.ErrFetcherClosed) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errs
}

// isClosed reports whether close has run: the loops of the mirror end then.
func (mr *Runtime) isClosed() bool {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	return mr.closed
}
