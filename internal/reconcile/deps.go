// Package reconcile is the per-partition reconciler engine of a Mirror: one reconciler
// per mirror partition drives the partition's state machine (read the actual state from
// the coordinator, pick the next state, write it fenced, run its actions) in turns that a
// bounded pool of workers runs when the partition is kicked (sched.go), one Runtime
// per mirror holds its source, fetchers, LME peer and metadata-sync cycle, and the
// coordinator reads and writes of a mirror's partitions are group-committed.
//
// The engine knows nothing of the facade: package mirror hands it an explicit Deps
// (coordinator, destination, a read-only controller view, the source and peer
// factories, metrics, logger, clock, configuration) and re-exports the few public names
// that live here (ErrStorage, StorageError, ErrMirrorLoop, ...).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// ErrClosed is returned after Engine.Close (and after a mirror's Runtime was dropped).
// Package mirror re-exports it as mirror.ErrClosed.
var ErrClosed = errors.New("mirror: closed")

// ErrInvalidDeps is returned by New for a Deps without a required field.
var ErrInvalidDeps = errors.New("reconcile: invalid dependencies")

// Deps is everything the engine uses from its host (the Mirror facade), named one by
// one. New validates it.
type Deps struct {
	// Coordinator is the fenced store of the actual partition states (required).
	Coordinator Coordinator
	// Destination is the local cluster: topics, partition logs, read-only flags (required).
	Destination dest.Destination
	// Controller is the read-only view of the desired states and mirror definitions
	// (required).
	Controller ControllerView
	// Sources builds a mirror's fetch Source and SourceAdmin (required).
	Sources SourceFactory
	// Peers builds a mirror's view of the other cluster for the LME lookup (required).
	Peers PeerFactory
	// NewSyncer builds the metadata sync of a mirror over its SourceAdmin (required).
	NewSyncer func(mirror string, sa metasync.SourceAdmin) (*metasync.Syncer, error)
	// SourceClusterID, when set, is called with a mirror's source cluster id each time
	// the engine resolves one that differs from the mirror's recorded
	// (controller.KeySourceClusterID), to record it; its error is logged.
	SourceClusterID func(ctx context.Context, mirror, id string) error
	// Metrics receives the measurements; nil = none.
	Metrics Metrics
	// Events is called after every durable actual-state change; nil = none.
	Events func(StateChange)
	// Removals is called after PREPARING removed records a start allowed to remove
	// (StartOptions.AllowTruncation); nil = none.
	Removals func(Removal)
	// ClearApproval clears the durable approval (controller.TopicState.Approvals) of one
	// partition once its PREPARING used it (controller.Controller.ClearApproval);
	// nil = the approvals are never cleared (tests).
	ClearApproval func(ctx context.Context, mirror, topic string, partition int32) error
	// Logger; nil = discard.
	Logger *slog.Logger
	// Clock stamps control records and health; nil = time.Now.
	Clock func() time.Time
	// Config tunes the engine.
	Config Config
}

// Config is the engine's part of the Mirror configuration (defaults filled by the host).
type Config struct {
	// FetchersPerMirror is the number of fetch loops of each mirror (at least 1).
	FetchersPerMirror int
	// SyncInterval is the period of each mirror's metadata sync; <= 0 = off.
	SyncInterval time.Duration
	// FetchIdleWait is fetcher.Config.IdleWait.
	FetchIdleWait time.Duration
	// Retry is the automatic retry of FAILED partitions.
	Retry RetryConfig
	// UnreachableAfter is how long the source must fail before Health reports it.
	UnreachableAfter time.Duration
	// MaxActive is how many reconcilers run a turn at once (DefaultMaxActive when not
	// positive); the others wait in a queue, holding no goroutine.
	MaxActive int
}

// RetryConfig is the automatic retry of FAILED partitions (mirror.RetryConfig has the
// same fields and converts to it).
type RetryConfig struct {
	Initial     time.Duration
	Max         time.Duration
	MaxAttempts int
}

// DefaultRetryInitialBackoff is used when RetryConfig.Initial is not positive.
const DefaultRetryInitialBackoff = 1000 * time.Millisecond

// Coordinator is what the engine uses of coordinator.Runtime.
type Coordinator interface {
	ReadMirrorStates(ctx context.Context, req coordinator.ReadRequest) (coordinator.ReadResponse, error)
	WriteMirrorStates(ctx context.Context, req coordinator.WriteRequest) (coordinator.WriteResponse, error)
	// PartitionFor is the __mirror_state partition of a mirror partition.
	PartitionFor(mirror string, topicID records.UUID, partition int32) int32
	// WaitLoaded waits for a __mirror_state partition to be loaded.
	WaitLoaded(ctx context.Context, p int32) error
}

// ControllerView is the read-only part of *controller.Controller the engine uses.
type ControllerView interface {
	Mirror(name string) (controller.MirrorInfo, bool)
	Topic(topic string) (controller.TopicState, bool)
	Topics(mirror string) []controller.TopicState
}

var _ ControllerView = (*controller.Controller)(nil)

// SourceFactory builds the fetch Source and SourceAdmin of mirror name (the facade's
// mirror.SourceFactory converts to it).
type SourceFactory func(name string, cfg controller.MirrorConfig) (fetcher.Source, metasync.SourceAdmin, error)

// PeerView is the admin view of the other cluster that the LME lookup of PREPARING
// uses (spec §6.3 steps 2-5). The engine closes it (io.Closer or Close()) when the
// mirror is dropped.
type PeerView interface {
	// MirrorsFrom lists the names of the other cluster's mirrors whose source cluster
	// is clusterID.
	MirrorsFrom(ctx context.Context, clusterID string) ([]string, error)
	// PartitionStates describes one partition in each of the named mirrors, as seen by
	// the requesting cluster clusterID.
	PartitionStates(ctx context.Context, names []string, topic string, partition int32, clusterID string) ([]PeerPartition, error)
}

// PeerPartition is the state and LME of one partition in one mirror of the other
// cluster.
type PeerPartition struct {
	Mirror          string
	State           statemachine.State
	LastMirrorEpoch int32
}

// PeerFactory builds the PeerView of mirror name; (nil, nil) means no peer: every LME
// is -1 (mirror from scratch).
type PeerFactory func(name string, cfg controller.MirrorConfig) (PeerView, error)

// StateChange reports one durable actual-state change of a partition (the facade's
// mirror.StateChange has the same fields).
type StateChange struct {
	Mirror    string
	Topic     string
	Partition int32
	From, To  statemachine.State
	// Reason is the failure reason when To is FAILED.
	Reason string
	// Cause is the typed failure when To is FAILED and one is known (errors.As it, e.g.
	// a *TruncationRefusedError with the refused plan); nil otherwise.
	Cause error
}

// validate checks the required fields and fills the defaults.
func (d *Deps) validate() error {
	switch {
	case d.Coordinator == nil, d.Destination == nil, d.Controller == nil, d.Sources == nil, d.Peers == nil, d.NewSyncer == nil:
		return fmt.Errorf("%w: Coordinator, Destination, Controller, Sources, Peers and NewSyncer are required", ErrInvalidDeps)
	case d.Config.FetchersPerMirror < 1:
		return fmt.Errorf("%w: FetchersPerMirror %d", ErrInvalidDeps, d.Config.FetchersPerMirror)
	}
	if d.ClearApproval == nil {
		d.ClearApproval = func(context.Context, string, string, int32) error { return nil }
	}
	if d.Metrics == nil {
		d.Metrics = NopMetrics{}
	}
	if d.Events == nil {
		d.Events = func(StateChange) {}
	}
	if d.Removals == nil {
		d.Removals = func(Removal) {}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	return nil
}

// Health is the lag and source health of a partition, for describe (see
// Partition.Health).
type Health struct {
	TimeLag                time.Duration
	LastFetch              time.Time
	SourceErrorCode        admin.Code
	SourceErrorMessage     string
	SourceUnreachableSince time.Time
}

// Removal reports records PREPARING removed from a partition's log because its start
// allowed it: Removed is the offset range and its data records, LocalWrites the part
// written on this site since its last stop (lost unless another copy exists).
type Removal struct {
	Ref         PartitionRef
	Removed     controller.OffsetRange
	LocalWrites controller.OffsetRange
}
