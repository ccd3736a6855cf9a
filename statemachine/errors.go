package statemachine

import (
	"errors"
	"fmt"
)

// Sentinel errors. Typed errors below wrap them; test with errors.Is.
var (
	// ErrUnknownState is returned by ParseState and ParseDesired for a name
	// that is not a state.
	ErrUnknownState = errors.New("statemachine: unknown state")
	// ErrInvalidTransition is wrapped by every *TransitionError.
	ErrInvalidTransition = errors.New("statemachine: invalid transition")
	// ErrInvalidEvent is returned by Transition for an event whose fields are
	// inconsistent (for example EpochExceeded with BatchEpoch <= LocalEpoch).
	ErrInvalidEvent = errors.New("statemachine: invalid event")
	// ErrInvalidStates is wrapped by every *InvalidStatesError; the admin
	// layer maps it to INVALID_CLUSTER_MIRROR_STATES (code 10145).
	ErrInvalidStates = errors.New("statemachine: invalid cluster mirror states")
)

// TransitionError reports an event that is not legal in a state.
type TransitionError struct {
	From  State
	Event EventType
}

// Error implements error.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("statemachine: invalid transition: event %s in state %s", e.Event, e.From)
}

// Is makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// InvalidStatesError reports an admin operation that a partition's actual
// state does not allow.
type InvalidStatesError struct {
	Op        Op
	Topic     string
	Partition int32
	State     State
}

// Error implements error, e.g.
// `statemachine: cannot pause topic "orders" partition 3 in state PAUSED`. It does not
// name the wire code: the admin layer carries the code (INVALID_CLUSTER_MIRROR_STATES)
// next to Reason as the message, and clients print the code once.
func (e *InvalidStatesError) Error() string { return "statemachine: " + e.Reason() }

// Reason is the error text without the package prefix, e.g.
// `cannot pause topic "orders" partition 3 in state PAUSED`.
func (e *InvalidStatesError) Reason() string {
	return fmt.Sprintf("cannot %s topic %q partition %d in state %s", e.Op, e.Topic, e.Partition, e.State)
}

// Is makes errors.Is(err, ErrInvalidStates) true.
func (e *InvalidStatesError) Is(target error) bool { return target == ErrInvalidStates }
