package fetcher

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// benchData is one lz4 source shared by the mirror benchmarks.
type benchData struct {
	c        *kfake.Cluster
	topic    string
	parts    int32
	hw       []int64
	bytes    int64 // wire bytes of all batches
	messages int64
}

var (
	benchOnce sync.Once
	benchSrc  *benchData
	benchErr  error
)

// loadBench produces KMIRROR_BENCH_MB (default 32) MiB of 1 KB lz4 records
// into 4 partitions of an embedded kfake, once per process.
func loadBench(b *testing.B) *benchData {
	benchOnce.Do(func() { benchSrc, benchErr = makeBench() })
	require.NoError(b, benchErr)
	return benchSrc
}

func makeBench() (*benchData, error) {
	mb := 32
	if s := os.Getenv("KMIRROR_BENCH_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, err
		}
		mb = n
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "bench"))
	if err != nil {
		return nil, err
	}
	d := &benchData{c: c, topic: "bench", parts: 4}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("bench"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(512<<10))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewSource(1))
	const valSize = 1000
	for total := 0; total < mb<<20; {
		var recs []*kgo.Record
		for p := range d.parts {
			for range 500 {
				recs = append(recs, &kgo.Record{Partition: p, Value: value(rng, valSize)})
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			return nil, err
		}
		total += len(recs) * valSize
		d.messages += int64(len(recs))
	}
	for p := range d.parts {
		info := c.PartitionInfo("bench", p)
		d.hw = append(d.hw, info.HighWatermark)
		d.bytes += info.NumBytes
	}
	return d, nil
}

// doneEvents signals when every partition's log end reached its target.
type doneEvents struct {
	NopEvents
	mu      sync.Mutex
	pending map[TopicPartition]int64
	done    chan struct{}
}

func (d *doneEvents) OnProgress(tp TopicPartition, p Progress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if want, ok := d.pending[tp]; ok && p.LogEndOffset >= want {
		delete(d.pending, tp)
		if len(d.pending) == 0 {
			close(d.done)
		}
	}
}

func (d *doneEvents) OnFailed(tp TopicPartition, err error) {
	panic(fmt.Sprintf("%s failed: %v", tp, err))
}

func (d *doneEvents) OnDivergence(tp TopicPartition, _ epoch.Divergence, _ int64) {
	panic(fmt.Sprintf("%s diverged", tp))
}

func newBenchSource(b *testing.B, d *benchData) *KafkaSource {
	src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: d.c.ListenAddrs(), MaxWait: 10 * time.Millisecond})
	require.NoError(b, err)
	return src
}

// BenchmarkMirror compares, on the same lz4 data: kmirror mirroring into
// FileLogs; a raw fetch-and-discard loop over the same KafkaSource (the upper
// bound); a sarama consumer -> sarama producer copier into a second kfake.
// Bytes are the source's wire bytes.
func BenchmarkMirror(b *testing.B) {
	b.Run("kmirror-filelog", func(b *testing.B) {
		benchMirror(b, func(dir string, p int32) Log {
			l, err := OpenFileLog(filepath.Join(dir, strconv.Itoa(int(p))), FileLogOptions{})
			require.NoError(b, err)
			return l
		})
	})
	b.Run("kmirror-filelog-fsyncnever", func(b *testing.B) {
		// FsyncNever starts no writeback, so the pages of each iteration
		// never reach the disk: the same work as raw-fetch-write.
		benchMirror(b, func(dir string, p int32) Log {
			l, err := OpenFileLog(filepath.Join(dir, strconv.Itoa(int(p))), FileLogOptions{Fsync: FsyncNever})
			require.NoError(b, err)
			return l
		})
	})
	b.Run("kmirror-memlog", func(b *testing.B) {
		benchMirror(b, func(string, int32) Log { return NewMemoryLog(MemoryLogOptions{}) })
	})
	b.Run("raw-fetch-discard", func(b *testing.B) {
		d := loadBench(b)
		b.SetBytes(d.bytes)
		for range b.N {
			rawFetch(b, d, nil)
		}
	})
	b.Run("raw-fetch-write", func(b *testing.B) {
		// The realistic ceiling of a mirror that stores the bytes: the raw
		// loop plus one pwrite of every partition's fetched bytes to its own
		// fresh file (no CRC, no index, no fsync, as kmirror-filelog here).
		d := loadBench(b)
		b.SetBytes(d.bytes)
		for range b.N {
			b.StopTimer()
			dir := b.TempDir()
			files := make([]*os.File, d.parts)
			offs := make([]int64, d.parts)
			for p := range files {
				f, err := os.Create(filepath.Join(dir, strconv.Itoa(p)))
				require.NoError(b, err)
				files[p] = f
			}
			b.StartTimer()
			rawFetch(b, d, func(p int32, whole []byte) {
				_, err := files[p].WriteAt(whole, offs[p])
				require.NoError(b, err)
				offs[p] += int64(len(whole))
			})
			b.StopTimer()
			for _, f := range files {
				require.NoError(b, f.Close())
			}
			discardIterationFiles(b, dir)
			b.StartTimer()
		}
	})
	b.Run("sarama-copier", func(b *testing.B) {
		d := loadBench(b)
		b.SetBytes(d.bytes)
		for range b.N {
			b.StopTimer()
			dst, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(d.parts, d.topic))
			require.NoError(b, err)
			b.StartTimer()
			saramaCopy(b, d, dst)
			b.StopTimer()
			dst.Close()
			b.StartTimer()
		}
	})
}

// rawFetch fetches all of d once through a fresh KafkaSource, with the
// default partition size and one request at a time, handing each partition's
// whole batches of every answer to write (nil: discarded).
func rawFetch(b *testing.B, d *benchData, write func(p int32, whole []byte)) {
	ctx := context.Background()
	src := newBenchSource(b, d)
	next := make([]int64, d.parts)
	info, err := src.PartitionInfo(ctx, d.topic, 0, true)
	require.NoError(b, err)
	for {
		var reqs []FetchPartition
		for p := range d.parts {
			if next[p] < d.hw[p] {
				reqs = append(reqs, FetchPartition{Topic: d.topic, TopicID: info.TopicID, Partition: p, FetchOffset: next[p],
					LastFetchedEpoch: -1, CurrentLeaderEpoch: -1, MaxBytes: DefaultPartitionMaxBytes})
			}
		}
		if len(reqs) == 0 {
			break
		}
		res, err := src.Fetch(ctx, reqs)
		require.NoError(b, err)
		for i, r := range res {
			p := reqs[i].Partition
			it := records.NewIterator(r.Records)
			for it.Next() {
				next[p] = it.Batch().NextOffset()
			}
			if write != nil {
				write(p, r.Records[:it.Pos()])
			}
		}
	}
	require.NoError(b, src.Close())
}

// discardIterationFiles removes one iteration's files with the timer stopped,
// so that the next iteration writes into page cache the kernel has already
// used, as a long-running mirror does once its memory is warm (retention and
// reclaim recycle the pages). Without it every iteration of a b.N loop writes
// into never-touched memory; on a VM whose memory the host backs lazily and
// takes back through free page reporting (this project's CI machines), each
// fresh page costs a host fault and a page-cache write runs ~7x slower (430 MB/s
// against 3.3 GB/s for the same pwrites). KMIRROR_BENCH_KEEP_FILES=1 keeps
// every iteration's files to see that cost.
func discardIterationFiles(b *testing.B, dir string) {
	if os.Getenv("KMIRROR_BENCH_KEEP_FILES") == "" {
		require.NoError(b, os.RemoveAll(dir))
	}
}

// benchMirror mirrors the bench data from scratch b.N times into logs made by mk.
func benchMirror(b *testing.B, mk func(dir string, p int32) Log) {
	d := loadBench(b)
	b.SetBytes(d.bytes)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		src := newBenchSource(b, d)
		ev := &doneEvents{pending: map[TopicPartition]int64{}, done: make(chan struct{})}
		logs := make([]Log, d.parts)
		for p := range d.parts {
			l := mk(dir, p)
			_, err := l.BumpLeaderEpoch(1000)
			require.NoError(b, err)
			logs[p] = l
			ev.pending[TopicPartition{d.topic, p}] = d.hw[p]
		}
		f, err := NewFetcher(src, Config{Events: ev})
		require.NoError(b, err)
		specs := make([]PartitionSpec, d.parts)
		for p := range d.parts {
			specs[p] = PartitionSpec{Topic: d.topic, Partition: p, Log: logs[p]}
		}
		b.StartTimer()
		require.NoError(b, f.Add(specs...))
		<-ev.done
		b.StopTimer()
		require.NoError(b, f.Close())
		for _, l := range logs {
			require.NoError(b, l.Close())
		}
		require.NoError(b, src.Close())
		discardIterationFiles(b, dir)
		b.StartTimer()
	}
}

func saramaCopy(b *testing.B, d *benchData, dst *kfake.Cluster) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_7_0_0
	cfg.Consumer.Fetch.Default = 8 << 20
	cfg.Consumer.MaxWaitTime = 10 * time.Millisecond
	cfg.ChannelBufferSize = 4096
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.RequiredAcks = sarama.WaitForLocal
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Bytes = 512 << 10
	cfg.Producer.Flush.Frequency = time.Millisecond
	cfg.Producer.MaxMessageBytes = 900_000
	cons, err := sarama.NewConsumer(d.c.ListenAddrs(), cfg)
	require.NoError(b, err)
	defer cons.Close()
	prod, err := sarama.NewAsyncProducer(dst.ListenAddrs(), cfg)
	require.NoError(b, err)
	defer prod.Close()
	var wg sync.WaitGroup
	for p := range d.parts {
		pc, err := cons.ConsumePartition(d.topic, p, sarama.OffsetOldest)
		require.NoError(b, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.Close()
			for m := range pc.Messages() {
				prod.Input() <- &sarama.ProducerMessage{Topic: d.topic, Partition: p, Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(m.Value)}
				if m.Offset+1 >= d.hw[p] {
					return
				}
			}
		}()
	}
	var acked int64
	for acked < d.messages {
		select {
		case <-prod.Successes():
			acked++
		case err := <-prod.Errors():
			require.NoError(b, err)
		}
	}
	wg.Wait()
}
