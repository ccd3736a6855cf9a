package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kmirror/kmirror/internal/compacted"
	"github.com/kmirror/kmirror/records"
)

// Errors of the Kafka controller log.
var (
	// ErrControllerTopic: the controller topic exists but cannot hold the controller
	// log (its cleanup.policy is not exactly compact, it has not exactly one
	// partition, or fewer replicas than ReplicationFactor).
	ErrControllerTopic = errors.New("mirror: unusable controller topic")
	// ErrControllerLog wraps every Kafka failure of the controller log.
	ErrControllerLog = errors.New("mirror: kafka controller log")
	// ErrControllerLogClosed is returned after Close.
	ErrControllerLogClosed = errors.New("mirror: kafka controller log closed")
)

// CleanupPolicyError is the refusal of an existing controller topic whose
// cleanup.policy is not exactly compact; OpenKafkaControllerLog returns it wrapped
// with ErrControllerTopic. compact,delete is refused too: retention would delete the
// latest record of a key once its segment ages out — a mirror definition or a desired
// state silently gone.
type CleanupPolicyError = compacted.CleanupPolicyError

// LostError is the refusal of a Load whose next records were deleted under it (the
// controller topic's log start moved past them: DeleteRecords by an operator); the
// mirror definitions or desired states they held are gone, so the load fails instead of
// skipping them.
type LostError = compacted.LostError

// KafkaControllerLog is a ControllerLog on a compacted, single-partition Kafka topic
// (package internal/compacted holds the topic check, the replay and the transactional
// producer).
//
// Each Append is one Kafka transaction of a transactional idempotent producer: all
// records of the call become visible to read_committed readers together, or none do. The
// returned first offset is the offset the broker assigned to the first record, read
// from the produce response. With a single writer the records of one transaction get
// consecutive offsets (Append checks it); the commit marker then takes one more offset,
// so offsets across Appends have gaps of one — the Controller only compares offsets
// (StateOffset fencing and Offset), so gaps are fine.
//
// Load reads from the log start with read_committed isolation up to the last stable
// offset observed when Load starts (after the producer's InitProducerId has fenced any
// previous writer and completed its transaction); leader errors and OFFSET_OUT_OF_RANGE
// are retried with a backoff bounded by RetryTimeout. Keys and values are
// records.EncodeControllerRecord; a mirror tombstone is a nil value, which compaction
// eventually removes. Safe for concurrent use; Appends are serialized.
type KafkaControllerLog struct {
	cfg      KafkaControllerLogConfig
	log      *compacted.Log
	producer *compacted.Producer

	mu     sync.Mutex
	closed bool
}

// OpenKafkaControllerLog connects, creates the topic when missing (cleanup.policy=compact,
// one partition) or checks the existing one (an error wrapping ErrControllerTopic), and
// starts the transactional producer.
func OpenKafkaControllerLog(ctx context.Context, cfg KafkaControllerLogConfig) (*KafkaControllerLog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	lcfg, pcfg := cfg.logConfig()
	log, err := compacted.Open(ctx, lcfg)
	switch {
	case errors.Is(err, compacted.ErrTopic):
		return nil, fmt.Errorf("%w: %w", ErrControllerTopic, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrControllerLog, err)
	}
	p, err := log.NewProducer(compacted.ProducerConfig{TransactionalID: cfg.TransactionalID, Sarama: pcfg})
	if err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("%w: transactional producer: %w", ErrControllerLog, err)
	}
	return &KafkaControllerLog{cfg: cfg, log: log, producer: p}, nil
}

// Topic is the name of the controller topic.
func (l *KafkaControllerLog) Topic() string { return l.cfg.Topic }

// Append implements ControllerLog: recs are written in one transaction.
func (l *KafkaControllerLog) Append(ctx context.Context, recs []records.ControllerRecord) (int64, error) {
	if len(recs) == 0 {
		return 0, fmt.Errorf("%w: append of no records", ErrControllerLog)
	}
	out := make([]compacted.Record, len(recs))
	for i, r := range recs {
		if err := r.Validate(); err != nil {
			return 0, fmt.Errorf("%w: record %d: %w", ErrControllerLog, i, err)
		}
		out[i].Key, out[i].Value = records.EncodeControllerRecord(r)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrControllerLogClosed
	}
	offsets, err := l.producer.Append(ctx, out)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrControllerLog, err)
	}
	first := offsets[0]
	for i, off := range offsets {
		if off != first+int64(i) {
			// Only possible with a second writer on the topic: the data is committed,
			// but the Controller's view would name wrong offsets.
			return 0, fmt.Errorf("%w: records of one transaction got non-consecutive offsets (%d at index %d, first %d): another writer on %q?", ErrControllerLog, off, i, first, l.cfg.Topic)
		}
	}
	return first, nil
}

// Load implements ControllerLog: committed records from the log start up to the last
// stable offset observed when Load starts. Errors of fn are returned wrapped (with the
// record's offset) but not as ErrControllerLog.
func (l *KafkaControllerLog) Load(ctx context.Context, fn func(int64, records.ControllerRecord) error) error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrControllerLogClosed
	}
	var fnErr error
	err := l.log.Replay(ctx, 0, func(off int64, key, value []byte) error {
		cr, err := records.DecodeControllerRecord(key, value)
		if err != nil {
			return fmt.Errorf("%w: record at offset %d: %w", ErrControllerLog, off, err)
		}
		fnErr = fn(off, cr)
		return fnErr
	})
	switch {
	case err == nil || fnErr != nil || errors.Is(err, ErrControllerLog):
		return err
	case errors.Is(err, compacted.ErrClosed):
		return ErrControllerLogClosed
	default:
		return fmt.Errorf("%w: %w", ErrControllerLog, err)
	}
}

// Close implements ControllerLog: it closes the producer and the client.
func (l *KafkaControllerLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return errors.Join(l.producer.Close(), l.log.Close())
}
