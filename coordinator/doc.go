// Package coordinator owns the actual mirror state of KIP-1279: the per
// mirror-partition State, the fencing counters (highest-seen LeaderEpoch and
// StateEpoch) and the LastMirrorEpoch, persisted on the compacted
// __mirror_state topic (spec §9).
//
// It has three layers, modelled on Kafka's coordinator runtime and share
// coordinator:
//
//   - Shard: the deterministic state of one __mirror_state partition. Its
//     commands (ReadMirrorStates, WriteMirrorStates, DeleteMirror) read the
//     shard and return a Result with the records to append and the response;
//     they never mutate. Replay(record) is the only mutation. WriteMirrorStates
//     fences first (leader epoch, then state epoch, -1 skipping a check, via
//     epoch.Fence), then checks the move with statemachine.ValidMove; a
//     refusal is a per-partition admin code with no records, never a Go
//     error. A read that raises the highest-seen leader epoch emits a record
//     (spec §9.6 Read rule). A Shard does no I/O, reads no clock and starts
//     no goroutines; it is not safe for concurrent use.
//   - Runtime: owns the shards of the partitions this process was granted
//     (Load/Unload with an ownership epoch), one owner goroutine per
//     partition. It loads a shard by replaying the Store, routes every key to
//     its partition with records.PartitionFor, batches the records of many
//     commands into one Store.Append (AppendLinger, MaxBatchRecords), answers
//     only after the append is durable and rolls the shard back to its
//     committed view when an append fails. A read that writes nothing is
//     answered at once from the committed shard (what the Store holds), as
//     Kafka's runtime answers read operations at the last committed offset:
//     a describe never queues behind the appends in flight, and never sees
//     a write that is not durable.
//   - Store: persistence behind a narrow interface. MemoryStore keeps the
//     logs in memory with crash and fault injection; KafkaStore writes a
//     compacted Kafka topic through sarama with one transactional producer
//     per owned partition, so that a newer owner fences an older one.
//
// Callers: the mirror facade's coordinator service (local calls and the
// ReadMirrorStates/WriteMirrorStates RPC handlers, which map the admin wire
// types to ReadRequest/WriteRequest), and tests through the exported harness
// in package coordinatortest.
//
// Concurrency: Runtime, MemoryStore and KafkaStore are safe for concurrent
// use; Runtime.Close returns only after every goroutine it started has
// exited. Shard is not safe for concurrent use with Replay (its commands
// only read it: the Runtime runs them concurrently under a read lock).
package coordinator
