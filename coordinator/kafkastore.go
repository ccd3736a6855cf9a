package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/kmirror/kmirror/internal/compacted"
	"github.com/kmirror/kmirror/records"
)

// CleanupPolicyError is the refusal of an existing state topic whose
// cleanup.policy is not exactly compact; NewKafkaStore returns it wrapped with
// ErrTopicMismatch. compact,delete is refused too: retention would delete the
// latest record of a key once its segment ages out, and with it a partition's
// state.
type CleanupPolicyError = compacted.CleanupPolicyError

// LostError is the refusal of a Load whose next records were deleted under it (the
// state topic's log start moved past them: DeleteRecords by an operator); the latest
// states of those keys are gone, so the load fails instead of skipping them.
type LostError = compacted.LostError

// KafkaStore is a Store on a compacted Kafka topic, written through sarama
// (package internal/compacted holds the topic check, the replay and the
// transactional producers).
//
// Each owned partition has its own transactional producer with the id
// "<TransactionalIDPrefix>-<partition>". Load initialises it
// (InitProducerId), which bumps the producer epoch on the transaction
// coordinator: the previous owner — in this process or another — is fenced
// and its next append fails with an error matching ErrFenced, and its
// unfinished transaction is aborted. Load then reads the partition from its
// log start up to the last stable offset with read_committed semantics
// (aborted transactional batches and control batches are skipped), so only
// committed appends are replayed; leader errors and OFFSET_OUT_OF_RANGE are
// retried with a backoff bounded by KafkaConfig.Timeout. Append writes its
// records in one transaction and returns after the commit.
//
// Caveats: sarama takes no context, so Append's ctx is checked only before
// sending; sarama's own timeouts bound the call. If the commit was applied
// by the broker but its acknowledgement was lost, Append returns an error
// although a later Load sees the records (the runtime then has failed
// requests whose writes are visible — a retry of the same write is refused by
// the state epoch fence or re-applies the same state). After a fatal producer
// error the partition must be loaded again.
//
// KafkaStore is safe for concurrent use.
type KafkaStore struct {
	cfg KafkaConfig
	log *compacted.Log

	mu     sync.Mutex // guards parts and closed
	parts  map[int32]*kafkaPart
	closed bool

	// testBeforeCommit, when set by tests, runs after the records of an
	// Append were produced and before the transaction is committed.
	testBeforeCommit func()
}

type kafkaPart struct {
	epoch    int32
	producer *compacted.Producer
}

// NewKafkaStore connects to the cluster and makes sure the state topic
// exists: it creates it when missing (NumPartitions, ReplicationFactor,
// cleanup.policy=compact, min.insync.replicas) and refuses, with an error
// wrapping ErrTopicMismatch, an existing topic whose partition count differs,
// that has a partition with fewer replicas than ReplicationFactor, or whose
// cleanup.policy is not exactly compact (a *CleanupPolicyError).
func NewKafkaStore(ctx context.Context, cfg KafkaConfig) (*KafkaStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log, err := compacted.Open(ctx, compacted.Config{
		Brokers: cfg.Brokers, Sarama: cfg.saramaConfig(""), Topic: cfg.Topic,
		Partitions: cfg.NumPartitions, ReplicationFactor: cfg.ReplicationFactor, MinInSyncReplicas: cfg.MinInSyncReplicas,
		FetchMaxBytes: cfg.LoadBufferSize, RetryTimeout: cfg.Timeout,
	})
	switch {
	case errors.Is(err, compacted.ErrTopic):
		return nil, fmt.Errorf("%w: %w", ErrTopicMismatch, err)
	case err != nil:
		return nil, fmt.Errorf("coordinator: state topic %s: %w", cfg.Topic, err)
	}
	return &KafkaStore{cfg: cfg, log: log, parts: make(map[int32]*kafkaPart)}, nil
}

// Load implements Store: it fences the previous owner by initialising the
// partition's transactional producer, then replays the committed records.
func (s *KafkaStore) Load(ctx context.Context, partition, ownerEpoch int32, fn func(records.StateRecord) error) error {
	if partition < 0 || partition >= s.cfg.NumPartitions {
		return fmt.Errorf("coordinator: partition %d out of range [0,%d)", partition, s.cfg.NumPartitions)
	}
	if err := s.release(partition, ownerEpoch); err != nil {
		return err
	}
	txnID := s.cfg.TransactionalIDPrefix + "-" + strconv.Itoa(int(partition))
	producer, err := s.log.NewProducer(compacted.ProducerConfig{TransactionalID: txnID, Partition: partition,
		Sarama: s.cfg.saramaConfig(txnID), BeforeCommit: s.beforeCommit})
	switch {
	case errors.Is(err, compacted.ErrFenced):
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: -1, Cause: err}
	case errors.Is(err, compacted.ErrClosed):
		return ErrClosed
	case err != nil:
		return fmt.Errorf("coordinator: partition %d: %w", partition, err)
	}
	if err := s.readCommitted(ctx, partition, fn); err != nil {
		_ = producer.Close()
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = producer.Close()
		return ErrClosed
	}
	if cur := s.parts[partition]; cur != nil {
		// A concurrent Load of the same partition won; the contract says
		// calls for one partition are not concurrent.
		_ = producer.Close()
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: cur.epoch}
	}
	s.parts[partition] = &kafkaPart{epoch: ownerEpoch, producer: producer}
	return nil
}

// release forgets the partition's previous owner before a Load with
// ownerEpoch, closing its producer; an older ownerEpoch is fenced.
func (s *KafkaStore) release(partition, ownerEpoch int32) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	old := s.parts[partition]
	if old != nil && ownerEpoch < old.epoch {
		s.mu.Unlock()
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: old.epoch}
	}
	delete(s.parts, partition)
	s.mu.Unlock()
	if old != nil {
		_ = old.producer.Close()
	}
	return nil
}

func (s *KafkaStore) beforeCommit() {
	if f := s.testBeforeCommit; f != nil {
		f()
	}
}

// readCommitted replays partition from its log start up to its last stable
// offset, skipping control batches and aborted transactional batches.
func (s *KafkaStore) readCommitted(ctx context.Context, partition int32, fn func(records.StateRecord) error) error {
	err := s.log.Replay(ctx, partition, func(_ int64, key, value []byte) error {
		sr, err := records.DecodeStateRecord(key, value)
		if err != nil {
			return err
		}
		return fn(sr)
	})
	switch {
	case errors.Is(err, compacted.ErrClosed):
		return ErrClosed
	case err != nil:
		return fmt.Errorf("coordinator: load of %s-%d: %w", s.cfg.Topic, partition, err)
	}
	return nil
}

// Append implements Store: one transaction per call.
func (s *KafkaStore) Append(ctx context.Context, partition, ownerEpoch int32, recs []records.StateRecord) error {
	s.mu.Lock()
	part := s.parts[partition]
	s.mu.Unlock()
	switch {
	case part == nil:
		return fmt.Errorf("%w: partition %d epoch %d", ErrNotOwner, partition, ownerEpoch)
	case ownerEpoch < part.epoch:
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: part.epoch}
	case ownerEpoch != part.epoch:
		return fmt.Errorf("%w: partition %d epoch %d", ErrNotOwner, partition, ownerEpoch)
	}
	out := make([]compacted.Record, len(recs))
	for i, r := range recs {
		out[i].Key, out[i].Value = records.EncodeStateRecord(r)
	}
	_, err := part.producer.Append(ctx, out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, compacted.ErrFenced):
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: -1, Cause: err}
	case errors.Is(err, compacted.ErrClosed):
		return fmt.Errorf("%w: partition %d epoch %d", ErrNotOwner, partition, ownerEpoch)
	default:
		return fmt.Errorf("coordinator: append to partition %d: %w", partition, err)
	}
}

// Unload implements Store: it closes the partition's producer when ownerEpoch
// is the loaded one. A fenced partition stays known as fenced.
func (s *KafkaStore) Unload(partition, ownerEpoch int32) {
	s.mu.Lock()
	part := s.parts[partition]
	if part == nil || part.epoch != ownerEpoch {
		s.mu.Unlock()
		return
	}
	if !part.producer.Fenced() {
		delete(s.parts, partition) // a fenced entry stays, so later appends still report the fence
	}
	s.mu.Unlock()
	_ = part.producer.Close()
}

// Close closes every producer and the client.
func (s *KafkaStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	parts := s.parts
	s.parts = nil
	s.mu.Unlock()
	var errs []error
	for _, p := range parts {
		if err := p.producer.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.log.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
