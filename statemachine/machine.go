package statemachine

import "fmt"

// moveRow is one row of the transition table: in any state of from (nil =
// every valid state), an event of type event moves the partition to to, or
// keeps it where it is when same is set.
type moveRow struct {
	event EventType
	from  []State
	to    State
	same  bool
}

// moveTable is the single table of legal (from, event) -> to moves (spec §5.4,
// rows 1-16). Every (state, event) pair not listed is illegal. ValidMove,
// Transition and Reconcile are all derived from it.
var moveTable = [...]moveRow{
	// Row 16: re-assert the current state (after a leader change).
	{event: EventLeaderGained, same: true},
	// Rows 1 and 2: start, restart after stop, failback.
	{event: EventMirroringDesired, from: []State{Unknown, Stopped}, to: Preparing},
	// Row 10: resume (no truncation).
	{event: EventMirroringDesired, from: []State{Paused}, to: Mirroring},
	// Row 8: pause is valid from MIRRORING only.
	{event: EventPausedDesired, from: []State{Mirroring}, to: Pausing},
	// Rows 11 and 12 (FAILED: open question A4); UNKNOWN: a partition with no
	// state yet of a stopped topic is stopped too, so that it becomes
	// writable and the mirror can be deleted.
	{event: EventStoppedDesired, from: []State{Unknown, Preparing, EpochFencing, ULELogTruncation,
		Mirroring, Pausing, Paused, Failed}, to: Stopping},
	// Row 3.
	{event: EventTruncationDone, from: []State{Preparing}, to: Mirroring},
	// Rows 4 and 5.
	{event: EventEpochExceeded, from: []State{Mirroring}, to: EpochFencing},
	{event: EventEpochBumped, from: []State{EpochFencing}, to: Mirroring},
	// Rows 6 and 7.
	{event: EventDivergenceULE, from: []State{Mirroring}, to: ULELogTruncation},
	{event: EventReplicasConverged, from: []State{ULELogTruncation}, to: Mirroring},
	// Row 9.
	{event: EventFetcherRemoved, from: []State{Pausing}, to: Paused},
	// Row 13.
	{event: EventStopTasksDone, from: []State{Stopping}, to: Stopped},
	// Row 14: any state, FAILED included (a new reason replaces the old).
	{event: EventError, to: Failed},
	// Row 15 (later revision: retry / recover): restart from PREPARING.
	{event: EventRetry, from: []State{Failed}, to: Preparing},
	// Row 15, previous state MIRRORING: back to MIRRORING, no truncation.
	{event: EventRetryMirroring, from: []State{Failed}, to: Mirroring},
}

// lookup finds the move for (from, event) in the table.
func lookup(from State, ev EventType) (State, bool) {
	if !from.Valid() {
		return from, false
	}
	for _, r := range moveTable {
		if r.event != ev || !r.covers(from) {
			continue
		}
		if r.same {
			return from, true
		}
		return r.to, true
	}
	return from, false
}

func (r moveRow) covers(s State) bool {
	if r.from == nil {
		return true
	}
	for _, f := range r.from {
		if f == s {
			return true
		}
	}
	return false
}

// ValidMove reports whether the table lets a partition go from one state to
// another by some event. Re-asserting the same state is always legal for a
// valid state; undefined codes are never legal. The coordinator uses it to
// check WriteMirrorStates.
func ValidMove(from, to State) bool {
	if !from.Valid() || !to.Valid() {
		return false
	}
	if from == to {
		return true
	}
	for _, r := range moveTable {
		if !r.same && r.to == to && r.covers(from) {
			return true
		}
	}
	return false
}

// Transition applies event e to a partition in state s. It returns the new
// state and the actions the caller must carry out once the new state is
// durably written (see [Step] for their order). For an event not legal in s
// it returns s, no actions and a *TransitionError (errors.Is
// ErrInvalidTransition); for an event with inconsistent fields, an error
// wrapping ErrInvalidEvent. A legal event that keeps the state (LeaderGained,
// or Error in FAILED) returns that state's entry actions again.
//
// Entry actions per state:
//
//	PREPARING           SetReadOnly ; FindLMEAndTruncate ; WaitReplicas(offset=-1, all=false)
//	EPOCH_FENCING       StopFetcher ; BumpLeaderEpoch(min=batch epoch, or latest local epoch on re-assert)
//	ULE_LOG_TRUNCATION  StopFetcher ; Truncate(offset) ; WaitReplicas(offset, all=true)
//	                    (re-assert: StopFetcher ; WaitReplicas(offset=-1, all=true))
//	MIRRORING           StartFetcher
//	PAUSING             StopFetcher
//	PAUSED, UNKNOWN     none
//	STOPPING            StopFetcher ; PersistLME ; BumpLeaderEpoch(min=latest local epoch) ; AbortOpenTransactions ; AppendPIDReset
//	                    (StopTruncateToLSO: StopFetcher ; TruncateToLSO -> PersistLME ; BumpLeaderEpoch(min) ; AppendPIDReset)
//	STOPPED             ClearReadOnly
//	FAILED              Fail(reason) | StopFetcher
//
// (" ; " separates phases, " | " parallel lanes, " -> " sequential actions of
// one lane, as printed by [FormatActions].)
func Transition(s State, e Event) (State, []Action, error) {
	if e == nil {
		return s, nil, fmt.Errorf("%w: nil event", ErrInvalidEvent)
	}
	to, ok := lookup(s, e.Type())
	if !ok {
		return s, nil, &TransitionError{From: s, Event: e.Type()}
	}
	if err := validate(e); err != nil {
		return s, nil, err
	}
	return to, entryActions(to, e), nil
}

// entryActions returns the actions of entering (or re-asserting) state s,
// with parameters taken from the event that caused it.
func entryActions(s State, e Event) []Action {
	latest, mode := int32(-1), StopAbortOpenTxns
	switch e := e.(type) {
	case LeaderGained:
		latest, mode = e.LatestLocalEpoch, e.StopMode
	case StoppedDesired:
		latest, mode = e.LatestLocalEpoch, e.StopMode
	}
	switch s {
	case Preparing:
		return []Action{
			SetReadOnly{Step{1, 0}},
			FindLMEAndTruncate{Step{2, 0}},
			WaitReplicas{Step: Step{3, 0}, Offset: -1},
		}
	case EpochFencing:
		min := latest
		if ex, ok := e.(EpochExceeded); ok {
			min = ex.BatchEpoch
		}
		return []Action{StopFetcher{Step{1, 0}}, BumpLeaderEpoch{Step{2, 0}, min}}
	case ULELogTruncation:
		if d, ok := e.(DivergenceULE); ok {
			return []Action{
				StopFetcher{Step{1, 0}},
				Truncate{Step{2, 0}, d.TruncateOffset},
				WaitReplicas{Step{3, 0}, d.TruncateOffset, true},
			}
		}
		return []Action{StopFetcher{Step{1, 0}}, WaitReplicas{Step{2, 0}, -1, true}}
	case Mirroring:
		return []Action{StartFetcher{Step{1, 0}}}
	case Pausing:
		return []Action{StopFetcher{Step{1, 0}}}
	case Stopping:
		return stoppingActions(latest, mode)
	case Stopped:
		return []Action{ClearReadOnly{Step{1, 0}}}
	case Failed:
		var reason string
		if er, ok := e.(Error); ok {
			reason = er.Reason
		}
		return []Action{Fail{Step{1, 0}, reason}, StopFetcher{Step{1, 1}}}
	}
	return nil // Unknown, Paused
}

// stoppingActions is the STOPPING sequence of spec §8.1 (JR78): the fetcher
// goes first, the LME is persisted before the bump so it names the last
// mirrored epoch, the markers and the barrier are written at the bumped epoch.
// Every step is idempotent, so a re-run after a crash or a leader change
// writes no second marker and no second barrier.
func stoppingActions(latest int32, mode StopMode) []Action {
	if mode == StopTruncateToLSO {
		return []Action{
			StopFetcher{Step{1, 0}},
			TruncateToLSO{Step{2, 0}},
			PersistLME{Step{2, 0}},
			BumpLeaderEpoch{Step{3, 0}, latest},
			AppendPIDReset{Step{4, 0}},
		}
	}
	return []Action{
		StopFetcher{Step{1, 0}},
		PersistLME{Step{2, 0}},
		BumpLeaderEpoch{Step{3, 0}, latest},
		AbortOpenTransactions{Step{4, 0}},
		AppendPIDReset{Step{5, 0}},
	}
}

// Reconcile returns the state a partition should move to, given the desired
// state of its topic and its actual state (spec §5.5, with the [F] rule for
// FAILED). It returns actual when nothing is to be done; the leader then only
// re-asserts actual after a leader change. Every result r satisfies
// ValidMove(actual, r), and when r != actual, Transition(actual,
// DesiredEvent(desired, ...)) moves to r.
//
//   - FAILED stays FAILED unless desired is STOPPED (-> STOPPING).
//   - desired STOPPED: STOPPING unless already STOPPING or STOPPED.
//   - desired PAUSED: MIRRORING -> PAUSING; any other state stays (a
//     transient state finishes first and is paused once MIRRORING; a partition
//     that is UNKNOWN or STOPPED is not started while its topic is paused).
//   - desired MIRRORING: PAUSED -> MIRRORING (resume), UNKNOWN and STOPPED ->
//     PREPARING; other states stay (a STOPPING partition finishes and is
//     started again from STOPPED).
//   - desired UNKNOWN (topic not associated) or an undefined desired code:
//     nothing to do.
//
// The tiered-storage check of §5.5 needs topic configs and is the caller's:
// it reports Error.
func Reconcile(desired Desired, actual State) State {
	if !actual.Valid() {
		return actual
	}
	var ev EventType
	switch desired {
	case DesiredMirroring:
		ev = EventMirroringDesired
	case DesiredPaused:
		ev = EventPausedDesired
	case DesiredStopped:
		ev = EventStoppedDesired
	default:
		return actual
	}
	if to, ok := lookup(actual, ev); ok {
		return to
	}
	return actual
}

// DesiredEvent returns the event that reports desired state d, or nil for
// DesiredUnknown and undefined codes. latestLocalEpoch (the latest leader
// epoch of the local log, -1 if empty) and mode are used by StoppedDesired.
func DesiredEvent(d Desired, latestLocalEpoch int32, mode StopMode) Event {
	switch d {
	case DesiredMirroring:
		return MirroringDesired{}
	case DesiredPaused:
		return PausedDesired{}
	case DesiredStopped:
		return StoppedDesired{LatestLocalEpoch: latestLocalEpoch, StopMode: mode}
	}
	return nil
}

// Next combines Reconcile and Transition: it returns the state the partition
// should move to and the actions of that move, or (actual, nil, nil) when
// nothing is to be done. mode is the mirror's StopMode.
func Next(desired Desired, actual State, latestLocalEpoch int32, mode StopMode) (State, []Action, error) {
	to := Reconcile(desired, actual)
	if to == actual {
		return actual, nil, nil
	}
	return Transition(actual, DesiredEvent(desired, latestLocalEpoch, mode))
}
