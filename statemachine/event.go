package statemachine

import "fmt"

// EventType names the kind of an [Event]; it is the event half of the
// (from, event) key of the transition table.
type EventType int8

// The event types, one per concrete Event struct.
const (
	EventLeaderGained EventType = iota
	EventMirroringDesired
	EventPausedDesired
	EventStoppedDesired
	EventTruncationDone
	EventEpochExceeded
	EventEpochBumped
	EventDivergenceULE
	EventReplicasConverged
	EventFetcherRemoved
	EventStopTasksDone
	EventError
	EventRetry
	EventRetryMirroring
	numEventTypes
)

var eventNames = [numEventTypes]string{
	EventLeaderGained:      "LeaderGained",
	EventMirroringDesired:  "MirroringDesired",
	EventPausedDesired:     "PausedDesired",
	EventStoppedDesired:    "StoppedDesired",
	EventTruncationDone:    "TruncationDone",
	EventEpochExceeded:     "EpochExceeded",
	EventEpochBumped:       "EpochBumped",
	EventDivergenceULE:     "DivergenceULE",
	EventReplicasConverged: "ReplicasConverged",
	EventFetcherRemoved:    "FetcherRemoved",
	EventStopTasksDone:     "StopTasksDone",
	EventError:             "Error",
	EventRetry:             "Retry",
	EventRetryMirroring:    "RetryMirroring",
}

// EventTypes returns every event type in declaration order.
func EventTypes() []EventType {
	out := make([]EventType, numEventTypes)
	for i := range out {
		out[i] = EventType(i)
	}
	return out
}

// String returns the event type's name, e.g. "PausedDesired".
func (t EventType) String() string {
	if t >= 0 && t < numEventTypes {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", int8(t))
}

// Event is something that happened to a partition. The concrete types are
// the structs of this file; their fields give the actions their parameters.
type Event interface {
	// Type returns the event's type.
	Type() EventType
	// String describes the event with its fields.
	String() string
}

// LeaderGained: this replica became (or is confirmed as) the partition
// leader. It re-asserts the current state: the state is kept and its entry
// actions are returned again (spec §5.4 row 16). LatestLocalEpoch is the
// latest leader epoch in the local log (-1 if empty); it is the minimum for a
// re-run BumpLeaderEpoch.
//
// StopMode, used only when the state is STOPPING, says how the re-run closes
// the open transactions.
type LeaderGained struct {
	LatestLocalEpoch int32
	StopMode         StopMode
}

// MirroringDesired: the topic's desired state is MIRRORING (start, restart
// after stop / failback, or resume).
type MirroringDesired struct{}

// PausedDesired: the topic's desired state is PAUSED.
type PausedDesired struct{}

// StoppedDesired: the topic's desired state is STOPPED. LatestLocalEpoch is
// the latest leader epoch in the local log (-1 if empty); STOPPING bumps the
// leader epoch with it as the minimum. StopMode says how STOPPING closes the
// transactions left open in the local log.
type StoppedDesired struct {
	LatestLocalEpoch int32
	StopMode         StopMode
}

// StopMode says how STOPPING closes the transactions that are open in the
// local log when mirroring stops (their COMMIT or ABORT never arrived from the
// source).
type StopMode int8

const (
	// StopAbortOpenTxns, the default, keeps every mirrored record and appends
	// an ABORT marker for each open transaction after the leader-epoch bump
	// (spec §8.1, JR78): the LSO then equals the high watermark, committed
	// records written after an open transaction stay, and read_committed
	// consumers never see the aborted ones.
	StopAbortOpenTxns StopMode = iota
	// StopTruncateToLSO truncates the log to its last stable offset before the
	// LME is persisted, so the destination holds only completed transactions.
	// It discards every record at or after the first open transaction,
	// including committed records of other producers: an explicit choice.
	StopTruncateToLSO
)

// String returns "abort" or "truncate".
func (m StopMode) String() string {
	switch m {
	case StopAbortOpenTxns:
		return "abort"
	case StopTruncateToLSO:
		return "truncate"
	}
	return fmt.Sprintf("StopMode(%d)", int8(m))
}

// stopModeSuffix is ", mode=truncate" for a non-default mode, else "".
func stopModeSuffix(m StopMode) string {
	if m == StopAbortOpenTxns {
		return ""
	}
	return ", mode=" + m.String()
}

// TruncationDone: PREPARING finished: the log is truncated after the LME and
// the replicas have converged.
type TruncationDone struct{}

// EpochExceeded: a fetched batch carries a leader epoch (BatchEpoch) greater
// than the local leader epoch (LocalEpoch).
type EpochExceeded struct{ BatchEpoch, LocalEpoch int32 }

// EpochBumped: the local leader epoch bump is visible (NewEpoch).
type EpochBumped struct{ NewEpoch int32 }

// DivergenceULE: the source answered with a diverging epoch while
// mirror.support.unclean.leader.election=true; the local log must be
// truncated to TruncateOffset and every replica must converge there.
type DivergenceULE struct{ TruncateOffset int64 }

// ReplicasConverged: every replica is in the ISR at the truncation point
// (ends ULE_LOG_TRUNCATION).
type ReplicasConverged struct{}

// FetcherRemoved: the fetcher of a pausing partition is gone.
type FetcherRemoved struct{}

// StopTasksDone: every STOPPING action has completed.
type StopTasksDone struct{}

// Error: the partition failed; Reason is kept as its error message. Cause,
// when the caller has one, is the typed error behind Reason: it is not
// persisted (Reason is), and lets the caller decide on the failure by type
// (for example whether to retry it) instead of by text.
type Error struct {
	Reason string
	Cause  error
}

// Retry: restart a FAILED partition (later revision's automatic retry or
// `recover`); it restarts from PREPARING.
type Retry struct{}

// RetryMirroring: restart a FAILED partition whose previous state was MIRRORING
// (spec §5.4 row 15: the retry returns to the previous state). Fetching resumes
// at the local log end, without the LME truncation of PREPARING: what was
// mirrored stays, and the fetcher's epoch checks handle a divergence.
type RetryMirroring struct{}

// Type implements Event.
func (LeaderGained) Type() EventType { return EventLeaderGained }

// Type implements Event.
func (MirroringDesired) Type() EventType { return EventMirroringDesired }

// Type implements Event.
func (PausedDesired) Type() EventType { return EventPausedDesired }

// Type implements Event.
func (StoppedDesired) Type() EventType { return EventStoppedDesired }

// Type implements Event.
func (TruncationDone) Type() EventType { return EventTruncationDone }

// Type implements Event.
func (EpochExceeded) Type() EventType { return EventEpochExceeded }

// Type implements Event.
func (EpochBumped) Type() EventType { return EventEpochBumped }

// Type implements Event.
func (DivergenceULE) Type() EventType { return EventDivergenceULE }

// Type implements Event.
func (ReplicasConverged) Type() EventType { return EventReplicasConverged }

// Type implements Event.
func (FetcherRemoved) Type() EventType { return EventFetcherRemoved }

// Type implements Event.
func (StopTasksDone) Type() EventType { return EventStopTasksDone }

// Type implements Event.
func (Error) Type() EventType { return EventError }

// Type implements Event.
func (Retry) Type() EventType { return EventRetry }

// Type implements Event.
func (RetryMirroring) Type() EventType { return EventRetryMirroring }

// String implements Event.
func (e LeaderGained) String() string {
	return fmt.Sprintf("LeaderGained(latestLocalEpoch=%d%s)", e.LatestLocalEpoch, stopModeSuffix(e.StopMode))
}

// String implements Event.
func (MirroringDesired) String() string { return "MirroringDesired" }

// String implements Event.
func (PausedDesired) String() string { return "PausedDesired" }

// String implements Event.
func (e StoppedDesired) String() string {
	return fmt.Sprintf("StoppedDesired(latestLocalEpoch=%d%s)", e.LatestLocalEpoch, stopModeSuffix(e.StopMode))
}

// String implements Event.
func (TruncationDone) String() string { return "TruncationDone" }

// String implements Event.
func (e EpochExceeded) String() string {
	return fmt.Sprintf("EpochExceeded(batchEpoch=%d, localEpoch=%d)", e.BatchEpoch, e.LocalEpoch)
}

// String implements Event.
func (e EpochBumped) String() string { return fmt.Sprintf("EpochBumped(newEpoch=%d)", e.NewEpoch) }

// String implements Event.
func (e DivergenceULE) String() string {
	return fmt.Sprintf("DivergenceULE(truncateOffset=%d)", e.TruncateOffset)
}

// String implements Event.
func (ReplicasConverged) String() string { return "ReplicasConverged" }

// String implements Event.
func (FetcherRemoved) String() string { return "FetcherRemoved" }

// String implements Event.
func (StopTasksDone) String() string { return "StopTasksDone" }

// String implements Event.
func (e Error) String() string { return fmt.Sprintf("Error(%q)", e.Reason) }

// String implements Event.
func (Retry) String() string { return "Retry" }

func (RetryMirroring) String() string { return "RetryMirroring" }

// validateLocal checks the local-log fields shared by LeaderGained and
// StoppedDesired.
func validateLocal(e Event, latest int32, mode StopMode) error {
	if latest < -1 {
		return fmt.Errorf("%w: %s: epoch below -1", ErrInvalidEvent, e)
	}
	if mode != StopAbortOpenTxns && mode != StopTruncateToLSO {
		return fmt.Errorf("%w: %s: unknown stop mode", ErrInvalidEvent, e)
	}
	return nil
}

// validate checks the fields of an event.
func validate(e Event) error {
	switch e := e.(type) {
	case LeaderGained:
		return validateLocal(e, e.LatestLocalEpoch, e.StopMode)
	case StoppedDesired:
		return validateLocal(e, e.LatestLocalEpoch, e.StopMode)
	case EpochExceeded:
		if e.BatchEpoch <= e.LocalEpoch {
			return fmt.Errorf("%w: %s: batch epoch does not exceed the local epoch", ErrInvalidEvent, e)
		}
	case DivergenceULE:
		if e.TruncateOffset < 0 {
			return fmt.Errorf("%w: %s: negative offset", ErrInvalidEvent, e)
		}
	}
	return nil
}
