package mirror

import (
	"context"
	"io"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/reconcile"
	"github.com/kmirror/kmirror/mirror/metasync"
)

// The reconciler engine lives in internal/reconcile; these names of its failures keep
// the API of package mirror.
var (
	// ErrStorage is matched (errors.Is) by the cause of a partition FAILED because its
	// destination storage failed: its log could not be opened, or a write to it failed
	// with an I/O error (ENOSPC, EIO, EROFS, EDQUOT, a permission error). Such a
	// partition stays local to its failure and is retried by the automatic FAILED retry
	// (WithFailedRetry), so that it recovers once the disk is fixed.
	ErrStorage = reconcile.ErrStorage
	// ErrMirrorLoop is wrapped by the failure of a PREPARING partition whose topic is
	// still mirrored, in the other direction, by a mirror on the source cluster (spec
	// §6.3 step 3).
	ErrMirrorLoop = reconcile.ErrMirrorLoop
	// ErrPeerUnreachable is wrapped by the failure of a PREPARING partition whose LME
	// lookup on the source cluster kept failing with transient errors for longer than
	// the retry budget.
	ErrPeerUnreachable = reconcile.ErrPeerUnreachable
	// ErrTieredStorage fails a partition whose destination topic has tiered storage
	// enabled (remote.storage.enable=true): a mirror topic's log must stay local (spec
	// §5.5). Not retried.
	ErrTieredStorage = reconcile.ErrTieredStorage
)

// StorageError is the typed cause of a storage failure of one partition. It matches
// ErrStorage and unwraps to the I/O error.
type StorageError = reconcile.StorageError

// KeyRemoteStorageEnable is the topic config that turns on tiered storage.
const KeyRemoteStorageEnable = reconcile.KeyRemoteStorageEnable

// DefaultStorageRetry is the schedule on which the log open of a partition whose
// directory cannot be opened is retried: from 200 ms, doubling up to 30 s, without limit.
// Failures after the open follow the FAILED retry. Informational: the engine keeps its
// own copy.
var DefaultStorageRetry = RetryConfig(reconcile.DefaultStorageRetry)

// engineDeps names what the reconciler engine uses of the Mirror.
func (m *Mirror) engineDeps() reconcile.Deps {
	events := func(reconcile.StateChange) {}
	if fn := m.opts.events; fn != nil {
		events = func(sc reconcile.StateChange) { fn(StateChange(sc)) }
	}
	sources := m.opts.sources
	return reconcile.Deps{
		Coordinator: m.coord,
		Destination: m.dest,
		Controller:  m.ctrl,
		Sources: func(name string, cfg MirrorConfig) (fetcher.Source, metasync.SourceAdmin, error) {
			return sources(name, cfg)
		},
		Peers: m.peerView,
		NewSyncer: func(name string, sa metasync.SourceAdmin) (*metasync.Syncer, error) {
			return metasync.NewSyncer(metasync.SyncConfig{Mirror: name, Controller: m.ctrl, Source: sa,
				Destination: m.dest, Logger: m.log, Mirroring: m.partitionMirroring(name), Observer: conditionObserver(m.opts.ops.metrics),
				Groups: m.opts.groups})
		},
		SourceClusterID: m.ctrl.RecordSourceClusterID,
		Metrics:         m.opts.ops.metrics,
		Events:          events,
		Removals:        m.opts.removals,
		ClearApproval:   m.ctrl.ClearApproval,
		Logger:          m.log,
		Clock:           m.opts.clock,
		Config: reconcile.Config{FetchersPerMirror: m.cfg.FetchersPerMirror, SyncInterval: m.cfg.SyncInterval,
			FetchIdleWait: m.cfg.FetchIdleWait, Retry: reconcile.RetryConfig(m.opts.retry),
			UnreachableAfter: m.opts.ops.unreachableAfter, MaxActive: m.cfg.ActiveReconcilers},
	}
}

// peerView is the engine's PeerFactory: the mirror's Peer (PeerFactory) as a PeerView.
func (m *Mirror) peerView(name string, cfg MirrorConfig) (reconcile.PeerView, error) {
	p, err := m.opts.peers(name, cfg)
	if err != nil || p == nil {
		return nil, err
	}
	return peerView{p}, nil
}

// peerView is a Peer seen by the LME lookup of the engine.
type peerView struct{ peer Peer }

// Close closes the Peer, unless it is an in-process *Mirror (its owner closes it).
func (p peerView) Close() error {
	switch c := p.peer.(type) {
	case *Mirror:
	case io.Closer:
		return c.Close()
	case interface{ Close() }:
		c.Close()
	}
	return nil
}

// MirrorsFrom implements reconcile.PeerView.
func (p peerView) MirrorsFrom(ctx context.Context, clusterID string) ([]string, error) {
	ls, err := p.peer.ListClusterMirrors(ctx, ListFilter{SourceClusterIDs: []string{clusterID}})
	names := make([]string, 0, len(ls))
	for _, l := range ls {
		names = append(names, l.Name)
	}
	return names, err
}

// PartitionStates implements reconcile.PeerView.
func (p peerView) PartitionStates(ctx context.Context, names []string, topic string, partition int32, clusterID string) ([]reconcile.PeerPartition, error) {
	ds, err := p.peer.DescribeClusterMirrors(ctx, names, DescribeOptions{
		TopicPartitions: map[string][]int32{topic: {partition}}, IncludeStates: true, ClusterID: clusterID})
	var out []reconcile.PeerPartition
	for _, d := range ds {
		for _, t := range d.Topics {
			for _, pd := range t.Partitions {
				if t.Topic == topic && pd.Partition == partition {
					out = append(out, reconcile.PeerPartition{Mirror: d.Name, State: pd.State, LastMirrorEpoch: pd.LastMirrorEpoch})
				}
			}
		}
	}
	return out, err
}

// conditionObserver is metrics as the sync's metasync.ConditionObserver, when it is one.
func conditionObserver(metrics Metrics) metasync.ConditionObserver {
	o, _ := metrics.(metasync.ConditionObserver)
	return o
}
