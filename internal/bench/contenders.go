package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// runRaw is the ceiling: one goroutine per source leader sends raw kmsg Fetch
// requests (kmirror's sizes: 500 ms max wait, 64 MiB per response, 8 MiB per
// partition, read_uncommitted, no fetch session) for that leader's partitions,
// walks the batch headers to find the next offset and discards the bytes.
func runRaw(ctx context.Context, spec childSpec) (childResult, error) {
	cl, err := newClient(spec.SourceBrokers)
	if err != nil {
		return childResult{}, err
	}
	defer cl.Close()
	ti, err := describeTopic(ctx, cl, spec.Topic)
	if err != nil {
		return childResult{}, err
	}
	if len(ti.leaders) != len(spec.EndOffsets) {
		return childResult{}, fmt.Errorf("bench: raw: topic has %d partitions, want %d", len(ti.leaders), len(spec.EndOffsets))
	}
	byLeader := make(map[int32][]int32)
	for p, l := range ti.leaders {
		byLeader[l] = append(byLeader[l], int32(p))
	}
	var mu sync.Mutex
	var res childResult
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for leader, parts := range byLeader {
		g.Go(func() error {
			next := make(map[int32]int64, len(parts))
			var bytes, recs int64
			for {
				req := kmsg.NewPtrFetchRequest()
				req.ReplicaID = -1
				req.MaxWaitMillis = int32(fetchMaxWait / time.Millisecond)
				req.MinBytes = 1
				req.MaxBytes = fetchMaxBytes
				req.SessionEpoch = -1
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = spec.Topic, ti.id
				for _, p := range parts {
					if next[p] >= spec.EndOffsets[p] {
						continue
					}
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = p, next[p], -1, -1
					rp.LogStartOffset, rp.PartitionMaxBytes = -1, fetchPartitionMaxBytes
					rt.Partitions = append(rt.Partitions, rp)
				}
				if len(rt.Partitions) == 0 {
					break
				}
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(gctx, cl.Broker(int(leader)))
				if err != nil {
					return fmt.Errorf("bench: raw fetch from %d: %w", leader, err)
				}
				if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
					return fmt.Errorf("bench: raw fetch from %d: %w", leader, err)
				}
				for _, t := range resp.Topics {
					for _, rp := range t.Partitions {
						if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
							return fmt.Errorf("bench: raw fetch partition %d: %w", rp.Partition, err)
						}
						it := records.NewIterator(rp.RecordBatches)
						for it.Next() {
							b := it.Batch()
							next[rp.Partition] = b.NextOffset()
							bytes += int64(len(b))
							recs += int64(b.NumRecords())
						}
						if err := it.Err(); err != nil {
							return fmt.Errorf("bench: raw fetch partition %d: %w", rp.Partition, err)
						}
					}
				}
			}
			mu.Lock()
			res.Bytes += bytes
			res.Records += recs
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	res.CopyNanos = time.Since(start).Nanoseconds()
	return res, nil
}

// doneEvents closes done once every partition's log end reached its target,
// and records the first failure.
type doneEvents struct {
	fetcher.NopEvents
	mu      sync.Mutex
	pending map[fetcher.TopicPartition]int64
	bytes   int64
	done    chan struct{}
	err     error
}

func (d *doneEvents) OnProgress(tp fetcher.TopicPartition, p fetcher.Progress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bytes += p.Bytes
	if want, ok := d.pending[tp]; ok && p.LogEndOffset >= want {
		delete(d.pending, tp)
		if len(d.pending) == 0 && d.err == nil {
			close(d.done)
		}
	}
}

func (d *doneEvents) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
		if len(d.pending) > 0 {
			close(d.done)
		}
	}
}

func (d *doneEvents) OnFailed(tp fetcher.TopicPartition, err error) {
	d.fail(fmt.Errorf("bench: kmirror %s failed: %w", tp, err))
}

func (d *doneEvents) OnDivergence(tp fetcher.TopicPartition, dv epoch.Divergence, to int64) {
	d.fail(fmt.Errorf("bench: kmirror %s diverged (%+v), truncated to %d", tp, dv, to))
}

func (d *doneEvents) OnEpochFencing(tp fetcher.TopicPartition, batch, local int32) {
	d.fail(fmt.Errorf("bench: kmirror %s fenced: batch epoch %d > local %d", tp, batch, local))
}

// localLeaderEpoch is the destination leader epoch the kmirror contender
// gives its FileLogs: above any source batch epoch of a fresh topic, so no
// batch is fenced (spec §7.3 rule 1).
const localLeaderEpoch = 1000

// runKmirror mirrors the topic with fetcher.KafkaSource + fetcher.Fetcher into
// one FileLog per partition (FsyncOnFlush) and ends with a Flush of every log.
func runKmirror(ctx context.Context, spec childSpec) (childResult, error) {
	if spec.Dir == "" {
		return childResult{}, fmt.Errorf("%w: kmirror needs a directory", ErrConfig)
	}
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return childResult{}, fmt.Errorf("bench: %w", err)
	}
	src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{
		SeedBrokers: spec.SourceBrokers, MaxWait: fetchMaxWait, MaxBytes: fetchMaxBytes,
	})
	if err != nil {
		return childResult{}, err
	}
	defer src.Close()
	ev := &doneEvents{pending: make(map[fetcher.TopicPartition]int64), done: make(chan struct{})}
	logs := make([]*fetcher.FileLog, len(spec.EndOffsets))
	defer func() {
		for _, l := range logs {
			if l != nil {
				_ = l.Close()
			}
		}
	}()
	opts := fetcher.FileLogOptions{Fsync: fetcher.FsyncOnFlush}
	if spec.NoFsync {
		opts.Fsync = fetcher.FsyncNever
	}
	for p := range logs {
		l, err := fetcher.OpenFileLog(fetcher.PartitionDir(spec.Dir, spec.Topic, int32(p)), opts)
		if err != nil {
			return childResult{}, err
		}
		logs[p] = l
		if _, err := l.BumpLeaderEpoch(localLeaderEpoch); err != nil {
			return childResult{}, err
		}
		if spec.EndOffsets[p] > 0 {
			ev.pending[fetcher.TopicPartition{Topic: spec.Topic, Partition: int32(p)}] = spec.EndOffsets[p]
		}
	}
	f, err := fetcher.NewFetcher(src, fetcher.Config{Events: ev, PartitionMaxBytes: fetchPartitionMaxBytes})
	if err != nil {
		return childResult{}, err
	}
	start := time.Now()
	for p := range logs {
		if err := f.Add(fetcher.PartitionSpec{Topic: spec.Topic, Partition: int32(p), Log: logs[p]}); err != nil {
			_ = f.Close()
			return childResult{}, err
		}
	}
	if len(ev.pending) == 0 {
		close(ev.done)
	}
	select {
	case <-ev.done:
	case <-ctx.Done():
	}
	_ = f.Close()
	ev.mu.Lock()
	evErr, bytes := ev.err, ev.bytes
	ev.mu.Unlock()
	if evErr != nil {
		return childResult{}, evErr
	}
	if err := ctx.Err(); err != nil {
		return childResult{}, fmt.Errorf("%w: kmirror: %w", ErrIncomplete, err)
	}
	for _, l := range logs {
		if err := l.Flush(); err != nil {
			return childResult{}, err
		}
	}
	res := childResult{Bytes: bytes, CopyNanos: time.Since(start).Nanoseconds()}
	for p, l := range logs {
		if end := l.LogEndOffset(); end != spec.EndOffsets[p] {
			return res, fmt.Errorf("%w: kmirror partition %d ends at %d, want %d", ErrIncomplete, p, end, spec.EndOffsets[p])
		}
		res.Records += spec.EndOffsets[p]
	}
	return res, nil
}

// runSarama is the hand-built copier: a sarama partition consumer per source
// partition feeding one sarama async producer (lz4, acks=1, same partition)
// into spec.DestTopic. Done when every produced message is acknowledged.
func runSarama(ctx context.Context, spec childSpec) (childResult, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_7_0_0
	cfg.ClientID = "kmirror-bench-sarama"
	cfg.Consumer.Fetch.Default = fetchPartitionMaxBytes
	cfg.Consumer.Fetch.Max = fetchPartitionMaxBytes
	cfg.Consumer.MaxWaitTime = fetchMaxWait
	cfg.ChannelBufferSize = 4096
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.RequiredAcks = sarama.WaitForLocal
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Bytes = 512 << 10
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.MaxMessageBytes = 1 << 20
	var want int64
	for _, e := range spec.EndOffsets {
		want += e
	}
	start := time.Now()
	cons, err := sarama.NewConsumer(spec.SourceBrokers, cfg)
	if err != nil {
		return childResult{}, fmt.Errorf("bench: sarama consumer: %w", err)
	}
	defer cons.Close()
	prod, err := sarama.NewAsyncProducer(spec.DestBrokers, cfg)
	if err != nil {
		return childResult{}, fmt.Errorf("bench: sarama producer: %w", err)
	}
	defer prod.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	var mu sync.Mutex
	var bytes int64
	for p, end := range spec.EndOffsets {
		if end == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(spec.Topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			return childResult{}, fmt.Errorf("bench: sarama consume %d: %w", p, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.Close()
			var n int64
			defer func() { mu.Lock(); bytes += n; mu.Unlock() }()
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					n += int64(len(m.Value) + len(m.Key))
					msg := &sarama.ProducerMessage{Topic: spec.DestTopic, Partition: int32(p),
						Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(m.Value)}
					select {
					case prod.Input() <- msg:
					case <-stop:
						return
					}
					if m.Offset+1 >= end {
						return
					}
				case <-stop:
					return
				}
			}
		}()
	}
	var acked int64
	for acked < want {
		select {
		case <-prod.Successes():
			acked++
		case perr := <-prod.Errors():
			return childResult{Records: acked}, fmt.Errorf("bench: sarama produce: %w", perr)
		case <-ctx.Done():
			return childResult{Records: acked}, fmt.Errorf("%w: sarama: %w", ErrIncomplete, ctx.Err())
		}
	}
	res := childResult{Records: acked, CopyNanos: time.Since(start).Nanoseconds()}
	wg.Wait()
	mu.Lock()
	res.Bytes = bytes
	mu.Unlock()
	return res, nil
}

// kmirrorDir is where the kmirror contender puts its FileLogs under workDir.
func kmirrorDir(workDir string) string { return filepath.Join(workDir, "kmirror") }
