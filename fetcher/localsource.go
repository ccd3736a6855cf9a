package fetcher

import (
	"context"
	"errors"
	"sync"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// LocalSource serves fetches from destination Logs with a Kafka partition
// leader's rules (Partition.readRecords): CurrentLeaderEpoch fencing against
// Log.LeaderEpoch, DivergingEpoch computed with epoch.LeaderDivergence,
// OFFSET_OUT_OF_RANGE outside [LogStart, LogEnd], and reads bounded by the high
// watermark (read_uncommitted) or the last stable offset (read_committed). It
// is the source of reverse mirroring and of simulations. It is safe for
// concurrent use; the Logs it serves may be appended to concurrently.
type LocalSource struct {
	mu        sync.RWMutex
	parts     map[TopicPartition]localPartition
	isolation int8
	closed    bool
}

type localPartition struct {
	topicID records.UUID
	log     Log
}

// NewLocalSource returns an empty LocalSource reading with the given isolation
// level (ReadUncommitted or ReadCommitted).
func NewLocalSource(isolation int8) *LocalSource {
	return &LocalSource{parts: make(map[TopicPartition]localPartition), isolation: isolation}
}

// Add serves log as topic/partition (replacing any previous log there).
func (s *LocalSource) Add(topic string, topicID records.UUID, partition int32, log Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts[TopicPartition{topic, partition}] = localPartition{topicID, log}
}

// Remove stops serving topic/partition.
func (s *LocalSource) Remove(topic string, partition int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.parts, TopicPartition{topic, partition})
}

// Close makes every later call return ErrSourceClosed. The Logs are not closed.
func (s *LocalSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *LocalSource) lookup(tp TopicPartition) (localPartition, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return localPartition{}, false, ErrSourceClosed
	}
	p, ok := s.parts[tp]
	return p, ok, nil
}

// fenceCode applies the leader's CurrentLeaderEpoch check: -1 = not given.
func fenceCode(current, leader int32) int16 {
	switch {
	case current == epoch.UndefinedEpoch:
		return CodeNone
	case current < leader:
		return CodeFencedLeaderEpoch
	case current > leader:
		return CodeUnknownLeaderEpoch
	}
	return CodeNone
}

// Fetch implements Source.
func (s *LocalSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]FetchResult, len(parts))
	for i, fp := range parts {
		r := &out[i]
		r.Topic, r.Partition = fp.Topic, fp.Partition
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset = -1, -1, -1
		p, ok, err := s.lookup(fp.TP())
		if err != nil {
			return nil, err
		}
		if !ok {
			r.ErrorCode = CodeUnknownTopicOrPartition
			continue
		}
		if err := s.fetchOne(p.log, fp, r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *LocalSource) fetchOne(log Log, fp FetchPartition, r *FetchResult) error {
	if r.ErrorCode = fenceCode(fp.CurrentLeaderEpoch, log.LeaderEpoch()); r.ErrorCode != CodeNone {
		return nil
	}
	// Take the offsets before the read, as Kafka does, so appends racing
	// with the read never expose data above the returned bound.
	hw, lso, start, end := log.HighWatermark(), log.LastStableOffset(), log.LogStartOffset(), log.LogEndOffset()
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = hw, lso, start
	if fp.LastFetchedEpoch >= 0 {
		d, diverged, err := epoch.CheckFetch(log.Epochs(), start, end, fp.LastFetchedEpoch, fp.FetchOffset)
		if err != nil {
			r.ErrorCode = CodeOffsetOutOfRange
			return nil
		}
		if diverged {
			r.DivergingEpoch = &d
			return nil
		}
	}
	if fp.FetchOffset < start || fp.FetchOffset > end {
		r.ErrorCode = CodeOffsetOutOfRange
		return nil
	}
	bound := hw
	if s.isolation == ReadCommitted {
		bound = lso
	}
	if fp.FetchOffset >= bound {
		return nil
	}
	maxBytes := int(fp.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1
	}
	buf, err := log.Read(fp.FetchOffset, maxBytes)
	if errors.Is(err, ErrOffsetOutOfRange) {
		// The log was truncated between the bounds and the read.
		r.ErrorCode = CodeOffsetOutOfRange
		return nil
	}
	if err != nil {
		r.ErrorCode = CodeKafkaStorageError
		return nil
	}
	r.Records = cutAtOffset(buf, bound)
	return nil
}

// cutAtOffset returns the prefix of whole batches of buf whose base offsets
// are below bound (the high watermark or LSO bound of a Kafka read).
func cutAtOffset(buf []byte, bound int64) []byte {
	it := records.NewIterator(buf)
	end := 0
	for it.Next() {
		if it.Batch().BaseOffset() >= bound {
			break
		}
		end = it.Pos()
	}
	return buf[:end]
}

// OffsetForLeaderEpoch implements Source.
func (s *LocalSource) OffsetForLeaderEpoch(ctx context.Context, qs []EpochQuery) ([]EpochResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]EpochResult, len(qs))
	for i, q := range qs {
		r := &out[i]
		r.Topic, r.Partition, r.LeaderEpoch, r.EndOffset = q.Topic, q.Partition, epoch.UndefinedEpoch, epoch.UndefinedOffset
		p, ok, err := s.lookup(TopicPartition{q.Topic, q.Partition})
		if err != nil {
			return nil, err
		}
		if !ok {
			r.ErrorCode = CodeUnknownTopicOrPartition
			continue
		}
		if r.ErrorCode = fenceCode(q.CurrentLeaderEpoch, p.log.LeaderEpoch()); r.ErrorCode != CodeNone {
			continue
		}
		r.LeaderEpoch, r.EndOffset = p.log.EndOffsetForEpoch(q.LeaderEpoch)
	}
	return out, nil
}

// ListOffsets implements Source. Latest is the high watermark (read_uncommitted)
// or the last stable offset (read_committed), as for a Kafka consumer.
func (s *LocalSource) ListOffsets(ctx context.Context, qs []OffsetQuery) ([]OffsetResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]OffsetResult, len(qs))
	for i, q := range qs {
		r := &out[i]
		r.Topic, r.Partition, r.Offset, r.LeaderEpoch = q.Topic, q.Partition, -1, epoch.UndefinedEpoch
		p, ok, err := s.lookup(TopicPartition{q.Topic, q.Partition})
		if err != nil {
			return nil, err
		}
		if !ok {
			r.ErrorCode = CodeUnknownTopicOrPartition
			continue
		}
		if r.ErrorCode = fenceCode(q.CurrentLeaderEpoch, p.log.LeaderEpoch()); r.ErrorCode != CodeNone {
			continue
		}
		switch q.Timestamp {
		case EarliestTimestamp:
			r.Offset = p.log.LogStartOffset()
		case LatestTimestamp:
			r.Offset = p.log.HighWatermark()
			if s.isolation == ReadCommitted {
				r.Offset = p.log.LastStableOffset()
			}
		default:
			r.ErrorCode = CodeOffsetNotAvailable
			continue
		}
		if e, ok := p.log.Epochs().EpochForOffset(r.Offset); ok {
			r.LeaderEpoch = e
		}
	}
	return out, nil
}

// PartitionInfo implements Source: the leader is this process (id 0) and the
// leader epoch is the log's LeaderEpoch.
func (s *LocalSource) PartitionInfo(ctx context.Context, topic string, partition int32, _ bool) (PartitionInfo, error) {
	if err := ctx.Err(); err != nil {
		return PartitionInfo{}, err
	}
	p, ok, err := s.lookup(TopicPartition{topic, partition})
	if err != nil {
		return PartitionInfo{}, err
	}
	if !ok {
		return PartitionInfo{}, ErrUnknownPartition
	}
	return PartitionInfo{TopicID: p.topicID, Leader: 0, LeaderEpoch: p.log.LeaderEpoch()}, nil
}
