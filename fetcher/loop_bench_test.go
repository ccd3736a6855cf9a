package fetcher

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// spreadLeaders reports partition p as led by broker p % n.
type spreadLeaders struct {
	Source
	n int32
}

func (s spreadLeaders) PartitionInfo(ctx context.Context, topic string, partition int32, refresh bool) (PartitionInfo, error) {
	info, err := s.Source.PartitionInfo(ctx, topic, partition, refresh)
	info.Leader = partition % s.n
	return info, err
}

// countEvents counts partitions whose log end reached want.
type countEvents struct {
	NopEvents
	want int64
	left atomic.Int64
	done chan struct{}
}

func (c *countEvents) OnProgress(_ TopicPartition, p Progress) {
	if p.LogEndOffset == c.want && c.left.Add(-1) == 0 {
		close(c.done)
	}
}

// BenchmarkFetcherManyPartitions measures the loop's own cost per partition:
// a Fetcher mirrors parts partitions spread over 10 source leaders, one
// small batch per fetch each (LocalSource, MemoryLogs), until every
// partition holds its rounds batches; ns/batch is the time per mirrored batch.
func BenchmarkFetcherManyPartitions(b *testing.B) {
	for _, parts := range []int{100, 2000} {
		b.Run(strconv.Itoa(parts), func(b *testing.B) {
			const rounds = 20
			one := batch(b, 0, 0, 1, records.CompressionNone)
			local := NewLocalSource(ReadUncommitted)
			for p := range parts {
				l := memLog(b, 0)
				for r := range int64(rounds) {
					bt := append([]byte(nil), one...)
					records.Batch(bt).SetBaseOffset(r)
					require.NoError(b, l.Append(bt))
				}
				local.Add("t", records.UUID{}, int32(p), l)
			}
			src := spreadLeaders{Source: local, n: 10}
			b.ResetTimer()
			for range b.N {
				ev := &countEvents{want: rounds, done: make(chan struct{})}
				ev.left.Store(int64(parts))
				// One batch per fetch: the partition max is below a batch, so
				// each answer carries the first batch only (KIP-74).
				f, err := NewFetcher(src, Config{Events: ev, PartitionMaxBytes: 1})
				require.NoError(b, err)
				specs := make([]PartitionSpec, parts)
				for p := range specs {
					specs[p] = PartitionSpec{Topic: "t", Partition: int32(p), Log: memLog(b, 1)}
				}
				require.NoError(b, f.Add(specs...))
				<-ev.done
				require.NoError(b, f.Close())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*parts*rounds), "ns/batch")
		})
	}
}
