package fetcher

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/kmirror/kmirror/records"
)

// BenchmarkCeilingKafka measures, against a real Kafka topic, kmirror and the
// two bounds it is judged against, in one process and interleaved by -count:
//   - raw-discard: one goroutine per leader fetching (kmirror's sizes) and
//     discarding the bytes, the fetch ceiling;
//   - raw-write: the same, plus a pwrite of every partition's fetched bytes to
//     its own file: the realistic ceiling of any mirror that stores the bytes
//     (a dd of the fetched data); raw-write-fsync also fsyncs each file at the
//     end;
//   - kmirror: KafkaSource + Fetcher into FileLogs (FsyncOnFlush) until every
//     log holds the data, as BenchmarkMirror; kmirror-fsync also Flushes every
//     log at the end.
//
// Closing a log (FsyncOnFlush fsyncs what is left) is outside the timed part
// of kmirror, and each iteration's files are removed, as in BenchmarkMirror.
//
// Set KMIRROR_PERF_BROKERS (comma-separated) and KMIRROR_PERF_TOPIC (a filled
// topic, e.g. one kept by the bench program's -keep-topics); skipped
// otherwise. Metrics: MB/s of source bytes and cpu-s/GB (getrusage of the
// whole process, user+sys).
func BenchmarkCeilingKafka(b *testing.B) {
	brokers, topic := os.Getenv("KMIRROR_PERF_BROKERS"), os.Getenv("KMIRROR_PERF_TOPIC")
	if brokers == "" || topic == "" {
		b.Skip("KMIRROR_PERF_BROKERS and KMIRROR_PERF_TOPIC not set")
	}
	seeds := strings.Split(brokers, ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(b, err)
	defer cl.Close()
	ctx := context.Background()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	require.NoError(b, err)
	require.Len(b, mresp.Topics, 1)
	id := records.UUID(mresp.Topics[0].TopicID)
	leaders := map[int32][]int32{}
	nparts := len(mresp.Topics[0].Partitions)
	for _, p := range mresp.Topics[0].Partitions {
		leaders[p.Leader] = append(leaders[p.Leader], p.Partition)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for p := range nparts {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = int32(p), -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	ends := make([]int64, nparts)
	for _, sh := range cl.RequestSharded(ctx, lo) {
		require.NoError(b, sh.Err)
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				ends[p.Partition] = p.Offset
			}
		}
	}

	// rawCopy fetches everything; write (may be nil) gets each partition's bytes.
	rawCopy := func(write func(p int32, buf []byte) error) int64 {
		var mu sync.Mutex
		var total int64
		g, gctx := errgroup.WithContext(ctx)
		for leader, parts := range leaders {
			g.Go(func() error {
				next := map[int32]int64{}
				var n int64
				for {
					req := kmsg.NewPtrFetchRequest()
					req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 500, 1, DefaultResponseMaxBytes, -1
					rt := kmsg.NewFetchRequestTopic()
					rt.Topic, rt.TopicID = topic, [16]byte(id)
					for _, p := range parts {
						if next[p] < ends[p] {
							rp := kmsg.NewFetchRequestTopicPartition()
							rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = p, next[p], -1, -1
							rp.LogStartOffset, rp.PartitionMaxBytes = -1, DefaultPartitionMaxBytes
							rt.Partitions = append(rt.Partitions, rp)
						}
					}
					if len(rt.Partitions) == 0 {
						break
					}
					req.Topics = append(req.Topics, rt)
					resp, err := req.RequestWith(gctx, cl.Broker(int(leader)))
					if err != nil {
						return err
					}
					for _, t := range resp.Topics {
						for _, rp := range t.Partitions {
							it := records.NewIterator(rp.RecordBatches)
							for it.Next() {
								next[rp.Partition] = it.Batch().NextOffset()
							}
							whole := rp.RecordBatches[:it.Pos()]
							n += int64(len(whole))
							if write != nil && len(whole) > 0 {
								if err := write(rp.Partition, whole); err != nil {
									return err
								}
							}
						}
					}
				}
				mu.Lock()
				total += n
				mu.Unlock()
				return nil
			})
		}
		require.NoError(b, g.Wait())
		return total
	}

	// run times copyOnce b.N times; the cleanup it returns (may be nil) runs
	// untimed.
	run := func(b *testing.B, copyOnce func(dir string) (int64, func())) {
		var bytes int64
		var cpu, wall time.Duration
		for range b.N {
			b.StopTimer()
			dir := b.TempDir()
			before := rusage(b)
			t0 := time.Now()
			b.StartTimer()
			var cleanup func()
			bytes, cleanup = copyOnce(dir)
			b.StopTimer()
			wall += time.Since(t0)
			cpu += rusage(b) - before
			if cleanup != nil {
				cleanup()
			}
			require.NoError(b, os.RemoveAll(dir))
			b.StartTimer()
		}
		b.SetBytes(bytes)
		b.ReportMetric(cpu.Seconds()/(float64(bytes)*float64(b.N)/1e9), "cpu-s/GB")
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/wall.Seconds(), "MB/s-wall")
	}

	b.Run("raw-discard", func(b *testing.B) {
		run(b, func(string) (int64, func()) { return rawCopy(nil), nil })
	})
	for _, fsync := range []bool{false, true} {
		b.Run(name("raw-write", fsync), func(b *testing.B) {
			run(b, func(dir string) (int64, func()) {
				files := make([]*os.File, nparts)
				offs := make([]int64, nparts)
				for p := range files {
					f, err := os.Create(filepath.Join(dir, strconv.Itoa(p)))
					require.NoError(b, err)
					files[p] = f
				}
				n := rawCopy(func(p int32, buf []byte) error {
					_, err := files[p].WriteAt(buf, offs[p])
					offs[p] += int64(len(buf))
					return err
				})
				for _, f := range files {
					if fsync {
						require.NoError(b, f.Sync())
					}
					require.NoError(b, f.Close())
				}
				return n, nil
			})
		})
	}
	for _, flush := range []bool{false, true} {
		b.Run(name("kmirror", flush), func(b *testing.B) {
			run(b, func(dir string) (int64, func()) {
				src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: seeds})
				require.NoError(b, err)
				defer func() { require.NoError(b, src.Close()) }()
				ev := &doneEvents{pending: map[TopicPartition]int64{}, done: make(chan struct{})}
				logs := make([]*FileLog, nparts)
				specs := make([]PartitionSpec, nparts)
				for p := range logs {
					l, err := OpenFileLog(PartitionDir(dir, topic, int32(p)), FileLogOptions{})
					require.NoError(b, err)
					_, err = l.BumpLeaderEpoch(1000)
					require.NoError(b, err)
					logs[p] = l
					specs[p] = PartitionSpec{Topic: topic, Partition: int32(p), Log: l}
					ev.pending[TopicPartition{topic, int32(p)}] = ends[p]
				}
				f, err := NewFetcher(src, Config{Events: ev})
				require.NoError(b, err)
				require.NoError(b, f.Add(specs...))
				<-ev.done
				require.NoError(b, f.Close())
				var n int64
				for _, l := range logs {
					if flush {
						require.NoError(b, l.Flush())
					}
					n += l.active().size
				}
				return n, func() {
					for _, l := range logs {
						require.NoError(b, l.Close())
					}
				}
			})
		})
	}
}

// name suffixes "-fsync" to a contender that makes its bytes durable.
func name(contender string, fsync bool) string {
	if fsync {
		return contender + "-fsync"
	}
	return contender
}

func rusage(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
