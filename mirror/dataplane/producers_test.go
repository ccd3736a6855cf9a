package dataplane

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// plainLog hides every optional interface of the log it wraps (a host's Log
// that keeps no producer state).
type plainLog struct{ fetcher.Log }

// plainLogs is a destination whose logs are plainLogs.
type plainLogs struct{ *mirror.LocalDestination }

func (d plainLogs) Log(topic string, p int32) (fetcher.Log, error) {
	l, err := d.LocalDestination.Log(topic, p)
	if err != nil {
		return nil, err
	}
	return plainLog{l}, nil
}

// mirroredLog fills topic-0 of dst with n mirrored idempotent batches of
// producer 9 (sequences 0..n-1), as the fetcher appends them.
func mirroredLog(t testing.TB, dst *mirror.LocalDestination, topic string, n int) {
	t.Helper()
	require.NoError(t, dst.CreateTopic(context.Background(), mirror.TopicSpec{Name: topic, TopicID: records.UUID{7, byte(len(topic))}, Partitions: 1}))
	l, err := dst.Log(topic, 0)
	require.NoError(t, err)
	_, err = l.BumpLeaderEpoch(-1)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		require.NoError(t, l.Append(dataBatch(t, int64(i), 0, 1, 9, int32(i), false)))
	}
}

// TestProducerStateFromLog: after a failover (a new data plane over a log
// the mirror filled), producer 9's next batch, a retry of its last one and
// a gap are judged by the log's own producer state; a Log that keeps none
// gets the same answers from the state rebuilt from its headers.
func TestProducerStateFromLog(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			local := mirror.NewMemoryDestination("c", fetcher.MemoryLogOptions{})
			defer func() { _ = local.Close() }()
			var dst mirror.Destination = local
			if plain {
				dst = plainLogs{local}
			}
			mirroredLog(t, local, "t", 10)
			dp, err := New(Config{Destination: dst, AdvertisedHost: "h", AdvertisedPort: 1, ProducerIDs: local})
			require.NoError(t, err)
			defer func() { require.NoError(t, dp.Close()) }()
			send := func(seq int32) kmsg.ProduceResponseTopicPartition {
				return serve[*kmsg.ProduceResponse](t, dp, produceReq("t", 0, dataBatch(t, 0, 0, 1, 9, seq, false))).Topics[0].Partitions[0]
			}
			require.Equal(t, codeOutOfOrderSequence, send(12).ErrorCode)
			p := send(9) // a retry of the mirrored last batch: its offset, nothing appended
			require.Equal(t, [2]int64{0, 9}, [2]int64{int64(p.ErrorCode), p.BaseOffset})
			p = send(10)
			require.Equal(t, [2]int64{0, 10}, [2]int64{int64(p.ErrorCode), p.BaseOffset})
			p = send(10) // the retry of the batch this data plane appended
			require.Equal(t, [2]int64{0, 10}, [2]int64{int64(p.ErrorCode), p.BaseOffset})
			l, err := local.Log("t", 0)
			require.NoError(t, err)
			require.Equal(t, int64(11), l.LogEndOffset())
			// The barrier of a stop expires the mirrored producer.
			_, err = l.AppendAsLeader(records.BuildControlBatch(records.ControlBatchSpec{ProducerID: -1, ProducerEpoch: -1, Type: records.ControlMirrorPIDReset}))
			require.NoError(t, err)
			require.Equal(t, int16(0), send(500).ErrorCode, "an unknown producer may start anywhere")
		})
	}
}

// BenchmarkFirstProduceAfterFailover: the first idempotent produce of a new
// data plane over a partition holding n mirrored batches; with the log's
// producer state it reads nothing, the rebuilt state reads every header.
func BenchmarkFirstProduceAfterFailover(b *testing.B) {
	for _, plain := range []bool{false, true} {
		for _, n := range []int{1000, 20000} {
			b.Run(fmt.Sprintf("plain=%v/batches=%d", plain, n), func(b *testing.B) {
				local := mirror.NewMemoryDestination("c", fetcher.MemoryLogOptions{})
				defer func() { _ = local.Close() }()
				var dst mirror.Destination = local
				if plain {
					dst = plainLogs{local}
				}
				mirroredLog(b, local, "t", n)
				retry := produceReq("t", 0, dataBatch(b, 0, 0, 1, 9, int32(n-1), false)) // a duplicate: appends nothing
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					dp, err := New(Config{Destination: dst, AdvertisedHost: "h", AdvertisedPort: 1, ProducerIDs: local, TransactionCheckInterval: 1 << 40})
					if err != nil {
						b.Fatal(err)
					}
					r, err := dp.Serve(context.Background(), retry)
					if err != nil || r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode != 0 {
						b.Fatal(err)
					}
					_ = dp.Close()
				}
			})
		}
	}
}
