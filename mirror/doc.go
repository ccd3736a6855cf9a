// Package mirror is kmirror's facade: it composes the coordinator, the fetchers, the
// state machine and the admin handlers into the KIP-1279 workflows (create, start, pause,
// resume, stop, fail back, delete, list, describe).
//
// # What a Mirror owns
//
// New builds a Mirror for one destination cluster (or one host instance of it) from a
// Config: the host's Destination (topics, partition logs, read-only flags, group offsets;
// LocalDestination ships file-backed and in-memory), a ControllerLog for desired state
// (MemoryControllerLog, or KafkaControllerLog on a compacted topic) and a coordinator.Store
// for actual partition states (coordinator.MemoryStore, or coordinator.KafkaStore on
// __mirror_state). The Mirror then owns:
//
//   - the Controller: mirror definitions (the CLUSTER_MIRROR configs of spec §13.2,
//     validated by ParseMirrorConfig) and the desired state of every mirror topic, with
//     per-topic StateOffset fencing. It validates desired states only.
//   - a coordinator.Runtime. A single-process host lets New load every __mirror_state
//     partition with owner epoch 1; a multi-instance host sets
//     Config.ManualCoordinatorOwnership and calls Coordinator().Load/Unload as it gains and
//     loses ownership.
//   - per mirror, a source and its fetch loops (created lazily by the SourceFactory; by
//     default a fetcher.KafkaSource and a metasync.KafkaSourceAdmin), a metasync.Syncer
//     for the periodic metadata sync (discovery, topic creation with the source's topic
//     id, partition growth, config sync, group-offset sync), and a Peer to look up the
//     last mirror epoch on the other cluster during PREPARING (by default an admin client
//     to the source; a *Mirror is itself a Peer for in-process sites).
//   - one reconciler per mirror partition: read the actual state through the coordinator
//     (raising the highest leader epoch seen), compute the next state with statemachine,
//     write it fenced by leader epoch and state epoch, and only once the write is durable
//     carry out the state's actions in phase order.
//
// Lifecycle operations validate actual partition states through the coordinator
// (statemachine.CheckOp, refusals are INVALID_CLUSTER_MIRROR_STATES naming the partition
// and state), then ask the Controller with the validated controller offset as StateOffset.
// mirror/adminhandler serves the same operations, and the instance-to-instance RPCs, over
// the Kafka wire protocol through an admin.Server (adminhandler.New).
//
// # Sub-packages
//
// The pieces a Mirror composes live in their own packages, which never import this one:
// mirror/dest (the Destination contract), mirror/localdest (LocalDestination),
// mirror/controller (Controller, the controller logs, MirrorConfig), mirror/metasync
// (Syncer, SourceAdmin, the source admin clients) and internal/reconcile (the per-mirror
// runtimes and the reconcilers, given an explicit reconcile.Deps; ErrStorage,
// ErrMirrorLoop and Metrics are its names). This package re-exports the names a host
// needs to build and run a Mirror (mirror.LocalDestination, mirror.ParseMirrorConfig,
// the config keys, SourceAdmin); the metadata sync's own types are used from
// mirror/metasync.
//
// # Concurrency
//
// A Mirror is safe for concurrent use. It runs one goroutine per mirror partition, the fetch
// loops of each mirror (Config.FetchersPerMirror) and one sync loop per mirror; coordinator
// writes of many partitions are committed in groups. Close stops every goroutine it started
// and returns when they are gone; it closes neither the Destination nor the stores.
package mirror
