package statemachine

import (
	"fmt"
	"strings"
)

// State is the actual state of one mirror partition, stored as an int8 in
// __mirror_state records and on the wire. The codes follow the newer
// prototype numbering (PREPARING 0 ... FAILED 8, UNKNOWN -1).
type State int8

// The partition states. The numeric values are kept in the one table
// [stateTable]; change them there only.
const (
	// Unknown means no state is known (no record, or not loaded yet).
	Unknown State = -1
	// Preparing aligns the local log with the source before fetching: find
	// the LME on the other cluster, truncate after it, wait for replicas.
	// The thread calls it LOG_TRUNCATION; the later revision LOG_ALIGNMENT.
	Preparing State = 0
	// EpochFencing suspends mirroring while the local leader epoch is bumped
	// above a fetched batch's epoch.
	EpochFencing State = 1
	// ULELogTruncation waits, after a divergence caused by an unclean leader
	// election on the source, until every replica has truncated.
	ULELogTruncation State = 2
	// Mirroring is the steady state: the fetcher runs.
	Mirroring State = 3
	// Pausing removes the fetcher on a pause request.
	Pausing State = 4
	// Paused is the steady paused state: no fetcher, still read-only.
	Paused State = 5
	// Stopping runs the failover/migration tasks (see [Transition]).
	Stopping State = 6
	// Stopped means the stop tasks are done and the partition is writable.
	Stopped State = 7
	// Failed records an error; leave it by stopping the topic.
	Failed State = 8
)

// Kind classifies a state.
type Kind int8

// The state kinds.
const (
	// KindInvalid is the kind of a code that names no state.
	KindInvalid Kind = iota
	// KindImplicit is UNKNOWN: never written by an API.
	KindImplicit
	// KindTransient states run a task and then move on by themselves.
	KindTransient
	// KindSteady states stay until the desired state changes.
	KindSteady
	// KindTerminal is STOPPED: final until the topic is started again.
	KindTerminal
	// KindError is FAILED.
	KindError
)

// String returns the kind's lower-case name.
func (k Kind) String() string {
	switch k {
	case KindImplicit:
		return "implicit"
	case KindTransient:
		return "transient"
	case KindSteady:
		return "steady"
	case KindTerminal:
		return "terminal"
	case KindError:
		return "error"
	}
	return fmt.Sprintf("Kind(%d)", int8(k))
}

// stateInfo is one row of the state table.
type stateInfo struct {
	state State
	name  string
	kind  Kind
}

// stateTable is the one table of states, names, codes and kinds, in code order.
var stateTable = [...]stateInfo{
	{Unknown, "UNKNOWN", KindImplicit},
	{Preparing, "PREPARING", KindTransient},
	{EpochFencing, "EPOCH_FENCING", KindTransient},
	{ULELogTruncation, "ULE_LOG_TRUNCATION", KindTransient},
	{Mirroring, "MIRRORING", KindSteady},
	{Pausing, "PAUSING", KindTransient},
	{Paused, "PAUSED", KindSteady},
	{Stopping, "STOPPING", KindTransient},
	{Stopped, "STOPPED", KindTerminal},
	{Failed, "FAILED", KindError},
}

// stateAliases are other names accepted by [ParseState]: LOG_TRUNCATION is the
// thread's name for PREPARING; LOG_ALIGNMENT and ULE_RECOVERY are the later
// revision's names.
var stateAliases = [...]stateInfo{
	{Preparing, "LOG_TRUNCATION", KindTransient},
	{Preparing, "LOG_ALIGNMENT", KindTransient},
	{ULELogTruncation, "ULE_RECOVERY", KindTransient},
}

func (s State) info() (stateInfo, bool) {
	i := int(s) + 1 // UNKNOWN (-1) is row 0
	if i < 0 || i >= len(stateTable) {
		return stateInfo{}, false
	}
	return stateTable[i], true
}

// States returns every valid state, UNKNOWN first, then in code order.
func States() []State {
	out := make([]State, len(stateTable))
	for i, r := range stateTable {
		out[i] = r.state
	}
	return out
}

// Valid reports whether s is one of the defined states (UNKNOWN included).
func (s State) Valid() bool {
	_, ok := s.info()
	return ok
}

// String returns the state's KIP name, e.g. "MIRRORING", or "State(42)" for
// an undefined code.
func (s State) String() string {
	if r, ok := s.info(); ok {
		return r.name
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// Kind returns the state's kind, or KindInvalid for an undefined code.
func (s State) Kind() Kind {
	r, _ := s.info()
	return r.kind
}

// ReadOnly reports whether a destination partition in state s must refuse
// local produce requests: true in every mirror state except STOPPED. UNKNOWN
// returns false (nothing is known; the caller keeps its current setting).
func (s State) ReadOnly() bool {
	return s.Valid() && s != Stopped && s != Unknown
}

// asciiUpper upper-cases ASCII letters only, so that no non-ASCII name (such
// as a dotless i) folds onto a state name.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

// ParseState parses a state name. It ignores ASCII case and surrounding spaces and
// accepts the aliases LOG_TRUNCATION and LOG_ALIGNMENT (PREPARING) and
// ULE_RECOVERY (ULE_LOG_TRUNCATION). An unknown name returns an error that
// wraps [ErrUnknownState].
func ParseState(s string) (State, error) {
	name := asciiUpper(strings.TrimSpace(s))
	for _, r := range stateTable {
		if r.name == name {
			return r.state, nil
		}
	}
	for _, r := range stateAliases {
		if r.name == name {
			return r.state, nil
		}
	}
	return Unknown, fmt.Errorf("%w: %q", ErrUnknownState, s)
}

// Desired is the desired state of a mirror topic, set by the operator and
// stored by the controller with the same codes as [State].
type Desired int8

// The desired states.
const (
	// DesiredUnknown means the topic is not associated with a mirror.
	DesiredUnknown Desired = Desired(Unknown)
	// DesiredMirroring: mirror the topic (start / resume).
	DesiredMirroring Desired = Desired(Mirroring)
	// DesiredPaused: keep the topic read-only but stop fetching.
	DesiredPaused Desired = Desired(Paused)
	// DesiredStopped: fail over / migrate; make the topic writable.
	DesiredStopped Desired = Desired(Stopped)
)

// Valid reports whether d is one of the four desired states.
func (d Desired) Valid() bool {
	switch d {
	case DesiredUnknown, DesiredMirroring, DesiredPaused, DesiredStopped:
		return true
	}
	return false
}

// State returns the partition state with the same code.
func (d Desired) State() State { return State(d) }

// String returns the desired state's name ("MIRRORING", "PAUSED", "STOPPED",
// "UNKNOWN"), or "Desired(n)" for an undefined code.
func (d Desired) String() string {
	if d.Valid() {
		return State(d).String()
	}
	return fmt.Sprintf("Desired(%d)", int8(d))
}

// ParseDesired parses a desired-state name (ASCII case-insensitive). Only
// MIRRORING, PAUSED, STOPPED and UNKNOWN are accepted; other names return an
// error that wraps [ErrUnknownState].
func ParseDesired(s string) (Desired, error) {
	st, err := ParseState(s)
	if err == nil && Desired(st).Valid() {
		return Desired(st), nil
	}
	return DesiredUnknown, fmt.Errorf("%w: %q is not a desired state", ErrUnknownState, s)
}
