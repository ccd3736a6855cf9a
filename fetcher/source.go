package fetcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// Kafka protocol error codes the fetch path acts on. They are kept here, not
// taken from the admin package, so that fetcher depends only on what DESIGN.md
// §3 allows.
const (
	CodeNone                    int16 = 0
	CodeOffsetOutOfRange        int16 = 1
	CodeCorruptMessage          int16 = 2
	CodeUnknownTopicOrPartition int16 = 3
	CodeLeaderNotAvailable      int16 = 5
	CodeNotLeaderOrFollower     int16 = 6
	CodeRequestTimedOut         int16 = 7
	CodeNetworkException        int16 = 13
	CodeKafkaStorageError       int16 = 56
	CodeFencedLeaderEpoch       int16 = 74
	CodeUnknownLeaderEpoch      int16 = 75
	CodeOffsetNotAvailable      int16 = 78
	CodeUnknownTopicID          int16 = 100
	CodeInconsistentTopicID     int16 = 103
)

// Timestamps understood by Source.ListOffsets.
const (
	EarliestTimestamp int64 = -2 // the log start offset
	LatestTimestamp   int64 = -1 // the high watermark (read_uncommitted) or LSO (read_committed)
)

// Isolation levels of a fetch.
const (
	ReadUncommitted int8 = 0 // fetch up to the high watermark (the KIP's choice, spec §7.1)
	ReadCommitted   int8 = 1 // fetch up to the last stable offset
)

var (
	// ErrUnknownPartition is returned when a source knows nothing about a partition.
	ErrUnknownPartition = errors.New("fetcher: unknown partition")
	// ErrNoLeader is returned when the source metadata names no leader for a partition.
	ErrNoLeader = errors.New("fetcher: no leader for partition")
	// ErrSourceClosed is returned by a closed source.
	ErrSourceClosed = errors.New("fetcher: source closed")
	// ErrProtocol is returned when a source's answer does not match its request.
	ErrProtocol = errors.New("fetcher: protocol error")
)

// TopicPartition names one source partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition", as Kafka prints partitions.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// FetchPartition is one partition of a Fetch request.
type FetchPartition struct {
	Topic   string
	TopicID records.UUID // needed by Kafka sources for Fetch v13+; zero when unknown
	// Partition is the partition index.
	Partition int32
	// FetchOffset is the first offset wanted (the destination log end).
	FetchOffset int64
	// LastFetchedEpoch is the latest epoch of the destination log, -1 for none.
	LastFetchedEpoch int32
	// CurrentLeaderEpoch is the source leader epoch known from metadata, -1 = not given.
	CurrentLeaderEpoch int32
	// MaxBytes bounds the bytes returned for this partition (at least one batch is returned).
	MaxBytes int32
}

// TP returns the partition's TopicPartition.
func (p FetchPartition) TP() TopicPartition { return TopicPartition{p.Topic, p.Partition} }

// FetchResult is a source's answer for one partition.
type FetchResult struct {
	Topic     string
	Partition int32
	// ErrorCode is a Kafka error code; CodeNone on success.
	ErrorCode        int16
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// DivergingEpoch is set when the source found the fetcher's log diverged
	// (Fetch v12+); Records is then empty.
	DivergingEpoch *epoch.Divergence
	// Records holds raw v2 batches exactly as served; the last one may be partial.
	Records []byte
	// Unchanged is set when an incremental fetch session's answer did not
	// name the partition: nothing moved since the session's last answer for
	// it (no records; HighWatermark, LastStableOffset and LogStartOffset are
	// that answer's). The loop then only records that the source answered.
	Unchanged bool
}

// TP returns the result's TopicPartition.
func (r FetchResult) TP() TopicPartition { return TopicPartition{r.Topic, r.Partition} }

// EpochQuery asks for the end offset of LeaderEpoch (OffsetForLeaderEpoch).
type EpochQuery struct {
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32 // -1 = not given
	LeaderEpoch        int32
}

// EpochResult answers one EpochQuery with Kafka's (epoch, end offset) rule;
// (-1, -1) when the source does not know the epoch.
type EpochResult struct {
	Topic       string
	Partition   int32
	ErrorCode   int16
	LeaderEpoch int32
	EndOffset   int64
}

// OffsetQuery asks for the offset at Timestamp (EarliestTimestamp or LatestTimestamp).
type OffsetQuery struct {
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32 // -1 = not given
	Timestamp          int64
}

// OffsetResult answers one OffsetQuery.
type OffsetResult struct {
	Topic       string
	Partition   int32
	ErrorCode   int16
	Offset      int64
	LeaderEpoch int32 // epoch of the offset's batch, -1 if unknown
}

// PartitionInfo is what source metadata says about a partition.
type PartitionInfo struct {
	TopicID     records.UUID
	Leader      int32 // broker id, -1 if none
	LeaderEpoch int32 // -1 if unknown
}

// Source serves a set of source partitions with a Kafka partition leader's
// rules. Implementations are safe for concurrent use; each call may block on
// the network and honours ctx.
type Source interface {
	// Fetch reads from each partition. A partition-level problem is reported in
	// its FetchResult.ErrorCode; the error return is for failures of the whole
	// call (ctx cancelled, source closed). Results come in request order, one per
	// partition.
	Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error)
	// OffsetForLeaderEpoch returns the end offset of each requested epoch.
	OffsetForLeaderEpoch(ctx context.Context, qs []EpochQuery) ([]EpochResult, error)
	// ListOffsets returns the earliest or latest offset of each partition.
	ListOffsets(ctx context.Context, qs []OffsetQuery) ([]OffsetResult, error)
	// PartitionInfo returns the partition's leader and leader epoch from
	// metadata; refresh forces a metadata round trip instead of a cached answer.
	PartitionInfo(ctx context.Context, topic string, partition int32, refresh bool) (PartitionInfo, error)
}

// EpochProber is implemented by sources that never return DivergingEpoch in
// Fetch responses (kfake, brokers older than Kafka 2.7). For them the fetch loop
// finds divergence with OffsetForLeaderEpoch before the first fetch after every
// leader change, as Kafka followers did before Fetch v12.
type EpochProber interface {
	DivergenceViaOffsetForLeaderEpoch() bool
}

// retriableFetchCode reports whether a partition error clears after a metadata
// refresh and a retry.
func retriableFetchCode(code int16) bool {
	switch code {
	case CodeNotLeaderOrFollower, CodeFencedLeaderEpoch, CodeUnknownLeaderEpoch, CodeLeaderNotAvailable,
		CodeUnknownTopicOrPartition, CodeRequestTimedOut, CodeNetworkException, CodeKafkaStorageError,
		CodeOffsetNotAvailable, CodeUnknownTopicID, CodeInconsistentTopicID:
		return true
	}
	return false
}

// SourceError is a partition-level error code returned by a source.
type SourceError struct {
	TopicPartition
	Op   string
	Code int16
}

// Error names the operation, the partition and the source error code.
func (e *SourceError) Error() string {
	return fmt.Sprintf("fetcher: %s %s: source error code %d", e.Op, e.TopicPartition, e.Code)
}
