package compacted

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"
)

// Record is one record of a state log; a nil Value is a tombstone.
type Record struct {
	Key, Value []byte
}

// ProducerConfig configures a Producer.
type ProducerConfig struct {
	// TransactionalID identifies the writer (required): opening a Producer with it
	// fences every earlier producer of the id.
	TransactionalID string
	// Partition is the partition the producer writes.
	Partition int32
	// Sarama is the client config of the producer; nil means the Log's base config. It
	// is copied; the copy gets the settings a transactional producer needs (idempotence,
	// acks=all, one request in flight, the manual partitioner, TransactionalID), which
	// override the caller's. Retries and timeouts are the caller's.
	Sarama *sarama.Config
	// BeforeCommit, when set, runs after the records of an Append were produced and
	// before the transaction is committed (for fault-injection tests).
	BeforeCommit func()
}

// Producer is the transactional writer of one partition of a Log: each Append is one
// transaction. Once fenced it stays fenced; after a fatal error it must be reopened.
// Safe for concurrent use; Appends are serialised.
type Producer struct {
	topic        string
	partition    int32
	txnID        string
	beforeCommit func()

	wasFenced atomic.Bool // set with fenced, read without waiting for an Append

	mu     sync.Mutex // serialises Appends; guards the fields below
	p      sarama.SyncProducer
	fenced error // a *FencedError once Kafka fenced the producer
	broken error // the fatal error after which the producer must be reopened
	closed bool
}

// NewProducer opens the transactional producer of one partition; its InitProducerId
// fences the earlier producers of the id and aborts their open transaction. A fence met
// while initialising matches ErrFenced.
func (l *Log) NewProducer(cfg ProducerConfig) (*Producer, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	switch {
	case cfg.TransactionalID == "":
		return nil, fmt.Errorf("%w: no transactional id", ErrInvalidConfig)
	case cfg.Partition < 0 || cfg.Partition >= l.cfg.Partitions:
		return nil, fmt.Errorf("%w: partition %d of %q out of range [0,%d)", ErrInvalidConfig, cfg.Partition, l.cfg.Topic, l.cfg.Partitions)
	}
	sc := l.base
	if cfg.Sarama != nil {
		sc = cfg.Sarama
	}
	pc := transactional(sc, cfg.TransactionalID)
	if err := pc.Validate(); err != nil {
		return nil, fmt.Errorf("%w: producer %q: %w", ErrInvalidConfig, cfg.TransactionalID, err)
	}
	sp, err := sarama.NewSyncProducer(l.cfg.Brokers, pc)
	if err != nil {
		if isFenced(err) {
			return nil, &FencedError{TransactionalID: cfg.TransactionalID, Cause: err}
		}
		return nil, fmt.Errorf("compacted: init transactional producer %q: %w", cfg.TransactionalID, err)
	}
	return &Producer{topic: l.cfg.Topic, partition: cfg.Partition, txnID: cfg.TransactionalID,
		beforeCommit: cfg.BeforeCommit, p: sp}, nil
}

// transactional returns a copy of sc with the settings of a transactional producer.
func transactional(sc *sarama.Config, txnID string) *sarama.Config {
	c := *sc
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Transaction.ID = txnID
	c.Net.MaxOpenRequests = 1
	return &c
}

// isFenced reports whether err says a newer producer epoch owns the transactional id.
func isFenced(err error) bool {
	var perrs sarama.ProducerErrors
	if errors.As(err, &perrs) {
		for _, pe := range perrs {
			if isFenced(pe.Err) {
				return true
			}
		}
	}
	return errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch)
}

// Append writes recs to the producer's partition in one transaction and returns the
// offset of each record after the commit. Its errors match ErrFenced once the producer
// is fenced, and wrap ErrProducerBroken once it needs to be reopened; after any other
// error the transaction was aborted and the next Append may succeed.
//
// sarama takes no context: ctx is checked before sending and sarama's timeouts bound
// the call. A commit the broker applied but whose answer was lost is reported as an
// error although its records are visible to a later Replay.
func (p *Producer) Append(ctx context.Context, recs []Record) ([]int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.fenced != nil:
		return nil, p.fenced
	case p.closed:
		return nil, ErrClosed
	case p.broken != nil:
		return nil, fmt.Errorf("%w: %s-%d after %w", ErrProducerBroken, p.topic, p.partition, p.broken)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		m := &sarama.ProducerMessage{Topic: p.topic, Partition: p.partition, Key: sarama.ByteEncoder(r.Key)}
		if r.Value != nil {
			m.Value = sarama.ByteEncoder(r.Value)
		}
		msgs[i] = m
	}
	if err := p.transact(msgs); err != nil {
		return nil, p.failed(err)
	}
	offsets := make([]int64, len(msgs))
	for i, m := range msgs {
		offsets[i] = m.Offset
	}
	return offsets, nil
}

func (p *Producer) transact(msgs []*sarama.ProducerMessage) error {
	if err := p.p.BeginTxn(); err != nil {
		return err
	}
	if err := p.p.SendMessages(msgs); err != nil {
		return err
	}
	if p.beforeCommit != nil {
		p.beforeCommit()
	}
	return p.p.CommitTxn()
}

// failed aborts the transaction of a failed Append when it can and returns the
// Append's error; it records a fence or a fatal error.
func (p *Producer) failed(err error) error {
	if isFenced(err) {
		return p.fence(err)
	}
	st := p.p.TxnStatus()
	if st&(sarama.ProducerTxnFlagAbortableError|sarama.ProducerTxnFlagInTransaction) != 0 {
		if aerr := p.p.AbortTxn(); aerr != nil {
			if isFenced(aerr) {
				return p.fence(aerr)
			}
			p.broken = aerr
		}
	}
	if p.p.TxnStatus()&sarama.ProducerTxnFlagFatalError != 0 {
		p.broken = err
	}
	return fmt.Errorf("compacted: append to %s-%d: %w", p.topic, p.partition, err)
}

// fence records that Kafka fenced the producer with cause.
func (p *Producer) fence(cause error) error {
	p.fenced = &FencedError{TransactionalID: p.txnID, Cause: cause}
	p.wasFenced.Store(true)
	return p.fenced
}

// Fenced reports whether Kafka fenced the producer; it does not wait for an Append in
// flight.
func (p *Producer) Fenced() bool { return p.wasFenced.Load() }

// Close closes the producer; it waits for an Append in flight. A fenced producer's
// Append keeps reporting the fence after Close.
func (p *Producer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := p.p.Close(); err != nil {
		return fmt.Errorf("compacted: close producer %q: %w", p.txnID, err)
	}
	return nil
}
