package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/reconcile"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// DefaultFetchersPerMirror is the default of Config.FetchersPerMirror.
const DefaultFetchersPerMirror = 8

// Errors of the facade.
var (
	// ErrInvalidConfig is wrapped by Config.Validate errors.
	ErrInvalidConfig = errors.New("mirror: invalid config")
	// ErrClosed is returned by a Mirror after Close (reconcile.ErrClosed: the engine
	// returns it too).
	ErrClosed = reconcile.ErrClosed
)

// Config configures a Mirror (one destination cluster, or one host instance of it).
// Zero fields take the documented defaults; New validates it.
type Config struct {
	// Destination is the local (destination) cluster: its topics and partition logs.
	// Required. The Mirror does not close it.
	Destination Destination
	// ControllerLog stores mirror definitions and desired topic states. Default, for a
	// file destination (one with a Root: OpenFileDestination): a FileControllerLog in
	// <root>/__mirror_controller, durable, which the Mirror closes; for a memory
	// destination a new MemoryControllerLog (lost on restart). A log the host passes
	// (KafkaControllerLog, MemoryControllerLog) is not closed by the Mirror.
	ControllerLog ControllerLog
	// Store persists the actual partition states (__mirror_state). Default, for a file
	// destination: a coordinator.FileStore in <root>/__mirror_state, durable, which the
	// Mirror closes; for a memory destination a new coordinator.MemoryStore. A store
	// the host passes (KafkaStore, MemoryStore) is not closed by the Mirror.
	Store coordinator.Store
	// Coordinator configures the coordinator runtime (partition count, linger, ...).
	Coordinator coordinator.Config
	// ManualCoordinatorOwnership, when set, keeps New from loading the __mirror_state
	// partitions: a multi-instance host grants and revokes them itself with
	// Coordinator().Load(p, epoch) / Unload(p, epoch) as it gains and loses ownership.
	// By default (single process) New loads every partition with owner epoch 1.
	ManualCoordinatorOwnership bool
	// SyncInterval is the period of the metadata sync of every mirror (spec §17).
	// Zero means DefaultSyncInterval; a negative value turns the periodic sync off
	// (Sync still runs one cycle on demand).
	SyncInterval time.Duration
	// FetchersPerMirror is the number of fetch loops each mirror spreads its partitions
	// over (like Kafka's mirror.num.replica.fetchers); default DefaultFetchersPerMirror.
	FetchersPerMirror int
	// FetchIdleWait is passed to every fetcher as fetcher.Config.IdleWait (how long a
	// fetch loop pauses after a response without data); zero = the fetcher default.
	FetchIdleWait time.Duration
	// ActiveReconcilers is how many mirror partitions run a turn of their state machine
	// at once (a start, a state change, a stop); the others wait in a queue holding no
	// goroutine, as an idle partition does. Zero means DefaultActiveReconcilers. Fewer
	// lower the memory of a mass event (each running turn is a goroutine, about 8 KiB of
	// stack), more shorten it: the stop's durable writes are group-committed, and each
	// round takes what is running.
	ActiveReconcilers int
}

// DefaultActiveReconcilers is the default of Config.ActiveReconcilers.
const DefaultActiveReconcilers = reconcile.DefaultMaxActive

// withDefaults returns c with its zero fields set to their defaults (the coordinator's
// through coordinator.Config.WithDefaults); Validate checks c as given and never
// changes it. The default stores are opened by New (defaults.go), not here.
func (c Config) withDefaults() Config {
	if c.FetchersPerMirror == 0 {
		c.FetchersPerMirror = DefaultFetchersPerMirror
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	c.Coordinator = c.Coordinator.WithDefaults()
	return c
}

// Validate checks the configuration, wrapping ErrInvalidConfig. It does not change c;
// zero fields stand for their defaults.
func (c Config) Validate() error {
	if c.Destination == nil {
		return fmt.Errorf("%w: Destination is required", ErrInvalidConfig)
	}
	if c.FetchersPerMirror < 0 {
		return fmt.Errorf("%w: negative FetchersPerMirror %d", ErrInvalidConfig, c.FetchersPerMirror)
	}
	if c.FetchIdleWait < 0 {
		return fmt.Errorf("%w: negative FetchIdleWait %v", ErrInvalidConfig, c.FetchIdleWait)
	}
	if c.ActiveReconcilers < 0 {
		return fmt.Errorf("%w: negative ActiveReconcilers %d", ErrInvalidConfig, c.ActiveReconcilers)
	}
	if err := c.Coordinator.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// SourceFactory builds, for mirror name with configuration cfg, the fetch Source and the
// SourceAdmin of its source cluster. The Mirror closes both (when they implement
// io.Closer / Close) when the mirror is deleted or the Mirror closed. The default builds
// a fetcher.KafkaSource and a metasync.KafkaSourceAdmin from cfg.
type SourceFactory func(name string, cfg MirrorConfig) (fetcher.Source, SourceAdmin, error)

// SourceAdmin is metasync.SourceAdmin: the admin view of a source cluster that a
// SourceFactory returns (the metadata sync's reads).
type SourceAdmin = metasync.SourceAdmin

// DefaultSyncInterval is the default period of a mirror's metadata sync.
const DefaultSyncInterval = metasync.DefaultSyncInterval

// PeerFactory builds the Peer of mirror name: the admin view of its source cluster used
// by PREPARING to find the last mirrored epoch (spec §6.3). The default talks to
// cfg.BootstrapServers with the KIP's admin RPCs (NewKafkaPeer); returning (nil, nil)
// means "no peer": every LME lookup answers -1 (mirror from scratch).
type PeerFactory func(name string, cfg MirrorConfig) (Peer, error)

// Peer is what PREPARING needs from the other cluster (spec §6.3 steps 2-5). *Mirror
// implements it (in-process sites); NewAdminPeer implements it over the wire.
type Peer interface {
	// ListClusterMirrors lists the peer's mirrors (filter as in Mirror.ListClusterMirrors).
	ListClusterMirrors(ctx context.Context, f ListFilter) ([]MirrorListing, error)
	// DescribeClusterMirrors describes the peer's mirrors (as Mirror.DescribeClusterMirrors).
	DescribeClusterMirrors(ctx context.Context, names []string, o DescribeOptions) ([]MirrorDescription, error)
}

// RetryConfig is the automatic retry of FAILED partitions (a later KIP revision, spec
// §5.6; the prototype's mirror.failed.retry.* broker configs). A FAILED partition whose
// desired state is MIRRORING and whose failure is retryable restarts from PREPARING
// after a backoff that starts at Initial and doubles up to Max, at most MaxAttempts
// times; then only RecoverMirrorTopics (or stop, then start) brings it back. MaxAttempts
// 0 turns the automatic retry off. The backoff is shared by the partitions of a mirror
// (see retryGate): a source that is down sees one round of retries per backoff, spread
// by jitter, not one per partition. On by default with DefaultRetryConfig.
type RetryConfig struct {
	Initial     time.Duration
	Max         time.Duration
	MaxAttempts int
}

// The prototype's defaults of the FAILED retry (mirror.failed.retry.initial.backoff.ms,
// mirror.failed.retry.max.backoff.ms, mirror.failed.retry.max.attempts).
const (
	DefaultRetryInitialBackoff = 1000 * time.Millisecond
	DefaultRetryMaxBackoff     = 300000 * time.Millisecond
	DefaultRetryMaxAttempts    = 100
)

// DefaultRetryConfig returns the default FAILED retry: 1 s doubling to 5 min, 100
// attempts.
func DefaultRetryConfig() RetryConfig {
	return RetryConfig{Initial: DefaultRetryInitialBackoff, Max: DefaultRetryMaxBackoff, MaxAttempts: DefaultRetryMaxAttempts}
}

// Validate checks r: non-negative durations, Max not below Initial, MaxAttempts in
// 0..32767 (RetryAttempt is an int16 in the partition state).
func (r RetryConfig) Validate() error {
	if r.Initial < 0 || r.Max < 0 || (r.Max > 0 && r.Max < r.Initial) {
		return fmt.Errorf("%w: FAILED retry backoff Initial %v, Max %v", ErrInvalidConfig, r.Initial, r.Max)
	}
	if r.MaxAttempts < 0 || r.MaxAttempts > math.MaxInt16 {
		return fmt.Errorf("%w: FAILED retry MaxAttempts %d not in 0..%d", ErrInvalidConfig, r.MaxAttempts, math.MaxInt16)
	}
	return nil
}

// StateChange reports one durable actual-state change of a partition (see WithEvents).
type StateChange struct {
	Mirror    string
	Topic     string
	Partition int32
	From, To  statemachine.State
	// Reason is the failure reason when To is FAILED.
	Reason string
	// Cause is the typed failure when To is FAILED and one is known (errors.As it, e.g.
	// a *TruncationRefusedError with the plan PREPARING refused); nil otherwise.
	Cause error
}

// Option configures a Mirror (an option of New). Its values come from the With...
// functions of this package; the zero value of every setting is its default.
type Option interface {
	apply(*options)
}

// optionFunc is an Option that sets fields of options.
type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	logger   *slog.Logger
	sources  SourceFactory
	peers    PeerFactory
	conns    ConnectionFunc // connection.go
	clock    func() time.Time
	events   func(StateChange)
	removals func(Removal) // plan.go
	retry    RetryConfig
	retrySet bool
	ops      opsOptions // metrics and source-health options (metrics.go)
	groups   GroupGuard
}

// newOptions applies opts and fills in the defaults of what they leave unset (or set
// to nil): the one place the defaults of the options live. It checks the FAILED retry.
func newOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if !o.retrySet {
		o.retry = DefaultRetryConfig()
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	if o.sources == nil {
		o.sources = SourceFactoryFor(o.conns)
	}
	if o.peers == nil {
		o.peers = PeerFactoryFor(o.conns)
	}
	if o.ops.metrics == nil {
		o.ops.metrics = NopMetrics{}
	}
	if !o.ops.unreachableSet {
		o.ops.unreachableAfter = DefaultSourceUnreachableAfter
	}
	return o, o.retry.Validate()
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithSourceFactory replaces the default source factory (Kafka).
func WithSourceFactory(f SourceFactory) Option {
	return optionFunc(func(o *options) { o.sources = f })
}

// WithPeerFactory replaces the default peer factory (Kafka admin RPCs).
func WithPeerFactory(f PeerFactory) Option {
	return optionFunc(func(o *options) { o.peers = f })
}

// GroupGuard is metasync.GroupGuard: what holds the membership of the
// destination's consumer groups (dataplane.DataPlane).
type GroupGuard = metasync.GroupGuard

// WithGroupGuard makes the offset sync of every mirror ask g before it writes
// a group's offsets: a group with members on the destination (any state
// other than Empty and Dead) keeps the offsets its members committed, and
// the sync resumes once it empties.
func WithGroupGuard(g GroupGuard) Option { return optionFunc(func(o *options) { o.groups = g }) }

// WithClock sets the clock used for timestamps of control records (default time.Now).
func WithClock(now func() time.Time) Option { return optionFunc(func(o *options) { o.clock = now }) }

// WithEvents registers fn to be called after every durable actual-state change. It is
// called from partition goroutines and must not block for long.
func WithEvents(fn func(StateChange)) Option { return optionFunc(func(o *options) { o.events = fn }) }

// WithFailedRetry replaces DefaultRetryConfig, the automatic retry of FAILED
// partitions; RetryConfig{} (MaxAttempts 0) turns it off.
func WithFailedRetry(r RetryConfig) Option {
	return optionFunc(func(o *options) { o.retry, o.retrySet = r, true })
}

// StartOptions are the options of StartMirrorTopics (spec §11.5).
type StartOptions struct {
	// IncludePatterns are regexes added to mirror.topics.include; every source topic
	// matching them (and no exclude pattern) is started too.
	IncludePatterns []string
	// ExcludePatterns are regexes added to mirror.topics.exclude (exclude wins).
	ExcludePatterns []string
	// ValidateOnly (Kafka's validateOnly) runs every check of the start and computes
	// its plan (TopicResult.Plan: per partition the LME found, the truncation and the
	// records it removes) and changes nothing: no topic created, no state written, no
	// topic made read-only, no fetch.
	ValidateOnly bool
	// AllowTruncation lets the start remove records written on this site: a full
	// truncation of a log with records (no LME known) or an LME truncation below this
	// site's own writes. Without it such a topic is refused with a
	// *TruncationRefusedError carrying the plan, and nothing changes. An allowed
	// removal is logged, counted by Metrics.Truncation (cause "start") and reported to
	// WithRemovals.
	AllowTruncation bool
}

// StopOptions are the options of StopMirrorTopics (spec §11.6).
type StopOptions struct {
	// Patterns are regexes removed from mirror.topics.include and added to
	// mirror.topics.exclude; every topic of the mirror they match is stopped too.
	Patterns []string
	// Wait makes StopMirrorTopics return only when every partition of the stopped
	// topics is actually STOPPED (writable), or ctx is done.
	Wait bool
	// ValidateOnly runs the checks and computes the plan (TopicResult.Plan: per
	// partition the LME the stop persists and the open transactions it aborts) and
	// changes nothing.
	ValidateOnly bool
}

// LifecycleOptions are the options of PauseMirrorTopics and ResumeMirrorTopics.
type LifecycleOptions struct {
	// Wait makes the call return only when every partition of the topics has reached
	// the target state (PAUSED, or MIRRORING), or ctx is done.
	Wait bool
	// ValidateOnly runs the checks and computes the plan (TopicResult.Plan: per
	// partition the state now and after) and changes nothing.
	ValidateOnly bool
}

// RecoverOptions are the options of RecoverMirrorTopics.
type RecoverOptions struct {
	// ValidateOnly computes the plan (TopicResult.Plan: the FAILED partitions that
	// restart, and what their PREPARING truncates) and changes nothing.
	ValidateOnly bool
	// AllowTruncation lets the restarted partitions remove records written on this
	// site that their plan removes (a partition that failed before its PREPARING
	// truncated: a refused auto-discovered start, a restart in PREPARING without an
	// approval): the plan's ranges are recorded with the topic as approvals
	// (controller.Approval), and PREPARING removes no more. Without it such a topic
	// is refused with a *TruncationRefusedError carrying the plan, and nothing
	// changes.
	AllowTruncation bool
}

// ListFilter selects mirrors in ListClusterMirrors (spec §11.3). Empty lists do not
// filter.
type ListFilter struct {
	// SourceClusterIDs keeps mirrors whose source cluster id is one of these.
	SourceClusterIDs []string
	// MirrorNames keeps mirrors with these names.
	MirrorNames []string
	// DesiredStates restricts the reported topics to these desired states; every mirror
	// is still listed (possibly with no topic).
	DesiredStates []statemachine.Desired
	// IncludeTopicNames fills MirrorListing.TopicNames.
	IncludeTopicNames bool
}

// MirrorListing is one mirror in ListClusterMirrors.
type MirrorListing struct {
	Name            string
	SourceBootstrap string
	// SourceClusterID is "" until the source has been reached once.
	SourceClusterID string
	TopicCount      int
	TopicNames      []string // nil unless ListFilter.IncludeTopicNames
}

// DescribeOptions select what DescribeClusterMirrors reports (spec §11.4).
type DescribeOptions struct {
	// TopicPartitions restricts the description to these partitions per topic; a topic
	// with a nil or empty list means all its partitions. nil = every partition.
	TopicPartitions map[string][]int32
	// IncludeStates reads the actual states, LMEs and failure reasons from the
	// coordinator; otherwise partitions report State UNKNOWN and LME -1.
	IncludeStates bool
	// IncludeLags reports SourceOffset and DestinationOffset; otherwise both are -1.
	IncludeLags bool
	// ClusterID, when set, keeps only mirrors whose source cluster id equals it (the
	// requesting cluster's id, for the LME lookup of failback).
	ClusterID string
}

// MirrorDescription describes one mirror.
type MirrorDescription struct {
	Name            string
	SourceBootstrap string
	SourceClusterID string
	Topics          []TopicDescription
}

// TopicDescription describes one topic of a mirror.
type TopicDescription struct {
	Topic      string
	TopicID    records.UUID
	Desired    statemachine.Desired
	Partitions []PartitionDescription
}

// PartitionDescription describes one mirror partition (spec §15.1
// MirrorPartitionStateDescription).
type PartitionDescription struct {
	Partition int32
	// State is the actual state (UNKNOWN when states were not requested).
	State statemachine.State
	// LastMirrorEpoch is the LME stored at the last stop (-1 when none).
	LastMirrorEpoch int32
	// LastMirrorOffset is the log end offset stored with the LME (-1 when none).
	LastMirrorOffset int64
	// SourceOffset is the source high watermark of the fetcher's last response; in
	// PAUSING, PAUSED and FAILED the last one read (by the fetcher before it stopped, or
	// by the fidelity check). -1 when unknown or not requested. It was read at
	// SourceOffsetTime, and a lag is as of then.
	SourceOffset int64
	// SourceOffsetTime is when SourceOffset was read (zero when unknown).
	SourceOffsetTime time.Time
	// DestinationOffset is the destination log end offset, -1 when not requested.
	DestinationOffset int64
	// ErrorMessage is the failure reason of a FAILED partition.
	ErrorMessage string
	// ErrorCode is a per-partition error (e.g. the coordinator is loading), else CodeNone.
	ErrorCode admin.Code
	// TimeLag is the age of the oldest source record not yet mirrored, estimated as
	// now − the MaxTimestamp of the newest batch this instance mirrored: 0 when caught
	// up (Lag() == 0), -1 when unknown (lags not requested, source offsets unknown, or
	// no batch mirrored since the partition's fetcher started).
	TimeLag time.Duration
	// LastFetch is when the last fetch response of the partition was processed; zero
	// when none since this instance started (or lags not requested).
	LastFetch time.Time
	// SourceErrorCode and SourceErrorMessage are the cause of the source being
	// unreachable for this partition for longer than the threshold
	// (WithSourceUnreachableAfter): every fetch attempt since SourceUnreachableSince
	// failed, or none was answered (a frozen source). It stays set through FAILED
	// and its automatic retries until the source answers again; Lag and TimeLag are
	// then unknown (-1). CodeNone, "" and zero otherwise (and in STOPPING, STOPPED).
	SourceErrorCode        admin.Code
	SourceErrorMessage     string
	SourceUnreachableSince time.Time
	// RetryAttempt is the number of automatic retries of a FAILED partition since it
	// last mirrored, -1 (records.NonRetryable) when its failure is not retried.
	RetryAttempt int16
	// PreviousState is the state before FAILED (UNKNOWN when none or not requested).
	PreviousState statemachine.State
	// VerifiedOffset is how far the continuous fidelity check
	// (fidelity.check.interval.ms) has found the destination identical to the
	// source: every mirrored batch below it that the source still holds has the
	// source's batch header and CRC-32C. -1 before the first check. VerifiedTime is
	// when the check last reached the source for this partition (zero when never).
	// A mismatch fails the partition with a *fetcher.FidelityMismatchError naming
	// the offset and both CRCs.
	VerifiedOffset int64
	VerifiedTime   time.Time
}

// Failing reports whether the partition is FAILED or its source is unreachable (the
// partitions `mirrorctl --describe --failed` lists): a partition whose source is down
// counts as failing even while a retry has moved it to another state.
func (p PartitionDescription) Failing() bool {
	return p.State == statemachine.Failed || !p.SourceUnreachableSince.IsZero()
}

// Lag returns max(0, SourceOffset − DestinationOffset): the offsets not yet mirrored
// as of SourceOffsetTime (a burst produced since is not counted). It is -1 when either
// offset is unknown or the source is unreachable (SourceUnreachableSince set), when
// the last known source offset would give a stale answer.
func (p PartitionDescription) Lag() int64 {
	if p.SourceOffset < 0 || p.DestinationOffset < 0 || !p.SourceUnreachableSince.IsZero() {
		return -1
	}
	return max(0, p.SourceOffset-p.DestinationOffset)
}
