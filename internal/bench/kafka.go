package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicInfo is what metadata says about one topic.
type topicInfo struct {
	id      [16]byte
	leaders []int32 // by partition
}

func newClient(brokers []string, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("bench: kafka client: %w", err)
	}
	return cl, nil
}

// createTopic creates topic and waits until every partition has a leader.
func createTopic(ctx context.Context, cl *kgo.Client, topic string, parts int32, rf int16) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, parts, rf
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("bench: create topic %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("bench: create topic %s: %w", topic, err)
		}
	}
	for {
		ti, err := describeTopic(ctx, cl, topic)
		if err == nil && int32(len(ti.leaders)) == parts {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: topic %s has no leaders: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deleteTopics deletes topics, ignoring unknown ones.
func deleteTopics(ctx context.Context, cl *kgo.Client, topics ...string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 30_000
	for _, name := range topics {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
		req.TopicNames = append(req.TopicNames, name)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("bench: delete topics: %w", err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("bench: delete topic: %w", err)
		}
	}
	return nil
}

// describeTopic returns the topic's id and partition leaders (all must have one).
func describeTopic(ctx context.Context, cl *kgo.Client, topic string) (topicInfo, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return topicInfo{}, fmt.Errorf("bench: metadata %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return topicInfo{}, fmt.Errorf("bench: metadata %s: %d topics in answer", topic, len(resp.Topics))
	}
	rt := resp.Topics[0]
	if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
		return topicInfo{}, fmt.Errorf("bench: metadata %s: %w", topic, err)
	}
	ti := topicInfo{id: rt.TopicID, leaders: make([]int32, len(rt.Partitions))}
	for _, p := range rt.Partitions {
		if p.Partition < 0 || int(p.Partition) >= len(ti.leaders) {
			return topicInfo{}, fmt.Errorf("bench: metadata %s: partition %d out of range", topic, p.Partition)
		}
		if p.ErrorCode != 0 || p.Leader < 0 {
			return topicInfo{}, fmt.Errorf("bench: metadata %s: partition %d has no leader", topic, p.Partition)
		}
		ti.leaders[p.Partition] = p.Leader
	}
	return ti, nil
}

// endOffsets returns the high watermark of partitions 0..parts-1 of topic. A
// topic that does not exist yet answers zeros when missingOK.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string, parts int32, missingOK bool) ([]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	for p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	out := make([]int64, parts)
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			if missingOK && errors.Is(shard.Err, kerr.UnknownTopicOrPartition) {
				continue
			}
			return nil, fmt.Errorf("bench: list offsets %s: %w", topic, shard.Err)
		}
		resp, ok := shard.Resp.(*kmsg.ListOffsetsResponse)
		if !ok {
			return nil, fmt.Errorf("bench: list offsets %s: unexpected %T", topic, shard.Resp)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					if missingOK && (errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.LeaderNotAvailable) ||
						errors.Is(err, kerr.NotLeaderForPartition)) {
						continue
					}
					return nil, fmt.Errorf("bench: list offsets %s-%d: %w", topic, rp.Partition, err)
				}
				if rp.Partition >= 0 && rp.Partition < parts {
					out[rp.Partition] = rp.Offset
				}
			}
		}
	}
	return out, nil
}

// topicBytes returns the on-disk size of topic summed over partitions and
// brokers (DescribeLogDirs); with replication factor 1 that is the bytes of
// the record batches.
func topicBytes(ctx context.Context, cl *kgo.Client, topic string, parts int32) (int64, error) {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	t := kmsg.NewDescribeLogDirsRequestTopic()
	t.Topic = topic
	for p := range parts {
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	var total int64
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return 0, fmt.Errorf("bench: describe log dirs: %w", shard.Err)
		}
		resp, ok := shard.Resp.(*kmsg.DescribeLogDirsResponse)
		if !ok {
			return 0, fmt.Errorf("bench: describe log dirs: unexpected %T", shard.Resp)
		}
		for _, d := range resp.Dirs {
			for _, rt := range d.Topics {
				if rt.Topic != topic {
					continue
				}
				for _, rp := range rt.Partitions {
					total += rp.Size
				}
			}
		}
	}
	return total, nil
}

// fillValue writes a record value that lz4 compresses about 2:1: a random
// first half (drawn from 64 letters, so it is printable) and a copy of it.
func fillValue(rng *rand.Rand, v []byte) {
	half := len(v) / 2
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	for i := range half {
		v[i] = letters[rng.Uint32()&63]
	}
	copy(v[half:], v[:half])
	for i := 2 * half; i < len(v); i++ {
		v[i] = '.'
	}
}

// produced describes the prepared source data.
type produced struct {
	Records    int64
	ValueBytes int64
	EndOffsets []int64
	Elapsed    time.Duration
}

// produceData fills topic with cfg.DataBytes of lz4-compressed records,
// round-robin over the partitions, and returns what it wrote.
func produceData(ctx context.Context, cfg *Config) (produced, error) {
	cl, err := newClient(cfg.SourceBrokers,
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(64<<10),
	)
	if err != nil {
		return produced{}, err
	}
	defer cl.Close()
	start := time.Now()
	rng := rand.New(rand.NewPCG(1, 2))
	n := cfg.DataBytes / int64(cfg.RecordBytes)
	if n < int64(cfg.Partitions) {
		n = int64(cfg.Partitions)
	}
	errc := make(chan error, 1)
	for i := range n {
		v := make([]byte, cfg.RecordBytes)
		fillValue(rng, v)
		rec := &kgo.Record{Value: v, Partition: int32(i % int64(cfg.Partitions))}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
		if i%4096 == 0 {
			select {
			case err := <-errc:
				return produced{}, fmt.Errorf("bench: produce: %w", err)
			default:
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return produced{}, fmt.Errorf("bench: produce flush: %w", err)
	}
	select {
	case err := <-errc:
		return produced{}, fmt.Errorf("bench: produce: %w", err)
	default:
	}
	ends, err := endOffsets(ctx, cl, cfg.Topic, cfg.Partitions, false)
	if err != nil {
		return produced{}, err
	}
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != n {
		return produced{}, fmt.Errorf("%w: produced %d records, source end offsets sum to %d", ErrIncomplete, n, total)
	}
	return produced{Records: n, ValueBytes: n * int64(cfg.RecordBytes), EndOffsets: ends, Elapsed: time.Since(start)}, nil
}
