// Package fetcher owns the destination side of one mirrored partition: the
// Log interface with its two implementations (MemoryLog for tests, with
// crash and fault injection; FileLog, the durable default, in Kafka's own
// on-disk layout so kafka-dump-log can read it), the Source abstraction over
// the source cluster (Kafka via kmsg Fetch/OffsetForLeaderEpoch/ListOffsets,
// or a local log), and the per-partition fetch loop that copies raw batches
// unchanged, truncates on divergence and tracks lag.
//
// Callers: the mirror package's reconciler adds each MIRRORING partition to the
// mirror's Fetcher and drives the STOPPING/PREPARING workflows directly
// against the partition's Log (Truncate, BumpLeaderEpoch, AppendAsLeader of
// ABORT and MIRROR_PID_RESET control batches).
//
// Concurrency: a Log is safe for concurrent use by one writer (the
// partition's fetch loop or workflow, never both at once) and many readers
// (consumers serving Read, lag and describe calls). A FileLog directory is
// owned by one log at a time: by one process, enforced with an exclusive
// flock on its lock file unless the caller's own lock covers the directory
// (FileLogOptions.DirLockedByCaller, as LocalDestination's root lock does),
// and by one FileLog of the process, enforced by its FileCache. A Fetcher's loop goroutine owns the fetch state of its partitions
// and is the only writer of their Logs (appending the partitions of one
// response in parallel, one goroutine per Log); it keeps one Fetch in flight
// per source leader. Remove returns once the loop no longer writes the
// partition, and Close waits for every goroutine. Sources are safe for
// concurrent use; KafkaSource sends each fetch to the partitions' leaders in
// parallel, each Fetcher on connections of its own (KafkaSourceConfig.FetchConnections,
// kafkasource_lanes.go), one request in flight per connection and broker. A
// Fetcher's fetches run in incremental fetch sessions (KIP-227), one per source
// broker (FetchSessions, kafkasource_session.go): once a session is open, a
// fetch names only the partitions whose position moved and the answer only
// those that changed; the partitions an answer leaves out cost the Fetcher one
// timestamp each (FetchResult.Unchanged). A source still checks every
// partition of a session per request.
//
// Truncate keeps a batch that contains the truncation offset whole (the log
// never holds half a batch); the fetch loop truncates at batch boundaries, where
// divergence and LME offsets fall.
//
// Loop contract on divergence and out-of-range answers: the loop reads the
// log once, a pure decision (truncation.go: decideDiverging, decideProbe,
// decideOutOfRange, traced in testdata/truncation/) says truncate to an
// offset, start the log at the source's log start reporting the lost offsets
// (Events.OnOutOfRange; never silent), fail with a typed error, or stop after
// the divergence (Config.StopOnDivergence), and the loop carries it out.
//
// Logging: Config.Logger is a *slog.Logger (nil discards): warnings for
// retried source errors and truncations, errors for failed partitions.
//
// FileLog layout (one directory per partition, PartitionDir):
//
//	00000000000000000000.log    raw v2 batches, exactly as Kafka stores them
//	00000000000000000000.index  sparse offset index: 8-byte big-endian entries
//	                            (last offset of the batch - segment base, position)
//	leader-epoch-checkpoint     Kafka's checkpoint text (version 0), rewritten in
//	                            place without fsync (rebuilt by recovery)
//	kmirror-log-state           two 512-byte slots, each one zero-padded line
//	                            "1 <seq> <leader epoch> <log start> <pending>
//	                            <offset> <crc32c>\n"; the valid slot with the
//	                            higher seq is the state, and a write goes in
//	                            place to the other one (fdatasync, no rename).
//	                            The single-line "0\n<leader epoch>\n..." of
//	                            older versions is read and replaced.
//	kmirror-recovery-point      rolled segments and the active flush point
//	.lock                       flock(LOCK_EX|LOCK_NB) while open (not with
//	                            DirLockedByCaller)
//
// File descriptors: a FileLog opens its segment files on demand through a
// FileCache (FileLogOptions.Files; by default the process-wide
// DefaultFileCache, bounded by half of RLIMIT_NOFILE), an LRU of open files
// whose entries in use are never closed. An idle partition holds no
// descriptor of its own, so the number of partitions a process can host is
// not bounded by its descriptors; a shortage the cache cannot absorb fails the
// operation with ErrTooManyOpenFiles (and the errno) and leaves the log usable.
// An idle open partition keeps about 1 KiB of memory, plus its sparse index (8
// bytes per IndexIntervalBytes of log) and its producers' state
// (BenchmarkFileLogIdlePartition).
//
// No .timeindex is written. Index files are written without preallocation (so
// they never need trimming) and are rebuilt on every open from the batch
// headers; Open checks the CRCs of the batches past the recovery point, and
// of every batch of a segment file changed since the recovery point was
// written.
//
// Data path cost: each fetched batch's CRC is computed once (the loop verifies
// it, then appends through an internal path of this package's logs that keeps
// every other check of Append but not the CRC); the bytes are written with one
// pwrite per partition and response; with FsyncOnFlush and FsyncEveryNBytes a
// FileLog starts the writeback of each MiB it appends (sync_file_range on
// Linux, from a goroutine of its FileCache that runs only while hints are
// queued, so the append path never waits for the
// block allocation and I/O queueing it does), so the disk writes while the
// mirror fetches and Flush's fsync finds little left. The page-cache write
// itself is the rest of the cost.
//
// Syncs at scale: a failover syncs every partition at once (a leader-epoch
// bump and a MIRROR_PID_RESET barrier each). The bump overwrites a slot of
// the state file in place (no file created or renamed) and is not synced by
// itself (UnsyncedBumper): the barrier's SyncData (SyncAppended) makes both
// durable in one sync, leaves the recovery point for the next periodic Flush
// or Close, and a crash that keeps the barrier and loses the bump reopens the
// log at the barrier's epoch (the open never leaves a log's leader epoch below
// the epoch of its last batch). A sync that finds more than 64
// others under way in the process joins the next syncfs(2) round of its
// filesystem (Linux 5.8 and later) instead of a device flush of its own. A
// failed round fails its callers and those waiting for the next one, and
// turns grouping off for good: a writeback error, which syncfs reports only
// once, is never lost.
package fetcher
