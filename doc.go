// Package kmirror is an embeddable Go implementation of the core of Kafka cluster
// mirroring as designed in KIP-1279 "Cluster Mirroring".
//
// kmirror copies Kafka topics from a source cluster into destination partitions byte for
// byte: the same offsets, the same record batches (never decompressed or recompressed), the
// same leader epochs, with producer state carried along. Each mirrored partition follows
// the KIP's lifecycle (PREPARING → MIRRORING → PAUSING/PAUSED → STOPPING → STOPPED, with
// EPOCH_FENCING, ULE_LOG_TRUNCATION and FAILED), its fenced state is kept by a coordinator
// persisted on a compacted Kafka topic, and a failover (stop) followed by a failback
// (truncate to the last mirror epoch, then mirror the other way) loses no committed record.
//
// # Package map
//
// Dependencies point one way, from the pure protocol core up to the facade:
//
//   - records: a zero-copy view of Kafka v2 record batches, CRC-32C, control records
//     (ABORT, COMMIT, MIRROR_PID_RESET), the __mirror_state and controller record codecs,
//     and Kafka's Java-compatible key partitioner.
//   - epoch: the leader-epoch cache with Kafka's LeaderEpochFileCache semantics, its
//     checkpoint format, diverging-epoch maths for leader and follower, LME translation and
//     the single fence rule.
//   - statemachine: mirror partition states and their numeric codes, the one table of legal
//     moves, a pure Transition returning actions as data, the desired × actual reconcile
//     rule and admin-operation validity.
//   - admin: every KIP-1279 RPC as a generated, versioned Kafka-protocol message, the error
//     table, authorization as data, a server a host mounts on its own listener and a client.
//   - coordinator: the fenced mirror-state store (a deterministic shard, a runtime with
//     ownership epochs and batched durable appends, memory and compacted-topic stores) and
//     an exported test harness.
//   - fetcher: destination logs (in memory, and a file log in Kafka's segment layout),
//     sources (a Kafka cluster through kmsg, or another local log) and the per-partition
//     fetch loop with diverging-epoch truncation.
//   - mirror/dest: the Destination contract (topics, partition logs, read-only flags and
//     the optional group-offset, client-admin, ACL and replica capabilities).
//   - mirror/localdest: LocalDestination, the Destination kmirror ships (file and memory).
//   - mirror/controller: desired state (mirror definitions, desired topic states, the
//     memory, file and Kafka controller logs) and the parsing of mirror configs.
//   - mirror/metasync: the metadata sync (discovery, topic creation, partition growth,
//     config, group-offset and ACL sync) and the source admin clients.
//   - mirror: the facade that composes them (Mirror, its workflows, Peer, the admin
//     handler); it re-exports the public names of its sub-packages. Its reconciler
//     engine (one goroutine per mirror partition, the per-mirror runtimes) lives in
//     internal/reconcile and gets what it uses as an explicit reconcile.Deps.
//
// records, epoch, statemachine, the admin message types and the coordinator shard do no
// I/O, start no goroutines and never read the clock; internal/lint enforces it.
//
// # Data flow of one mirrored partition
//
// A desired-state change or a gained leadership makes the host read the partition's
// actual state from the coordinator (the read raises the highest leader epoch seen),
// compute the next state with statemachine, write it (fenced by leader epoch and state
// epoch) and, once the write is durable, carry out the state's actions: PREPARING finds
// the last mirror epoch (LME) on the other side and truncates the local log after it;
// MIRRORING runs the fetch loop, which truncates on DivergingEpoch, restarts from the
// source log start on OFFSET_OUT_OF_RANGE and reports EPOCH_FENCING when a batch carries
// a leader epoch above the destination's; STOPPING removes the fetcher, persists the
// LME, bumps the leader epoch, aborts every open transaction with an ABORT marker and
// appends a MIRROR_PID_RESET barrier, after which the partition is STOPPED and writable
// (every committed record kept, LSO = HW). Until then client writes, which go through
// Destination.Produce, are refused with READ_ONLY_TOPIC. One partition's failure moves
// that partition alone to FAILED.
package kmirror
