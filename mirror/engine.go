package mirror

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/reconcile"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/statemachine"
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
		Peers: m.lmePeer,
		NewSyncer: func(name string, sa metasync.SourceAdmin) (*metasync.Syncer, error) {
			return NewSyncer(SyncConfig{Mirror: name, Controller: m.ctrl, Source: sa,
				Destination: m.dest, Logger: m.log, Interval: time.Hour})
		},
		Metrics: m.opts.ops.metrics,
		Events:  events,
		Logger:  m.log,
		Clock:   m.opts.clock,
		Config: reconcile.Config{FetchersPerMirror: m.cfg.FetchersPerMirror, SyncInterval: m.cfg.SyncInterval,
			FetchIdleWait: m.cfg.FetchIdleWait, Retry: reconcile.RetryConfig(m.opts.retry),
			UnreachableAfter: m.opts.ops.unreachableAfter},
	}
}

// lmePeer is the engine's PeerFactory: the mirror's Peer (PeerFactory) as an LMEPeer.
func (m *Mirror) lmePeer(name string, cfg MirrorConfig) (reconcile.LMEPeer, error) {
	p, err := m.opts.peers(name, cfg)
	if err != nil || p == nil {
		return nil, err
	}
	return peerLME{peer: p, local: m.dest.ClusterID()}, nil
}

// peerLME finds LMEs on the other cluster through its Peer: in the mirrors of that
// cluster that mirror from this one (local).
type peerLME struct {
	peer  Peer
	local string
}

// Close closes the Peer, unless it is an in-process *Mirror (its owner closes it).
func (p peerLME) Close() error {
	switch c := p.peer.(type) {
	case *Mirror:
	case io.Closer:
		return c.Close()
	case interface{ Close() }:
		c.Close()
	}
	return nil
}

// LastMirrorEpoch implements reconcile.LMEPeer: the highest LME stored for the
// partition by the other cluster's mirrors from this cluster, -1 when none; a mirror
// there that still mirrors the partition (not STOPPED) is a mirror loop.
func (p peerLME) LastMirrorEpoch(ctx context.Context, topic string, partition int32, bo backoff.BackOffContext) (int32, error) {
	ls, err := reconcile.RetryTransient(ctx, bo, func() ([]MirrorListing, error) {
		return p.peer.ListClusterMirrors(ctx, ListFilter{SourceClusterIDs: []string{p.local}})
	})
	if err != nil {
		return 0, fmt.Errorf("find LME: list the source cluster's mirrors: %w", err)
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.Name)
	}
	lme := epoch.UndefinedEpoch
	if len(names) == 0 {
		return lme, nil
	}
	ds, err := reconcile.RetryTransient(ctx, bo, func() ([]MirrorDescription, error) {
		return p.peer.DescribeClusterMirrors(ctx, names, DescribeOptions{
			TopicPartitions: map[string][]int32{topic: {partition}}, IncludeStates: true, ClusterID: p.local})
	})
	if err != nil {
		return 0, fmt.Errorf("find LME: describe the source cluster's mirrors: %w", err)
	}
	for _, d := range ds {
		for _, t := range d.Topics {
			for _, pd := range t.Partitions {
				if t.Topic != topic || pd.Partition != partition {
					continue
				}
				if pd.State != statemachine.Stopped && pd.State != statemachine.Unknown {
					return 0, fmt.Errorf("%w: mirror %q on the source cluster mirrors %s-%d from this cluster and is %s; stop it first",
						ErrMirrorLoop, d.Name, topic, partition, pd.State)
				}
				lme = max(lme, pd.LastMirrorEpoch)
			}
		}
	}
	return lme, nil
}
