// Package statemachine owns the mirror partition state machine of KIP-1279
// (cluster mirroring): the partition states and their numeric codes, the
// desired (operator) states, the events that move a partition, the single
// table of legal (from, event) -> to moves, the actions a state asks the
// caller to carry out, the reconcile rule (desired x actual -> next) and the
// validity of admin operations per state.
//
// # Who calls it
//
// The reconciler in package mirror drives one partition at a time: it reads
// the actual state from the coordinator, asks [Reconcile] where the partition
// should go, obtains the actions with [Transition], writes the new state
// (fenced) and, only once that write is committed, carries out the actions.
// When the work is done it reports back with the next [Event] (for example
// [TruncationDone] or [StopTasksDone]). The coordinator checks every
// WriteMirrorStates request with [ValidMove]; the admin layer checks lifecycle
// operations with [CheckOp] and maps [ErrInvalidStates] to the protocol error
// INVALID_CLUSTER_MIRROR_STATES (10145).
//
// # Actions as data
//
// [Transition] never performs side effects. It returns the actions as values
// ([StartFetcher], [StopFetcher], [FindLMEAndTruncate], [Truncate],
// [TruncateToLSO], [PersistLME], [BumpLeaderEpoch], [AppendPIDReset],
// [ClearReadOnly], [SetReadOnly], [WaitReplicas], [Fail]). Each action carries
// a [Step]: actions run phase by phase (phase 1 first; phase n+1 starts only
// when every action of phase n has finished); inside one phase, different
// lanes may run in parallel and the actions of one lane run one after the
// other, in slice order. The STOPPING entry, for example, is
//
//	phase 1: StopFetcher
//	phase 2: lane 0: BumpLeaderEpoch(min=latest local epoch)
//	         lane 1: TruncateToLSO, then PersistLME
//	phase 3: AppendPIDReset
//
// and the partition moves to STOPPED (whose entry action is ClearReadOnly)
// when the caller reports [StopTasksDone].
//
// # Concurrency and purity
//
// Every function is pure: no I/O, no clock, no goroutines, no package-level
// mutable state. All types are immutable values and are safe to share; the
// caller owns one partition's state and serialises the events it feeds in.
package statemachine
