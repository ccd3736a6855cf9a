package statemachine

import (
	"fmt"
	"strings"
)

// Step places an action in the plan returned by [Transition]. Phases run in
// increasing order, starting at 1: phase n+1 starts only when every action of
// phase n has finished. Inside a phase, actions with different Lane values
// may run in parallel; actions with the same Lane run one after the other in
// the order of the returned slice.
type Step struct {
	Phase int8
	Lane  int8
}

// At returns the action's place in the plan.
func (s Step) At() Step { return s }

// Action is one thing the caller must carry out. The concrete types are the
// structs of this file; switch on them with a type switch.
type Action interface {
	// At returns the action's phase and lane.
	At() Step
	// String describes the action with its parameters.
	String() string
}

// StartFetcher: attach the partition to a mirror fetcher, fetching from the
// local log end offset. Idempotent.
type StartFetcher struct{ Step }

// StopFetcher: remove the partition from its mirror fetcher. Idempotent.
type StopFetcher struct{ Step }

// FindLMEAndTruncate is the PREPARING work (spec §6.3): find the LME on the
// other cluster (ListClusterMirrors + DescribeClusterMirrors), refuse mirror
// loops, translate the LME to an offset with the local leader-epoch cache and
// truncate the local log (all replicas) there.
type FindLMEAndTruncate struct{ Step }

// Truncate: truncate the local log (all replicas) to Offset.
type Truncate struct {
	Step
	Offset int64
}

// TruncateToLSO: truncate the local log to its last stable offset, dropping
// any uncommitted tail.
type TruncateToLSO struct{ Step }

// AbortOpenTransactions: append, as leader at the current (bumped) leader
// epoch, an ABORT marker for every transaction open in the local log, oldest
// first, so the LSO reaches the high watermark (spec §8.1, JR78). Idempotent:
// a transaction already closed by a marker is not open any more.
type AbortOpenTransactions struct{ Step }

// PersistLME: record the latest leader epoch of the local log (after the
// truncation that precedes it) as the LME in __mirror_state.
type PersistLME struct{ Step }

// BumpLeaderEpoch: ask the controller (BumpLeaderEpochs) for a new local
// leader epoch greater than Min, and wait until it is visible. Min -1 means
// no minimum: a plain bump.
type BumpLeaderEpoch struct {
	Step
	Min int32
}

// AppendPIDReset: append the MIRROR_PID_RESET control record (type 7), the
// barrier after which producers start afresh. Idempotent: a barrier already
// written by this stop is not written again.
type AppendPIDReset struct{ Step }

// ClearReadOnly: allow local produce requests on the partition.
type ClearReadOnly struct{ Step }

// SetReadOnly: refuse local produce requests on the partition.
type SetReadOnly struct{ Step }

// WaitReplicas: wait until the replicas have converged. With AllReplicas,
// every assigned replica must be in the ISR; otherwise the ISR suffices
// unless the topic sets mirror.support.unclean.leader.election=true. Offset
// is the log end offset they must reach; -1 means the leader's current log
// end offset.
type WaitReplicas struct {
	Step
	Offset      int64
	AllReplicas bool
}

// Fail: record Reason as the partition's error message (the ErrorMessage of
// its FAILED state record) and report it. An empty Reason (a re-asserted
// FAILED) keeps the stored message.
type Fail struct {
	Step
	Reason string
}

// String implements Action.
func (StartFetcher) String() string { return "StartFetcher" }

// String implements Action.
func (StopFetcher) String() string { return "StopFetcher" }

// String implements Action.
func (FindLMEAndTruncate) String() string { return "FindLMEAndTruncate" }

// String implements Action.
func (a Truncate) String() string { return fmt.Sprintf("Truncate(offset=%d)", a.Offset) }

// String implements Action.
func (TruncateToLSO) String() string { return "TruncateToLSO" }

// String implements Action.
func (PersistLME) String() string { return "PersistLME" }

// String implements Action.
func (AbortOpenTransactions) String() string { return "AbortOpenTransactions" }

// String implements Action.
func (a BumpLeaderEpoch) String() string { return fmt.Sprintf("BumpLeaderEpoch(min=%d)", a.Min) }

// String implements Action.
func (AppendPIDReset) String() string { return "AppendPIDReset" }

// String implements Action.
func (ClearReadOnly) String() string { return "ClearReadOnly" }

// String implements Action.
func (SetReadOnly) String() string { return "SetReadOnly" }

// String implements Action.
func (a WaitReplicas) String() string {
	return fmt.Sprintf("WaitReplicas(offset=%d, all=%t)", a.Offset, a.AllReplicas)
}

// String implements Action.
func (a Fail) String() string { return fmt.Sprintf("Fail(%q)", a.Reason) }

// Phases groups a plan by phase and then by lane, both in increasing order,
// keeping the slice order inside a lane: Phases(p)[i][j] is the j-th lane of
// the i-th phase present.
func Phases(actions []Action) [][][]Action {
	var out [][][]Action
	for _, phase := range distinct(actions, func(s Step) int8 { return s.Phase }) {
		var lanes [][]Action
		var inPhase []Action
		for _, a := range actions {
			if a.At().Phase == phase {
				inPhase = append(inPhase, a)
			}
		}
		for _, lane := range distinct(inPhase, func(s Step) int8 { return s.Lane }) {
			var l []Action
			for _, a := range inPhase {
				if a.At().Lane == lane {
					l = append(l, a)
				}
			}
			lanes = append(lanes, l)
		}
		out = append(out, lanes)
	}
	return out
}

// distinct returns the distinct keys of the actions in increasing order.
func distinct(actions []Action, key func(Step) int8) []int8 {
	var ks []int8
	for _, a := range actions {
		k := key(a.At())
		i := 0
		for i < len(ks) && ks[i] < k {
			i++
		}
		if i == len(ks) || ks[i] != k {
			ks = append(ks, 0)
			copy(ks[i+1:], ks[i:])
			ks[i] = k
		}
	}
	return ks
}

// FormatActions renders a plan on one line: phases separated by " ; ",
// parallel lanes by " | ", sequential actions of a lane by " -> ". For the
// STOPPING entry it gives
// "StopFetcher ; BumpLeaderEpoch(min=5) | TruncateToLSO -> PersistLME ; AppendPIDReset".
// An empty plan gives "none".
func FormatActions(actions []Action) string {
	if len(actions) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, phase := range Phases(actions) {
		if i > 0 {
			b.WriteString(" ; ")
		}
		for j, lane := range phase {
			if j > 0 {
				b.WriteString(" | ")
			}
			for k, a := range lane {
				if k > 0 {
					b.WriteString(" -> ")
				}
				b.WriteString(a.String())
			}
		}
	}
	return b.String()
}
