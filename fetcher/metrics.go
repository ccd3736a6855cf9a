package fetcher

import (
	"time"

	"github.com/kmirror/kmirror/epoch"
)

// Progress is reported after every fetch response that a partition processed.
type Progress struct {
	// Lag is max(0, source high watermark − destination log end offset), in offsets.
	Lag int64
	// Bytes is the number of record-batch bytes appended by this response.
	Bytes int64
	// SourceHighWatermark and LogEndOffset are the two sides of Lag.
	SourceHighWatermark int64
	LogEndOffset        int64
	// Records is the number of records in the batches appended by this response.
	Records int64
	// MaxTimestamp is the largest batch MaxTimestamp (Unix milliseconds) of the
	// batches appended by this response, or -1 when nothing was appended.
	MaxTimestamp int64
}

// Events receives what happens to mirrored partitions. Calls come from the
// fetch loop's goroutine and must not block for long; implementations must be
// safe for concurrent use when several Fetchers share one.
type Events interface {
	// OnDivergence reports a truncation caused by a DivergingEpoch (or by the
	// OffsetForLeaderEpoch probe); the reconciler may enter ULE_LOG_TRUNCATION.
	OnDivergence(tp TopicPartition, d epoch.Divergence, truncatedTo int64)
	// OnOutOfRange reports that the source no longer holds the fetch offset;
	// Gap offsets (the difference to the source log start) will never be mirrored.
	OnOutOfRange(tp TopicPartition, fetchOffset, sourceLogStart, gap int64)
	// OnEpochFencing reports a batch whose leader epoch is above the destination
	// leader epoch; the partition has been stopped (spec §7.3 rule 1).
	OnEpochFencing(tp TopicPartition, batchEpoch, localEpoch int32)
	// OnFailed reports that the partition was removed with err.
	OnFailed(tp TopicPartition, err error)
	// OnProgress reports lag and throughput after every processed response.
	OnProgress(tp TopicPartition, p Progress)
}

// FetchRound is one Fetch round trip to one source broker, as reported to a
// FetchObserver.
type FetchRound struct {
	// Leader is the source broker the Fetch went to (-1 when unknown).
	Leader int32
	// Partitions is the number of partitions in the request.
	Partitions int
	// Latency is the time from sending the request to its answer (long-poll
	// wait included, as in Kafka's fetch request time).
	Latency time.Duration
	// Err is the failure of the whole request, nil when the source answered.
	Err error
	// ErrorCodes holds the partition-level error codes of the answer, one per
	// partition in error (OFFSET_OUT_OF_RANGE included).
	ErrorCodes []int16
}

// FetchObserver is optionally implemented by an Events: the loop then also
// reports every Fetch round trip and every partition-level failure it retries.
// Calls come from the fetch loop's goroutine, like the other events; fetches
// cancelled by Add, Remove or Close are not reported.
type FetchObserver interface {
	// OnFetch reports one answered or failed Fetch round trip.
	OnFetch(r FetchRound)
	// OnPartitionError reports that a partition could not be fetched now (a
	// failed Fetch, metadata, OffsetForLeaderEpoch or ListOffsets call, or a
	// partition error code, as a *SourceError) and will be retried. The next
	// OnProgress of the partition means it is fetched again.
	OnPartitionError(tp TopicPartition, err error)
}

// NopEvents ignores every event.
type NopEvents struct{}

// OnDivergence implements Events.
func (NopEvents) OnDivergence(TopicPartition, epoch.Divergence, int64) {}

// OnOutOfRange implements Events.
func (NopEvents) OnOutOfRange(TopicPartition, int64, int64, int64) {}

// OnEpochFencing implements Events.
func (NopEvents) OnEpochFencing(TopicPartition, int32, int32) {}

// OnFailed implements Events.
func (NopEvents) OnFailed(TopicPartition, error) {}

// OnProgress implements Events.
func (NopEvents) OnProgress(TopicPartition, Progress) {}
