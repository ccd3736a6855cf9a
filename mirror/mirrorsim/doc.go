// Package mirrorsim is a deterministic multi-site simulation of KIP-1279 cluster
// mirroring. It drives the mirror facade (mirror.Mirror) of two or three in-process
// sites through random cycles of produce, partial and full catch-up, clean failover,
// failover after a crash of the primary (unclean failover), failback with LME
// truncation, unclean leader elections on the primary, crashes and reloads of a site
// (log crash, coordinator store crash, a new Mirror on the same destination, stores and
// controller log), coordinator ownership changes and client writes to mirror
// partitions, and checks the protocol's invariants after every step:
//
//   - "lme", the LME invariant of spec §6.2: after a failback's PREPARING (and before
//     anything is fetched), the mirroring site's log ends at or below the end of the
//     LME epoch its peer stored, holds no batch of an epoch above that LME, and its
//     batches and the peer's batches of epochs <= LME are byte prefixes of one another
//     (each epoch's data belongs to one cluster);
//   - "committed-not-lost" and "acked-not-lost": the reference is a model of what the
//     simulated producer wrote to the primary and committed (non-transactional records,
//     and transactions whose COMMIT it wrote), kept from the producer's own writes and
//     never read back from the log under test. The primary holds every record of the
//     model at its offset; a failover keeps, at its offset and visible to
//     read_committed, every record the source committed within what the new primary
//     held (with a STOPPING that truncates to the LSO, only those below the first
//     transaction still open there; see TestSimStrictStop); the STOPPED partition has
//     no open transaction and LSO = HW, ends with a MIRROR_PID_RESET, has a leader
//     epoch above every copied epoch and becomes writable;
//   - "read-committed": a read_committed view of every up site (data records below the
//     log's LSO, without transactions an ABORT marker ends) shows only records the
//     source committed within that log's prefix;
//   - "read-only-refused": a client write (the simulation's only one goes through the
//     Destination's Produce) is accepted on the primary and refused on a mirror with
//     READ_ONLY_TOPIC, without landing; the expectation comes from the simulation's
//     roles, not from the read-only flag;
//   - "leader-epoch-durable": a log's leader epoch never goes down, across crashes and
//     reopens included;
//   - "convergence": a mirror always becomes a byte prefix of its source, and once
//     caught up (full catch-up, end of run) its log is byte-identical to its source's;
//   - "state-epoch-monotonic": per partition, the coordinator's StateEpoch and
//     highest-seen LeaderEpoch never go down;
//   - "stale-write-refused": a WriteMirrorStates with an older LeaderEpoch or
//     StateEpoch than stored is refused with FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH;
//   - "epoch-fencing": no log holds a batch of an epoch above its leader epoch;
//     "log-well-formed": batches are contiguous with non-decreasing epochs;
//     "primary-writable" and "mirror-read-only".
//
// One seed (math/rand/v2 PCG) decides every step. Between steps the simulation waits
// for quiescence with bounded condition waits (state waits of the facade, and log and
// read-only changes signalled by the destination), never with sleeps. What mirroring
// copies between steps is bounded by per-pair "gates" on the source logs (a capped
// high watermark), so partial catch-up is deterministic too, and a seed's trace (every
// step with the offsets, epochs and LMEs it saw at quiescent points) does not depend
// on timing: Replay(seed) re-runs exactly the steps a failing Run printed.
//
// Sites and roles: site s0 starts as the writable primary of topic "orders"; every
// other site runs a mirror named "from-<source site>" (a fetcher.LocalSource over the
// source's logs, the source's Mirror as its Peer). A failover stops the mirror on the
// new primary, stops the other mirrors of the old primary, starts the old primary's
// failback (a mirror from the new primary, through PREPARING's LME truncation), then
// points the other mirrors at the new primary.
//
// Crashes: a log with a Crash method (fetcher.MemoryLog) is crashed in place; any other
// log is closed and reopened from its storage through the LogFactory (LogSpec.Reopen).
// FileLogFactory's FileLogs alternate power losses (segments cut back to what was
// flushed) and process crashes.
//
// Callers: the package's own tests (TestSimSeeds and TestSimFileLogs, 1,000 seeds by
// default, -sim.seeds=N for long local runs; TestSimCatchesBrokenLogs, which proves
// that deliberately broken Logs are caught within 200 seeds), and embedders who want
// to run the simulation against their own fetcher.Log implementation
// (Options.LogFactory; client writes go through mirror.ProduceToLog, so the Log's own
// read-only guard, fetcher.Log.SetReadOnly, is what a run certifies). A
// Failure's replay hint prints the embedder's own New and Replay call
// (Options.ReplayOptions names the expression that builds their Options).
//
// Concurrency: a Sim may be used by one goroutine at a time; Run builds its sites,
// runs the steps and closes everything it started before it returns. Different Sim
// values may run in parallel.
package mirrorsim
