package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
)

// mirrorRuntime is what one mirror has at run time: its source (fetch Source and
// SourceAdmin), its Fetcher, its Peer and its Syncer, each created on first use, and the
// cached source cluster id.
type mirrorRuntime struct {
	m     *Mirror
	name  string
	batch *stateBatcher // group commit of the reconcilers' coordinator calls
	gate  *retryGate    // the FAILED-retry backoff shared by the mirror's partitions

	mu           sync.Mutex // guards the fields below
	closed       bool
	source       fetcher.Source
	sadmin       SourceAdmin
	fetch        []*fetcher.Fetcher // Config.FetchersPerMirror loops, created on first use
	peer         Peer
	peerMade     bool
	syncer       *Syncer
	srcClusterID string
}

func newMirrorRuntime(m *Mirror, name string) *mirrorRuntime {
	return &mirrorRuntime{m: m, name: name, batch: newStateBatcher(m, name), gate: newRetryGate()}
}

// config returns the mirror's current configuration.
func (mr *mirrorRuntime) config() (MirrorConfig, error) {
	mi, ok := mr.m.ctrl.Mirror(mr.name)
	if !ok {
		return MirrorConfig{}, controller.UnknownMirror(mr.name)
	}
	return mi.Config, nil
}

// sources returns the mirror's fetch Source and SourceAdmin, built on first use.
func (mr *mirrorRuntime) sources() (fetcher.Source, SourceAdmin, error) {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	return mr.sourcesLocked()
}

func (mr *mirrorRuntime) sourcesLocked() (fetcher.Source, SourceAdmin, error) {
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
	src, sa, err := mr.m.opts.sources(mr.name, cfg)
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
func (mr *mirrorRuntime) shard(topic string, partition int32) int {
	h := uint32(2166136261) // FNV-1a of the topic, then the partition
	for i := 0; i < len(topic); i++ {
		h = (h ^ uint32(topic[i])) * 16777619
	}
	h = (h ^ uint32(partition)) * 16777619
	return int(h % uint32(mr.m.cfg.FetchersPerMirror))
}

// fetcher returns the Fetcher of a partition, started on first use.
func (mr *mirrorRuntime) fetcher(topic string, partition int32) (*fetcher.Fetcher, error) {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if mr.closed {
		return nil, ErrClosed
	}
	if mr.fetch == nil {
		mr.fetch = make([]*fetcher.Fetcher, mr.m.cfg.FetchersPerMirror)
	}
	i := mr.shard(topic, partition)
	if mr.fetch[i] != nil {
		return mr.fetch[i], nil
	}
	src, _, err := mr.sourcesLocked()
	if err != nil {
		return nil, err
	}
	cfg, err := mr.config()
	if err != nil {
		return nil, err
	}
	f, err := fetcher.NewFetcher(src, mr.m.fetcherConfig(cfg, fetchEvents{mr}))
	if err != nil {
		return nil, err
	}
	mr.fetch[i] = f
	return f, nil
}

// currentFetcher returns the Fetcher of a partition if one was started.
func (mr *mirrorRuntime) currentFetcher(topic string, partition int32) *fetcher.Fetcher {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if mr.fetch == nil {
		return nil
	}
	return mr.fetch[mr.shard(topic, partition)]
}

// getPeer returns the mirror's Peer (nil = none), built on first use.
func (mr *mirrorRuntime) getPeer() (Peer, error) {
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
	p, err := mr.m.opts.peers(mr.name, cfg)
	if err != nil {
		return nil, fmt.Errorf("mirror: peer of mirror %q: %w", mr.name, err)
	}
	mr.peer, mr.peerMade = p, true
	return p, nil
}

// clusterID returns the cached source cluster id ("" until resolved).
func (mr *mirrorRuntime) clusterID() string {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	return mr.srcClusterID
}

// resolveClusterID asks the source for its cluster id once; failures are logged and
// retried on the next call.
func (mr *mirrorRuntime) resolveClusterID(ctx context.Context) {
	if mr.clusterID() != "" {
		return
	}
	_, sa, err := mr.sources()
	if err == nil {
		var id string
		if id, err = sa.ClusterID(ctx); err == nil {
			mr.mu.Lock()
			mr.srcClusterID = id
			mr.mu.Unlock()
			return
		}
	}
	mr.m.log.Warn("mirror: cannot resolve the source cluster id", "mirror", mr.name, "err", err)
}

// syncOnce runs one sync cycle of the mirror.
func (mr *mirrorRuntime) syncOnce(ctx context.Context) (SyncStats, error) {
	mr.mu.Lock()
	if mr.syncer == nil {
		_, sa, err := mr.sourcesLocked()
		if err != nil {
			mr.mu.Unlock()
			return SyncStats{}, err
		}
		s, err := NewSyncer(SyncConfig{Mirror: mr.name, Controller: mr.m.ctrl, Source: sa,
			Destination: mr.m.dest, Logger: mr.m.log, Interval: time.Hour, Mirroring: mr.partitionMirroring})
		if err != nil {
			mr.mu.Unlock()
			return SyncStats{}, err
		}
		mr.syncer = s
	}
	s := mr.syncer
	mr.mu.Unlock()
	mr.resolveClusterID(ctx)
	st, err := s.SyncOnce(ctx)
	mr.failSourceTopics(st)
	mr.keepEpochsAhead(ctx)
	return st, err
}

// syncLoop runs syncOnce every interval until the Mirror closes or the mirror is
// dropped.
func (mr *mirrorRuntime) syncLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-mr.m.ctx.Done():
			return
		case <-t.C:
		}
		mr.mu.Lock()
		closed := mr.closed
		mr.mu.Unlock()
		if closed {
			return
		}
		if _, err := mr.syncOnce(mr.m.ctx); err != nil && mr.m.ctx.Err() == nil {
			mr.m.log.Warn("mirror: sync cycle failed", "mirror", mr.name, "err", err)
		}
		mr.m.refresh()
	}
}

// close stops the fetcher and closes the source, source admin and peer.
func (mr *mirrorRuntime) close() error {
	mr.mu.Lock()
	if mr.closed {
		mr.mu.Unlock()
		return nil
	}
	mr.closed = true
	fs, src, sa, p := mr.fetch, mr.source, mr.sadmin, mr.peer
	mr.mu.Unlock()
	var errs []error
	for _, f := range fs {
		if f == nil {
			continue
		}
		if err := f.Close(); err != nil && !errors.Is(err, fetcher.ErrFetcherClosed) {
			errs = append(errs, err)
		}
	}
	if src != nil {
		errs = append(errs, closeAny(src))
	}
	if sa != nil {
		errs = append(errs, sa.Close())
	}
	if p != nil {
		if _, self := p.(*Mirror); !self {
			errs = append(errs, closeAny(p))
		}
	}
	return errors.Join(errs...)
}

// fetchEvents routes fetcher events of a mirror to the partition reconcilers.
type fetchEvents struct{ mr *mirrorRuntime }

func (e fetchEvents) reconciler(tp fetcher.TopicPartition) *reconciler {
	r := e.mr.m.reconcilerOf(tp.Topic, tp.Partition)
	if r == nil || r.mr != e.mr {
		return nil
	}
	return r
}

// OnDivergence implements fetcher.Events: with mirror.support.unclean.leader.election the
// fetcher has stopped the partition; the reconciler moves it to ULE_LOG_TRUNCATION.
func (e fetchEvents) OnDivergence(tp fetcher.TopicPartition, d epoch.Divergence, truncatedTo int64) {
	e.mr.m.opts.ops.metrics.Truncation(PartitionRef{e.mr.name, tp.Topic, tp.Partition}, TruncationDivergence, 0)
	if r := e.reconciler(tp); r != nil {
		r.onDivergence(truncatedTo)
	}
}

// OnOutOfRange implements fetcher.Events.
func (e fetchEvents) OnOutOfRange(tp fetcher.TopicPartition, fetchOffset, sourceLogStart, gap int64) {
	e.mr.m.log.Warn("mirror: fetch offset below the source log start", "mirror", e.mr.name,
		"partition", tp.String(), "fetchOffset", fetchOffset, "sourceLogStart", sourceLogStart, "gap", gap)
	e.mr.m.opts.ops.metrics.Truncation(PartitionRef{e.mr.name, tp.Topic, tp.Partition}, TruncationOutOfRange, gap)
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
		if old := r.srcHW.Swap(p.SourceHighWatermark); p.Bytes > 0 || old != p.SourceHighWatermark {
			e.mr.m.notifyChange() // wakes waiters on log progress (tests, CLI)
		}
		if p.Bytes > 0 {
			r.onAppended()
		}
		r.onHealthy()
	}
}
