// Package mirrorsim is a deterministic multi-site simulation of KIP-1279 cluster
// mirroring. It drives the mirror facade (mirror.Mirror) of two or three in-process
// sites through random cycles of produce, partial and full catch-up, clean failover,
// failover after a crash of the primary (unclean failover), failback with LME
// truncation, unclean leader elections on the primary, crashes and reloads of a site
// (log crash, coordinator store crash, a new Mirror on the same destination, stores and
// controller log) and coordinator ownership changes, and checks the protocol's
// invariants after every step:
//
//   - "lme", the LME invariant of spec §6.2: after a failback's PREPARING (and before
//     anything is fetched), the mirroring site's log ends at or below the end of the
//     LME epoch its peer stored, holds no batch of an epoch above that LME, and its
//     batches and the peer's batches of epochs <= LME are byte prefixes of one another
//     (each epoch's data belongs to one cluster);
//   - "committed-not-lost": what a site had committed (below its LSO) and mirrored
//     before it is stopped (failover) is a prefix of its log after the stop; the
//     STOPPED partition has no open transaction, ends with a MIRROR_PID_RESET, has a
//     leader epoch above every copied epoch and becomes writable;
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
// Callers: the package's own tests (TestSimSeeds, 1,000 seeds by default,
// -sim.seeds=N for long local runs), and embedders who want to run the simulation
// against their own fetcher.Log implementation (Options.LogFactory).
//
// Concurrency: a Sim may be used by one goroutine at a time; Run builds its sites,
// runs the steps and closes everything it started before it returns. Different Sim
// values may run in parallel.
package mirrorsim
