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

// each answers queries 0 … n-1 the way a Kafka leader starts every request:
// query(i) names query i's partition and CurrentLeaderEpoch (and may set the
// result's defaults); a partition not served gets CodeUnknownTopicOrPartition
// and one whose CurrentLeaderEpoch fails fenceCode gets that code, through
// code(i); every other query is answered by answer(i, p). A done ctx or a
// closed source fails the whole call.
func (s *LocalSource) each(ctx context.Context, n int, query func(i int) (TopicPartition, int32), code func(i int) *int16, answer func(i int, p localPartition) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range n {
		tp, current := query(i)
		p, ok, err := s.lookup(tp)
		if err != nil {
			return err
		}
		c := code(i)
		if !ok {
			*c = CodeUnknownTopicOrPartition
			continue
		}
		if *c = fenceCode(current, p.log.LeaderEpoch()); *c != CodeNone {
			continue
		}
		if err := answer(i, p); err != nil {
			return err
		}
	}
	return nil
}

// Fetch implements Source.
func (s *LocalSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	out := make([]FetchResult, len(parts))
	err := s.each(ctx, len(parts), func(i int) (TopicPartition, int32) {
		r, fp := &out[i], parts[i]
		r.Topic, r.Partition = fp.Topic, fp.Partition
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset = -1, -1, -1
		return fp.TP(), fp.CurrentLeaderEpoch
	}, func(i int) *int16 { return &out[i].ErrorCode }, func(i int, p localPartition) error {
		return s.fetchOne(p.log, parts[i], &out[i])
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fetchOne answers fp from log, whose leader epoch fp passed.
func (s *LocalSource) fetchOne(log Log, fp FetchPartition, r *FetchResult) error {
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
	out := make([]EpochResult, len(qs))
	err := s.each(ctx, len(qs), func(i int) (TopicPartition, int32) {
		q := qs[i]
		out[i] = EpochResult{Topic: q.Topic, Partition: q.Partition, LeaderEpoch: epoch.UndefinedEpoch, EndOffset: epoch.UndefinedOffset}
		return TopicPartition{q.Topic, q.Partition}, q.CurrentLeaderEpoch
	}, func(i int) *int16 { return &out[i].ErrorCode }, func(i int, p localPartition) error {
		out[i].LeaderEpoch, out[i].EndOffset = p.log.EndOffsetForEpoch(qs[i].LeaderEpoch)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListOffsets implements Source. Latest is the high watermark (read_uncommitted)
// or the last stable offset (read_committed), as for a Kafka consumer.
func (s *LocalSource) ListOffsets(ctx context.Context, qs []OffsetQuery) ([]OffsetResult, error) {
	out := make([]OffsetResult, len(qs))
	err := s.each(ctx, len(qs), func(i int) (TopicPartition, int32) {
		q := qs[i]
		out[i] = OffsetResult{Topic: q.Topic, Partition: q.Partition, Offset: -1, LeaderEpoch: epoch.UndefinedEpoch}
		return TopicPartition{q.Topic, q.Partition}, q.CurrentLeaderEpoch
	}, func(i int) *int16 { return &out[i].ErrorCode }, func(i int, p localPartition) error {
		s.listOffset(p.log, qs[i].Timestamp, &out[i])
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listOffset answers a ListOffsets for timestamp ts from log.
func (s *LocalSource) listOffset(log Log, ts int64, r *OffsetResult) {
	switch ts {
	case EarliestTimestamp:
		r.Offset = log.LogStartOffset()
	case LatestTimestamp:
		r.Offset = log.HighWatermark()
		if s.isolation == ReadCommitted {
			r.Offset = log.LastStableOffset()
		}
	default:
		r.ErrorCode = CodeOffsetNotAvailable
		return
	}
	if e, ok := log.Epochs().EpochForOffset(r.Offset); ok {
		r.LeaderEpoch = e
	}
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
