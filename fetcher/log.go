package fetcher

import (
	"errors"

	"github.com/kmirror/kmirror/epoch"
)

// Sentinel errors of the destination logs. Every error returned by a Log
// method either is one of these (possibly wrapped with context via %w) or
// wraps an underlying I/O or records error.
var (
	// ErrOffsetRegression is returned by Append when the first batch's base
	// offset is below LogEndOffset, or when batches inside one Append call
	// overlap or go backwards.
	ErrOffsetRegression = errors.New("fetcher: offset regression")
	// ErrOffsetOutOfRange is returned by Read for an offset outside
	// [LogStartOffset, LogEndOffset], and by Truncate and
	// TruncateFullyAndStartAt for a negative offset.
	ErrOffsetOutOfRange = errors.New("fetcher: offset out of range")
	// ErrClosed is returned by every method that can fail once Close has
	// been called (and, for MemoryLog, after Crash).
	ErrClosed = errors.New("fetcher: log closed")
	// ErrInvalidBatch is returned by Append and AppendAsLeader when the input
	// is not a sequence of whole, well-formed v2 batches. It wraps the
	// records error (which is Is(records.ErrCorrupt)) when there is one.
	ErrInvalidBatch = errors.New("fetcher: invalid batch")
	// ErrInjected is the error returned by MemoryLog fault injection.
	ErrInjected = errors.New("fetcher: injected fault")
	// ErrReadOnly is returned by AppendAsLeader for a data batch while the log
	// is read-only (a mirror partition that is not STOPPED); nothing is
	// appended. The mirror package answers it as READ_ONLY_TOPIC.
	ErrReadOnly = errors.New("fetcher: partition is read-only")
	// ErrLocked is returned by OpenFileLog when another process (or another
	// FileLog in this process) holds the directory's lock file.
	ErrLocked = errors.New("fetcher: log directory locked")
)

// OpenTxn is one open (not yet committed or aborted) transaction in a log:
// a transactional data batch of ProducerID was appended at FirstOffset and no
// control batch (COMMIT or ABORT) of that producer followed it yet.
type OpenTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
}

// Log is one destination partition's log. Implementations are safe for
// concurrent use by one writer and many readers.
//
// Ownership: byte slices passed to Append and AppendAsLeader are not retained
// after the call returns (implementations copy them), and AppendAsLeader does
// not modify its argument. Slices returned by Read belong to the caller.
//
// Errors: after Close every method that returns an error returns ErrClosed.
// An I/O error during Append, Truncate or Flush of a file-backed log leaves the
// in-memory view unchanged where possible; the caller should Close and reopen.
type Log interface {
	// Append appends one or more whole raw v2 batches (concatenated) at their
	// own base offsets, unchanged. The first batch's base offset must be >=
	// LogEndOffset (a gap is allowed: compacted sources); an overlap or
	// regression returns an error Is(ErrOffsetRegression). Each batch's
	// PartitionLeaderEpoch is assigned to the epoch cache (as Kafka does on
	// append); producer/transaction state is updated from batch headers.
	// Malformed input returns an error Is(ErrInvalidBatch) and nothing is
	// appended (the call is all-or-nothing with respect to validation).
	Append(batches []byte) error
	// AppendAsLeader stamps the batch's base offset = LogEndOffset and
	// partition leader epoch = LeaderEpoch() (outside the CRC), appends it and
	// returns the base offset. Used for control batches (ABORT,
	// MIRROR_PID_RESET) and for client writes. The argument is not modified
	// (a copy is stamped). While the log is ReadOnly a data (non-control)
	// batch is refused with an error Is(ErrReadOnly) and nothing is appended;
	// the check and the append are atomic with respect to SetReadOnly.
	AppendAsLeader(batch []byte) (baseOffset int64, err error)
	// SetReadOnly sets whether AppendAsLeader refuses data batches (client
	// writes). A mirror partition is read-only in every state but STOPPED.
	// Append (replication) and control batches are never refused. The flag is
	// not persisted by the log; its owner (the Destination) sets it after open.
	SetReadOnly(readOnly bool)
	// ReadOnly reports the flag set by SetReadOnly (false for a new log).
	ReadOnly() bool
	// Truncate removes every batch with base offset >= offset. A batch that
	// starts below offset but ends at or after it is kept whole (so
	// LogEndOffset becomes its next offset); when offset falls in a gap
	// between batches, LogEndOffset becomes offset. The epoch cache is cut
	// from the end (epoch.Cache.TruncateFromEnd) and producer state is
	// rebuilt from the kept batches; HighWatermark is capped at the new
	// LogEndOffset. Truncating at or beyond LogEndOffset is a no-op; an offset
	// at or below LogStartOffset behaves like TruncateFullyAndStartAt(offset)
	// (as Kafka's UnifiedLog.truncateTo does); a negative offset returns an
	// error Is(ErrOffsetOutOfRange).
	Truncate(offset int64) error
	// TruncateFullyAndStartAt empties the log; LogStart = LogEnd =
	// HighWatermark = offset. The epoch cache and producer state are cleared.
	// A negative offset returns an error Is(ErrOffsetOutOfRange).
	TruncateFullyAndStartAt(offset int64) error
	// LogStartOffset is the first offset of the log.
	LogStartOffset() int64
	// LogEndOffset is the next offset to be written.
	LogEndOffset() int64
	// HighWatermark is, for these single-replica logs, advanced to
	// LogEndOffset on append (after the flush the fsync policy requires).
	HighWatermark() int64
	// LastStableOffset is the first offset of the oldest open transaction,
	// else HighWatermark (and never above HighWatermark).
	LastStableOffset() int64
	// OpenTransactions lists the open transactions ordered by FirstOffset.
	OpenTransactions() []OpenTxn
	// Read returns whole batches starting with the batch containing offset
	// (or the first batch after offset, when offset falls in a gap); at least
	// one batch even if it is larger than maxBytes; empty (nil, nil) at
	// LogEndOffset; an error Is(ErrOffsetOutOfRange) outside
	// [LogStartOffset, LogEndOffset].
	Read(offset int64, maxBytes int) ([]byte, error)
	// Epochs returns a CLONE of the leader-epoch cache; mutating it does not
	// affect the log.
	Epochs() *epoch.Cache
	// EndOffsetForEpoch is epoch.Cache.EndOffsetFor with this log's end.
	EndOffsetForEpoch(e int32) (int32, int64)
	// LatestEpoch is the latest epoch in the log's cache, -1 if none.
	LatestEpoch() int32
	// LeaderEpoch is the destination partition's current leader epoch
	// (host-owned), -1 before the first BumpLeaderEpoch.
	LeaderEpoch() int32
	// BumpLeaderEpoch sets the leader epoch to max(LeaderEpoch()+1, min+1),
	// durably, and returns it.
	BumpLeaderEpoch(min int32) (int32, error)
	// Flush makes everything appended so far durable (per implementation).
	Flush() error
	// Close releases resources. Calling Close twice returns ErrClosed.
	Close() error
}

// DataSyncer is implemented by a Log whose Flush also writes bookkeeping
// (FileLog: the recovery point, the leader-epoch checkpoint) that a caller
// who only needs its appended batches durable can leave for later: SyncData
// makes everything appended so far durable and writes nothing else.
type DataSyncer interface {
	SyncData() error
}

// UnsyncedBumper is implemented by a Log (FileLog) whose leader-epoch bump can be made
// durable by the next SyncAppended, together with the batches appended after it, in
// one sync. A crash before that sync may lose the bump and keep those batches; the
// Log then comes back with its leader epoch at the epoch of its last batch. A STOPPING
// uses it: its bump is followed by the barrier, appended at the new epoch and synced.
type UnsyncedBumper interface {
	BumpLeaderEpochUnsynced(min int32) (int32, error)
}

var _ UnsyncedBumper = (*FileLog)(nil)

// SyncAppended makes what was appended to l durable: SyncData when l is a
// DataSyncer, else Flush.
func SyncAppended(l Log) error {
	if s, ok := l.(DataSyncer); ok {
		return s.SyncData()
	}
	return l.Flush()
}
