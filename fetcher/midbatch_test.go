package fetcher

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// midBatchStartSource serves a log whose start offset (logStart) lies inside a batch, as
// Kafka does after retention or DeleteRecords cut mid-batch: fetches below it are out of
// range, the earliest offset is logStart, and a fetch at logStart returns the whole batch
// that contains it.
type midBatchStartSource struct {
	*LocalSource
	logStart int64
}

func (s midBatchStartSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	res, err := s.LocalSource.Fetch(ctx, parts)
	for i := range res {
		res[i].LogStartOffset = s.logStart
		if parts[i].FetchOffset < s.logStart {
			res[i].ErrorCode, res[i].Records = CodeOffsetOutOfRange, nil
		}
	}
	return res, err
}

func (s midBatchStartSource) ListOffsets(ctx context.Context, qs []OffsetQuery) ([]OffsetResult, error) {
	res, err := s.LocalSource.ListOffsets(ctx, qs)
	for i := range res {
		if qs[i].Timestamp == EarliestTimestamp {
			res[i].Offset = s.logStart
		}
	}
	return res, err
}

// TestFetcherSourceLogStartInsideBatch: the destination starts at the base offset of the
// batch that holds the source's log start and mirrors it whole, instead of failing the
// partition with an overlap.
func TestFetcherSourceLogStartInsideBatch(t *testing.T) {
	src := memLog(t, 0)
	appendAll(t, src, batch(t, 0, 0, 10, records.CompressionNone), batch(t, 10, 0, 10, records.CompressionLZ4))
	local := NewLocalSource(ReadUncommitted)
	local.Add("t", records.UUID{3}, 0, src)
	dst := memLog(t, 2)
	ev := newRecorder()
	f, err := NewFetcher(midBatchStartSource{LocalSource: local, logStart: 12}, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: dst}))
	ev.waitUntil(t, waitLong, "mirrored from inside the batch", func() bool { return dst.LogEndOffset() == 20 })
	require.Nil(t, ev.failure(TopicPartition{"t", 0}))
	require.Equal(t, int64(10), dst.LogStartOffset(), "starts at the batch's base offset")
	bs := allBatches(t, dst)
	require.Len(t, bs, 1)
	want, err := src.Read(10, 1<<20)
	require.NoError(t, err)
	require.Equal(t, []byte(want), []byte(bs[0]), "the batch byte for byte")
}
