package fetcher

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/epoch"
)

// Errors of the fetch loop.
var (
	// ErrCorruptBatch is the sentinel of every *CorruptBatchError.
	ErrCorruptBatch = errors.New("fetcher: corrupt batch from source")
	// ErrEpochFencing is the sentinel of every *EpochFencingError.
	ErrEpochFencing = errors.New("fetcher: batch leader epoch above destination leader epoch")
	// ErrDiverged is the sentinel of every *DivergedError.
	ErrDiverged = errors.New("fetcher: log diverged from the source")
	// ErrFetcherClosed is returned by a closed Fetcher.
	ErrFetcherClosed = errors.New("fetcher: fetcher closed")
	// ErrDuplicatePartition is returned by Add for a partition already fetched.
	ErrDuplicatePartition = errors.New("fetcher: partition already added")
)

// CorruptBatchError says why and where a fetched batch was refused. It is
// Is(ErrCorruptBatch) and wraps the records error when there is one.
type CorruptBatchError struct {
	TopicPartition
	Offset int64 // base offset of the bad batch, or the expected offset when unknown
	Reason string
	Err    error
}

// Error names the partition, the offset and the reason.
func (e *CorruptBatchError) Error() string {
	return fmt.Sprintf("fetcher: corrupt batch from source %s at offset %d: %s", e.TopicPartition, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorruptBatch.
func (e *CorruptBatchError) Is(target error) bool { return target == ErrCorruptBatch }

// Unwrap returns the underlying error.
func (e *CorruptBatchError) Unwrap() error { return e.Err }

// EpochFencingError reports spec §7.3 rule 1: a batch's PartitionLeaderEpoch is
// above the destination leader epoch. It is Is(ErrEpochFencing).
type EpochFencingError struct {
	TopicPartition
	Offset     int64
	BatchEpoch int32
	LocalEpoch int32
}

// Error names the partition, the batch and both leader epochs.
func (e *EpochFencingError) Error() string {
	return fmt.Sprintf("fetcher: %s batch at offset %d has leader epoch %d above the destination leader epoch %d",
		e.TopicPartition, e.Offset, e.BatchEpoch, e.LocalEpoch)
}

// Is reports whether target is ErrEpochFencing.
func (e *EpochFencingError) Is(target error) bool { return target == ErrEpochFencing }

// DivergedError is the Status.Err of a partition stopped after a divergence
// truncation because Config.StopOnDivergence is set. It is Is(ErrDiverged).
type DivergedError struct {
	TopicPartition
	Divergence  epoch.Divergence
	TruncatedTo int64
}

// Error names the partition, the divergence and the truncation offset.
func (e *DivergedError) Error() string {
	return fmt.Sprintf("fetcher: %s diverged from the source (epoch %d, end offset %d); truncated to %d",
		e.TopicPartition, e.Divergence.Epoch, e.Divergence.EndOffset, e.TruncatedTo)
}

// Is reports whether target is ErrDiverged.
func (e *DivergedError) Is(target error) bool { return target == ErrDiverged }

// InvalidOffsetError stops a partition whose source answered an offset no
// log can have (below -1 for a DivergingEpoch or OffsetForLeaderEpoch end
// offset, below 0 for a ListOffsets end) where the loop would truncate the
// destination log to it; nothing is truncated. It is Is(ErrProtocol).
type InvalidOffsetError struct {
	TopicPartition
	Op     string // the answer: "Fetch" (DivergingEpoch), "OffsetForLeaderEpoch" or "ListOffsets"
	Offset int64
}

// Error names the partition, the answer and the offset.
func (e *InvalidOffsetError) Error() string {
	return fmt.Sprintf("%v: %s answered offset %d for %s, which no log has", ErrProtocol, e.Op, e.Offset, e.TopicPartition)
}

// Is reports whether target is ErrProtocol.
func (e *InvalidOffsetError) Is(target error) bool { return target == ErrProtocol }
