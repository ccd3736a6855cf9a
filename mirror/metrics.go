package mirror

import (
	"time"

	"github.com/kmirror/kmirror/internal/reconcile"
)

// PartitionRef names one mirror partition in Metrics calls (the destination topic,
// which is the source topic's name): reconcile.PartitionRef, the engine's name for it.
type PartitionRef = reconcile.PartitionRef

// TruncationCause says why the fetcher truncated a mirror partition's log.
type TruncationCause = reconcile.TruncationCause

// Truncation causes.
const (
	// TruncationDivergence: the source answered a diverging epoch (or the
	// OffsetForLeaderEpoch probe found one), or its end fell below the destination's.
	TruncationDivergence = reconcile.TruncationDivergence
	// TruncationOutOfRange: the fetch offset was below the source log start; the
	// offsets in between were never mirrored (a gap).
	TruncationOutOfRange = reconcile.TruncationOutOfRange
	// TruncationStart: PREPARING removed records its start allowed to remove
	// (StartOptions.AllowTruncation); the count is of the records written on this site.
	TruncationStart = reconcile.TruncationStart
)

// EpochBumpCause says why the destination leader epoch of a partition was raised.
type EpochBumpCause = reconcile.EpochBumpCause

// Leader-epoch bump causes.
const (
	// EpochBumpAhead: kept ahead of the source's epochs (PREPARING, a mirrored batch
	// near the threshold, or the source leader epoch seen by the metadata sync).
	EpochBumpAhead = reconcile.EpochBumpAhead
	// EpochBumpState: the action of a state (EPOCH_FENCING, STOPPING).
	EpochBumpState = reconcile.EpochBumpState
)

// Metrics receives the measurements of a Mirror (WithMetrics): reconcile.Metrics, the
// contract the reconciler engine reports to (see there for each call). An adapter
// (mirror/kmprom for Prometheus) turns the calls into series. Calls come from
// reconciler, fetcher and connection goroutines, concurrently, and must not block for
// long. Embed NopMetrics to stay source-compatible when methods are added.
type Metrics = reconcile.Metrics

// NopMetrics ignores every measurement (reconcile.NopMetrics). Embed it in a partial
// Metrics.
type NopMetrics = reconcile.NopMetrics

// LagSeconds is the age at now of the oldest source record not yet mirrored, from the
// arguments of Metrics.Lag; ok is false when it is unknown (offsets < 0, or a lag with
// no batch mirrored yet).
func LagSeconds(offsets int64, mirroredUpTo, now time.Time) (seconds float64, ok bool) {
	switch {
	case offsets < 0:
		return 0, false
	case offsets == 0:
		return 0, true
	case mirroredUpTo.IsZero():
		return 0, false
	}
	return max(0, now.Sub(mirroredUpTo).Seconds()), true
}

// DefaultSourceUnreachableAfter is the default of WithSourceUnreachableAfter.
const DefaultSourceUnreachableAfter = 30 * time.Second

// opsOptions are the operability options of a Mirror (defaults: newOptions).
type opsOptions struct {
	metrics          Metrics       // never nil after New (NopMetrics)
	unreachableAfter time.Duration // see WithSourceUnreachableAfter
	unreachableSet   bool
}

// WithMetrics makes the Mirror report its measurements to mt (default: none). The
// admin handler of mirror/adminhandler reports its requests to it too.
func WithMetrics(mt Metrics) Option { return optionFunc(func(o *options) { o.ops.metrics = mt }) }

// WithSourceUnreachableAfter sets how long the source must have failed for a
// MIRRORING partition (no fetch response processed, every attempt failing) before
// DescribeClusterMirrors reports the cause in PartitionDescription.SourceErrorCode and
// SourceErrorMessage (default DefaultSourceUnreachableAfter; zero or negative reports
// it at the first failure). The partition's state does not change: the fetcher keeps
// retrying, as the KIP's state machine has no state for an unreachable source.
func WithSourceUnreachableAfter(d time.Duration) Option {
	return optionFunc(func(o *options) { o.ops.unreachableAfter, o.ops.unreachableSet = d, true })
}
