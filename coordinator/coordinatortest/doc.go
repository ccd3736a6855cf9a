// Package coordinatortest is an exported test harness for code that talks to
// the mirror-state coordinator: an in-process coordinator.Runtime over a
// coordinator.MemoryStore, with helpers to script reads, writes, leader
// changes, store crashes, injected append failures and reloads, and to
// assert on refusals (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
// INVALID_CLUSTER_MIRROR_STATES).
//
// A Harness owns one runtime at a time; Crash and Reload replace it by a new
// owner with a higher ownership epoch that replays the store, as a
// coordinator failover would. A Leader stands for one data-partition leader
// (a broker with a leader epoch): it remembers the StateEpoch of its last
// read and sends it with its writes, as the reconciler does.
//
// Harness and Leader are safe for use from one goroutine; the runtime under
// them is safe for concurrent use. Close stops every goroutine.
package coordinatortest
