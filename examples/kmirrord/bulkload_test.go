package main

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBulkLoadDefaultProducer (Bar): a kgo producer with default settings
// (100 MiB max request, 1 MB batches; records placed round-robin by a manual
// partitioner, a 200 ms linger so batches fill) bulk-loading 64 partitions
// sends Produce requests of one batch per partition (about 16 MiB); every record is acknowledged
// (nothing hangs) and is in the topic afterwards.
func TestBulkLoadDefaultProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("produces 190 MiB")
	}
	d := startRun(t, "-listen", "127.0.0.1:0", "-data", filepath.Join(t.TempDir(), "site"))
	var maxProduce atomic.Int64
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr), kgo.DefaultProduceTopic("bulk"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(200*time.Millisecond), kgo.WithHooks(produceSizeHook{max: &maxProduce}))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const partitions = 64
	admin, err := kgo.NewClient(kgo.SeedBrokers(d.addr))
	require.NoError(t, err)
	defer admin.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "bulk", partitions, 1
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	cresp, err := ct.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Zero(t, cresp.Topics[0].ErrorCode)
	const records, size = 1920, 100 << 10
	value := make([]byte, size)
	_, _ = rand.Read(value)
	var wg sync.WaitGroup
	var acked atomic.Int64
	var firstErr atomic.Value
	for i := range records {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value, Partition: int32(i % partitions)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			acked.Add(1)
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Fatalf("a record was not acknowledged: %v", err)
	}
	require.Equal(t, int64(records), acked.Load())
	t.Logf("largest Produce request: %.1f MiB", float64(maxProduce.Load())/(1<<20))
	require.Greater(t, maxProduce.Load(), int64(12<<20), "the load must make Produce requests over 12 MiB")

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "bulk"
	for p := range int32(partitions) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	loResp, err := lo.RequestWith(ctx, admin)
	require.NoError(t, err)
	var total int64
	for _, p := range loResp.Topics[0].Partitions {
		require.Zero(t, p.ErrorCode)
		total += p.Offset
	}
	require.Equal(t, int64(records), total)
}

// produceSizeHook records the largest Produce request written.
type produceSizeHook struct{ max *atomic.Int64 }

func (h produceSizeHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytesWritten int, _, _ time.Duration, _ error) {
	if key != int16(kmsg.Produce) {
		return
	}
	for {
		cur := h.max.Load()
		if int64(bytesWritten) <= cur || h.max.CompareAndSwap(cur, int64(bytesWritten)) {
			return
		}
	}
}
