// Package epoch owns the leader-epoch maths of kmirror:
//
//   - Cache, a leader-epoch history (epoch → start offset) with the exact semantics of
//     Kafka's LeaderEpochFileCache: Assign, EndOffsetFor, TruncateFromEnd,
//     TruncateFromStart, EpochForOffset;
//   - the leader-epoch-checkpoint text format Kafka keeps next to each log
//     (EncodeCheckpoint, DecodeCheckpoint);
//   - diverging-epoch maths for both sides of a Fetch: what a Kafka leader answers to
//     (LastFetchedEpoch, FetchOffset) (LeaderDivergence, CheckFetch) and where a follower
//     truncates on a DivergingEpoch (FollowerTruncationOffset, FollowerTruncation);
//   - the translation of a last mirror epoch (LME) into a truncation offset through the
//     local cache (LMETruncationOffset, KIP-1279 §6.3 step 6);
//   - the single fence rule comparing a stored and a requested epoch (Fence, §9.6).
//
// Callers: the fetcher's logs keep a Cache per partition and persist it with the
// checkpoint codec; the fetch loop uses LatestEpoch as LastFetchedEpoch and
// FollowerTruncationOffset on DivergingEpoch; in-process sources and test harnesses answer
// fetches with LeaderDivergence/CheckFetch; the PREPARING workflow uses
// LMETruncationOffset; the coordinator, fetcher and reconciler fence with Fence.
//
// Concurrency: the package is pure — no I/O, no clock, no goroutines, no package state.
// A Cache is not safe for concurrent use; its owner (one reconciler per partition, or a
// caller-held lock) serialises access. Functions never panic on their inputs, and
// DecodeCheckpoint returns an error matching ErrCorruptCheckpoint on any malformed data.
package epoch
