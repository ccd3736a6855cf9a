package reconcile

import (
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// PartitionRef names one mirror partition in Metrics calls (the destination topic,
// which is the source topic's name). Package mirror re-exports it.
type PartitionRef struct {
	Mirror    string
	Topic     string
	Partition int32
}

// TruncationCause says why the fetcher truncated a mirror partition's log.
type TruncationCause string

// Truncation causes.
const (
	// TruncationDivergence: the source answered a diverging epoch (or the
	// OffsetForLeaderEpoch probe found one), or its end fell below the destination's.
	TruncationDivergence TruncationCause = "divergence"
	// TruncationOutOfRange: the fetch offset was below the source log start; the
	// offsets in between were never mirrored (a gap).
	TruncationOutOfRange TruncationCause = "out_of_range"
	// TruncationStart: PREPARING removed records a start allowed to remove
	// (StartOptions.AllowTruncation); offsetsLost counts the records written on this
	// site among them.
	TruncationStart TruncationCause = "start"
)

// EpochBumpCause says why the destination leader epoch of a partition was raised.
type EpochBumpCause string

// Leader-epoch bump causes.
const (
	// EpochBumpAhead: kept ahead of the source's epochs (PREPARING, a mirrored batch
	// near the threshold, or the source leader epoch seen by the metadata sync).
	EpochBumpAhead EpochBumpCause = "ahead"
	// EpochBumpState: the action of a state (EPOCH_FENCING, STOPPING).
	EpochBumpState EpochBumpCause = "state"
)

// Metrics receives the measurements of a Mirror (mirror.WithMetrics; mirror.Metrics is
// this type). The core has no metrics dependency: an adapter (mirror/kmprom for
// Prometheus) turns the calls into series. Calls come from reconciler, fetcher and
// connection goroutines, concurrently, and must not block for long. Embed NopMetrics to
// stay source-compatible when methods are added.
type Metrics interface {
	// PartitionState reports the actual state of a partition owned by this instance,
	// after every change (and once when its owner starts).
	PartitionState(p PartitionRef, s statemachine.State)
	// PartitionGone reports that this instance no longer owns the partition (its
	// reconciler stopped: topic stopped and dissociated, mirror deleted, Close): drop
	// its per-partition series.
	PartitionGone(p PartitionRef)
	// StateTransition reports one durable actual-state change.
	StateTransition(p PartitionRef, from, to statemachine.State)
	// Lag reports the partition's lag after every processed fetch response: offsets is
	// source high watermark − destination log end, mirroredUpTo the largest batch
	// MaxTimestamp this owner mirrored (zero before the first batch). The age of the
	// oldest source record not yet mirrored is 0 when offsets is 0 and now −
	// mirroredUpTo otherwise: an adapter computes it when read, so that it grows while
	// the mirror stalls (mirror.LagSeconds). offsets < 0 means unknown: the partition left the
	// fetcher.
	Lag(p PartitionRef, offsets int64, mirroredUpTo time.Time)
	// Mirrored reports the record-batch bytes and records one fetch response appended.
	Mirrored(p PartitionRef, bytes, records int64)
	// Fetch reports one Fetch round trip of mirror to source broker: its latency, the
	// failure of the whole request (nil when answered) and the partition error codes
	// of the answer.
	Fetch(mirror string, broker int32, latency time.Duration, err error, errorCodes []int16)
	// Truncation reports a truncation of the destination log by the fetcher;
	// offsetsLost is the number of source offsets that will never be mirrored (the
	// gap of an out-of-range truncation; 0 for a divergence).
	Truncation(p PartitionRef, cause TruncationCause, offsetsLost int64)
	// TruncationRefused reports that PREPARING refused to remove records written on
	// this site that no start approved (a restart, an auto-discovered start, a changed
	// plan; see TruncationRefusedError): the partition goes FAILED and keeps them.
	// localRecords is how many of this site's records it kept.
	TruncationRefused(p PartitionRef, localRecords int64)
	// LeaderEpochBump reports that the destination leader epoch went from one value to
	// a higher one.
	LeaderEpochBump(p PartitionRef, cause EpochBumpCause, from, to int32)
	// StoppingDuration reports how long a partition took from entering STOPPING to
	// STOPPED (failover), as seen by the owner that ran the whole stop.
	StoppingDuration(p PartitionRef, d time.Duration)
	// CoordinatorWrite reports one WriteMirrorStates call of a mirror's group commit:
	// how many partitions it carried, its latency and its failure (nil on success;
	// per-partition codes such as fencing are not failures of the call).
	CoordinatorWrite(mirror string, partitions int, latency time.Duration, err error)
	// AdminRequest reports one mirror RPC served by adminhandler.New.
	AdminRequest(o admin.RequestObservation)
	// FidelityVerified reports a fidelity check of a partition that reached the
	// source: every mirrored batch below upTo that the source still holds is
	// byte-identical to the source's (batch headers and CRC-32C compared).
	FidelityVerified(p PartitionRef, upTo int64)
	// FidelityMismatch reports a mirrored batch at offset that differs from the
	// source's; the partition goes FAILED with the mismatch as its cause.
	FidelityMismatch(p PartitionRef, offset int64)
	// LogRecoveryDiscard reports data the open of a destination log removed,
	// of any partition, mirrored or not (a Mirror over a destination that
	// tells, localdest.LocalDestination.OnDiscard): bytes from fromOffset on,
	// up to toOffset (exclusive; -1 when unknown, a torn tail), either a torn
	// tail past the log's flush point (repaired false) or a
	// FileLogOptions.RepairCorruption cut (repaired true).
	LogRecoveryDiscard(topic string, partition int32, fromOffset, toOffset, bytes int64, repaired bool)
}

// NopMetrics ignores every measurement. Embed it in a partial Metrics.
type NopMetrics struct{}

var _ Metrics = NopMetrics{}

// PartitionState implements Metrics.
func (NopMetrics) PartitionState(PartitionRef, statemachine.State) {}

// PartitionGone implements Metrics.
func (NopMetrics) PartitionGone(PartitionRef) {}

// StateTransition implements Metrics.
func (NopMetrics) StateTransition(PartitionRef, statemachine.State, statemachine.State) {}

// Lag implements Metrics.
func (NopMetrics) Lag(PartitionRef, int64, time.Time) {}

// Mirrored implements Metrics.
func (NopMetrics) Mirrored(PartitionRef, int64, int64) {}

// Fetch implements Metrics.
func (NopMetrics) Fetch(string, int32, time.Duration, error, []int16) {}

// Truncation implements Metrics.
func (NopMetrics) Truncation(PartitionRef, TruncationCause, int64) {}

// LeaderEpochBump implements Metrics.
func (NopMetrics) LeaderEpochBump(PartitionRef, EpochBumpCause, int32, int32) {}

// StoppingDuration implements Metrics.
func (NopMetrics) StoppingDuration(PartitionRef, time.Duration) {}

// CoordinatorWrite implements Metrics.
func (NopMetrics) CoordinatorWrite(string, int, time.Duration, error) {}

// AdminRequest implements Metrics.
func (NopMetrics) AdminRequest(admin.RequestObservation) {}

// FidelityVerified implements Metrics.
func (NopMetrics) FidelityVerified(PartitionRef, int64) {}

// FidelityMismatch implements Metrics.
func (NopMetrics) FidelityMismatch(PartitionRef, int64) {}

// LogRecoveryDiscard implements Metrics.
func (NopMetrics) LogRecoveryDiscard(string, int32, int64, int64, int64, bool) {}

// TruncationRefused implements Metrics.
func (NopMetrics) TruncationRefused(PartitionRef, int64) {}
