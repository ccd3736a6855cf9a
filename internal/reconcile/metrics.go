package reconcile

import (
	"time"

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

// Metrics is the part of mirror.Metrics the engine reports to (see there for the
// meaning of each call); every mirror.Metrics is one.
type Metrics interface {
	PartitionState(p PartitionRef, s statemachine.State)
	PartitionGone(p PartitionRef)
	StateTransition(p PartitionRef, from, to statemachine.State)
	Lag(p PartitionRef, offsets int64, mirroredUpTo time.Time)
	Mirrored(p PartitionRef, bytes, records int64)
	Fetch(mirror string, broker int32, latency time.Duration, err error, errorCodes []int16)
	Truncation(p PartitionRef, cause TruncationCause, offsetsLost int64)
	LeaderEpochBump(p PartitionRef, cause EpochBumpCause, from, to int32)
	StoppingDuration(p PartitionRef, d time.Duration)
	CoordinatorWrite(mirror string, partitions int, latency time.Duration, err error)
}

// nopMetrics is the Metrics of a Deps without one.
type nopMetrics struct{}

func (nopMetrics) PartitionState(PartitionRef, statemachine.State)                      {}
func (nopMetrics) PartitionGone(PartitionRef)                                           {}
func (nopMetrics) StateTransition(PartitionRef, statemachine.State, statemachine.State) {}
func (nopMetrics) Lag(PartitionRef, int64, time.Time)                                   {}
func (nopMetrics) Mirrored(PartitionRef, int64, int64)                                  {}
func (nopMetrics) Fetch(string, int32, time.Duration, error, []int16)                   {}
func (nopMetrics) Truncation(PartitionRef, TruncationCause, int64)                      {}
func (nopMetrics) LeaderEpochBump(PartitionRef, EpochBumpCause, int32, int32)           {}
func (nopMetrics) StoppingDuration(PartitionRef, time.Duration)                         {}
func (nopMetrics) CoordinatorWrite(string, int, time.Duration, error)                   {}
