package coordinator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/kmirror/kmirror/records"
)

// Defaults of KafkaConfig.
const (
	DefaultStateTopic      = "__mirror_state"
	DefaultTransactionalID = "kmirror-mirror-state"
)

// DefaultKafkaVersion is the protocol version KafkaStore asks sarama for when
// KafkaConfig.Version is zero; transactions need at least 0.11, and the
// epoch-bump recovery of KIP-360 needs 2.5.
var DefaultKafkaVersion = sarama.V3_6_0_0

// KafkaConfig configures a KafkaStore.
type KafkaConfig struct {
	// Brokers is the bootstrap list (required).
	Brokers []string
	// Topic is the state topic (default "__mirror_state").
	Topic string
	// NumPartitions is the partition count used to create the topic, and the
	// count an existing topic must have (default 50).
	NumPartitions int32
	// ReplicationFactor for a topic the store creates (default 3).
	ReplicationFactor int16
	// MinInSyncReplicas for a topic the store creates; 0 means
	// min(2, ReplicationFactor).
	MinInSyncReplicas int16
	// TransactionalIDPrefix is the group of the transactional ids, one per
	// owned partition: "<prefix>-<partition>" (default
	// "kmirror-mirror-state"). Every process sharing the topic must use the
	// same prefix, or owners do not fence each other.
	TransactionalIDPrefix string
	// Version is the Kafka protocol version for sarama (default
	// DefaultKafkaVersion).
	Version sarama.KafkaVersion
	// LoadBufferSize is the fetch size used when loading (default 5 MiB).
	LoadBufferSize int32
	// Timeout bounds each network round trip of sarama (default 10 s).
	Timeout time.Duration
	// ClientID is sent to the brokers (default "kmirror-coordinator").
	ClientID string
	// Configure, when set, is called on every sarama.Config the store
	// builds (after its own settings) — for TLS, SASL and the like. It must
	// not change the transactional or idempotence settings.
	Configure func(*sarama.Config)
}

func (c KafkaConfig) withDefaults() KafkaConfig {
	if c.Topic == "" {
		c.Topic = DefaultStateTopic
	}
	if c.NumPartitions == 0 {
		c.NumPartitions = DefaultNumPartitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.MinInSyncReplicas == 0 {
		c.MinInSyncReplicas = min(2, c.ReplicationFactor)
	}
	if c.TransactionalIDPrefix == "" {
		c.TransactionalIDPrefix = DefaultTransactionalID
	}
	if c.Version == (sarama.KafkaVersion{}) {
		c.Version = DefaultKafkaVersion
	}
	if c.LoadBufferSize == 0 {
		c.LoadBufferSize = DefaultLoadBufferSize
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.ClientID == "" {
		c.ClientID = "kmirror-coordinator"
	}
	return c
}

// Validate checks the configuration after defaults.
func (c KafkaConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: no brokers", ErrInvalidConfig)
	case c.NumPartitions < 1:
		return fmt.Errorf("%w: NumPartitions %d < 1", ErrInvalidConfig, c.NumPartitions)
	case c.ReplicationFactor < 1:
		return fmt.Errorf("%w: ReplicationFactor %d < 1", ErrInvalidConfig, c.ReplicationFactor)
	case c.MinInSyncReplicas < 1 || c.MinInSyncReplicas > c.ReplicationFactor:
		return fmt.Errorf("%w: MinInSyncReplicas %d not in [1,%d]", ErrInvalidConfig, c.MinInSyncReplicas, c.ReplicationFactor)
	case c.LoadBufferSize < 1:
		return fmt.Errorf("%w: LoadBufferSize %d < 1", ErrInvalidConfig, c.LoadBufferSize)
	case !c.Version.IsAtLeast(sarama.V2_5_0_0):
		return fmt.Errorf("%w: Version %s < 2.5.0 (transactions with epoch bump)", ErrInvalidConfig, c.Version)
	}
	return nil
}

// KafkaStore is a Store on a compacted Kafka topic, written through sarama.
//
// Each owned partition has its own transactional producer with the id
// "<TransactionalIDPrefix>-<partition>". Load initialises it
// (InitProducerId), which bumps the producer epoch on the transaction
// coordinator: the previous owner — in this process or another — is fenced
// and its next append fails with an error matching ErrFenced, and its
// unfinished transaction is aborted. Load then reads the partition from its
// log start up to the last stable offset with read_committed semantics
// (aborted transactional batches and control batches are skipped), so only
// committed appends are replayed. Append writes its records in one
// transaction and returns after the commit.
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
	cfg    KafkaConfig
	client sarama.Client

	mu     sync.Mutex // guards parts and closed
	parts  map[int32]*kafkaPart
	closed bool

	// testBeforeCommit, when set by tests, runs after the records of an
	// Append were produced and before the transaction is committed.
	testBeforeCommit func()
}

type kafkaPart struct {
	epoch    int32
	producer sarama.SyncProducer
	fenced   bool
	broken   error // fatal producer error; a new Load is needed
}

func (s *KafkaStore) saramaConfig(txnID string) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = s.cfg.Version
	c.ClientID = s.cfg.ClientID
	c.Net.DialTimeout = s.cfg.Timeout
	c.Net.ReadTimeout = s.cfg.Timeout
	c.Net.WriteTimeout = s.cfg.Timeout
	c.Metadata.Retry.Max = 3
	c.Metadata.Retry.Backoff = 50 * time.Millisecond
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	if txnID != "" {
		c.Producer.Idempotent = true
		c.Producer.RequiredAcks = sarama.WaitForAll
		c.Producer.Return.Successes = true
		c.Producer.Return.Errors = true
		c.Producer.Partitioner = sarama.NewManualPartitioner
		c.Producer.Retry.Max = 3
		c.Producer.Retry.Backoff = 50 * time.Millisecond
		c.Producer.Timeout = s.cfg.Timeout
		c.Producer.Flush.Messages = 0
		c.Producer.Transaction.ID = txnID
		c.Producer.Transaction.Timeout = time.Minute
		// After a commit the coordinator answers CONCURRENT_TRANSACTIONS
		// until its markers are written; a short backoff keeps the next
		// append from waiting sarama's default 100 ms.
		c.Producer.Transaction.Retry.Max = 100
		c.Producer.Transaction.Retry.Backoff = 2 * time.Millisecond
		c.Net.MaxOpenRequests = 1
	}
	if s.cfg.Configure != nil {
		s.cfg.Configure(c)
	}
	return c
}

// NewKafkaStore connects to the cluster and makes sure the state topic
// exists: it creates it when missing (NumPartitions, ReplicationFactor,
// cleanup.policy=compact, min.insync.replicas) and refuses, with an error
// wrapping ErrTopicMismatch, an existing topic whose partition count differs
// or whose cleanup.policy does not include compact.
func NewKafkaStore(ctx context.Context, cfg KafkaConfig) (*KafkaStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &KafkaStore{cfg: cfg.withDefaults(), parts: make(map[int32]*kafkaPart)}
	client, err := sarama.NewClient(s.cfg.Brokers, s.saramaConfig(""))
	if err != nil {
		return nil, fmt.Errorf("coordinator: connect: %w", err)
	}
	s.client = client
	if err := s.ensureTopic(ctx); err != nil {
		_ = client.Close()
		return nil, err
	}
	return s, nil
}

func (s *KafkaStore) ensureTopic(ctx context.Context) error {
	adm, err := sarama.NewClusterAdminFromClient(s.client)
	if err != nil {
		return fmt.Errorf("coordinator: admin client: %w", err)
	}
	// adm shares s.client; closing adm would close it, so it is left open.
	if err := ctx.Err(); err != nil {
		return err
	}
	md, err := adm.DescribeTopics([]string{s.cfg.Topic})
	if err != nil {
		return fmt.Errorf("coordinator: describe topic %s: %w", s.cfg.Topic, err)
	}
	if len(md) == 1 && errors.Is(md[0].Err, sarama.ErrUnknownTopicOrPartition) {
		compact := "compact"
		minISR := strconv.Itoa(int(s.cfg.MinInSyncReplicas))
		err := adm.CreateTopic(s.cfg.Topic, &sarama.TopicDetail{
			NumPartitions: s.cfg.NumPartitions, ReplicationFactor: s.cfg.ReplicationFactor,
			ConfigEntries: map[string]*string{"cleanup.policy": &compact, "min.insync.replicas": &minISR},
		}, false)
		if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("coordinator: create topic %s: %w", s.cfg.Topic, err)
		}
		if err == nil {
			return s.waitLeaders(ctx)
		}
		md, err = adm.DescribeTopics([]string{s.cfg.Topic})
		if err != nil {
			return fmt.Errorf("coordinator: describe topic %s: %w", s.cfg.Topic, err)
		}
	}
	if len(md) != 1 || md[0].Err != sarama.ErrNoError {
		var kerr error = sarama.ErrUnknownTopicOrPartition
		if len(md) == 1 {
			kerr = md[0].Err
		}
		return fmt.Errorf("coordinator: describe topic %s: %w", s.cfg.Topic, kerr)
	}
	if n := int32(len(md[0].Partitions)); n != s.cfg.NumPartitions {
		return fmt.Errorf("%w: topic %s has %d partitions, configured %d", ErrTopicMismatch, s.cfg.Topic, n, s.cfg.NumPartitions)
	}
	results, err := adm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: s.cfg.Topic,
		ConfigNames: []string{"cleanup.policy"}}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return fmt.Errorf("coordinator: describe configs of %s: %w", s.cfg.Topic, err)
	}
	policy := "delete" // Kafka's default
	for _, res := range results {
		if res.ErrorCode != sarama.ErrNoError {
			return fmt.Errorf("coordinator: describe configs of %s: %w: %s", s.cfg.Topic, res.ErrorCode, res.ErrorMsg)
		}
		for _, e := range res.Configs {
			if e.Name == "cleanup.policy" {
				policy = e.Value
			}
		}
	}
	if !slices.Contains(strings.Split(policy, ","), "compact") {
		return fmt.Errorf("%w: topic %s has cleanup.policy=%s, need compact", ErrTopicMismatch, s.cfg.Topic, policy)
	}
	return nil
}

// waitLeaders waits until every partition of a just-created state topic has a leader,
// so that a Load straight after NewKafkaStore does not meet NOT_LEADER_OR_FOLLOWER. It
// gives up with an error after the configured timeout.
func (s *KafkaStore) waitLeaders(ctx context.Context) error {
	deadline := time.Now().Add(s.cfg.Timeout)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := s.client.RefreshMetadata(s.cfg.Topic)
		if err == nil {
			ready := true
			for p := int32(0); p < s.cfg.NumPartitions && ready; p++ {
				if _, lerr := s.client.Leader(s.cfg.Topic, p); lerr != nil {
					ready = false
				}
			}
			if ready {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("coordinator: state topic %s has partitions without a leader after %v", s.cfg.Topic, s.cfg.Timeout)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// leaderRetry bounds the retries of leadership errors during a load.
type leaderRetry struct {
	deadline time.Time
	wait     time.Duration
}

func newLeaderRetry(timeout time.Duration) *leaderRetry {
	return &leaderRetry{deadline: time.Now().Add(timeout), wait: 20 * time.Millisecond}
}

// again reports whether err is a leadership error worth another try before the deadline;
// if so it waits (doubling, at most 1 s) and refreshes the topic's metadata first.
func (r *leaderRetry) again(ctx context.Context, client sarama.Client, topic string, err error) bool {
	if !errors.Is(err, sarama.ErrNotLeaderForPartition) && !errors.Is(err, sarama.ErrLeaderNotAvailable) &&
		!errors.Is(err, sarama.ErrReplicaNotAvailable) {
		return false
	}
	if time.Now().Add(r.wait).After(r.deadline) {
		return false
	}
	t := time.NewTimer(r.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	r.wait = min(2*r.wait, time.Second)
	_ = client.RefreshMetadata(topic)
	return true
}

// isFenced reports whether err says a newer producer epoch owns the
// transactional id.
func isFenced(err error) bool {
	if err == nil {
		return false
	}
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

// Load implements Store: it fences the previous owner by initialising the
// partition's transactional producer, then replays the committed records.
func (s *KafkaStore) Load(ctx context.Context, partition, ownerEpoch int32, fn func(records.StateRecord) error) error {
	if partition < 0 || partition >= s.cfg.NumPartitions {
		return fmt.Errorf("coordinator: partition %d out of range [0,%d)", partition, s.cfg.NumPartitions)
	}
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
	if old != nil && old.producer != nil {
		_ = old.producer.Close()
	}
	txnID := s.cfg.TransactionalIDPrefix + "-" + strconv.Itoa(int(partition))
	producer, err := sarama.NewSyncProducer(s.cfg.Brokers, s.saramaConfig(txnID))
	if err != nil {
		if isFenced(err) {
			return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: -1, Cause: err}
		}
		return fmt.Errorf("coordinator: init transactional producer %s: %w", txnID, err)
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

// readCommitted replays partition from its log start up to its last stable
// offset, skipping control batches and aborted transactional batches.
func (s *KafkaStore) readCommitted(ctx context.Context, partition int32, fn func(records.StateRecord) error) error {
	topic := s.cfg.Topic
	if err := s.client.RefreshMetadata(topic); err != nil {
		return fmt.Errorf("coordinator: metadata of %s: %w", topic, err)
	}
	// A leader that metadata already names may not serve the partition yet (a state
	// topic just created, a leader just elected): leadership errors are retried with a
	// metadata refresh until the store's Timeout.
	retry := newLeaderRetry(s.cfg.Timeout)
	var offset int64
	for {
		var err error
		offset, err = s.client.GetOffset(topic, partition, sarama.OffsetOldest)
		if err == nil {
			break
		}
		if !retry.again(ctx, s.client, topic, err) {
			return fmt.Errorf("coordinator: log start of %s-%d: %w", topic, partition, err)
		}
	}
	aborted := make(map[int64]bool) // producer ids inside an aborted transaction
	var pendingAborts []*sarama.AbortedTransaction
	empty := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		broker, err := s.client.Leader(topic, partition)
		if err != nil {
			return fmt.Errorf("coordinator: leader of %s-%d: %w", topic, partition, err)
		}
		req := &sarama.FetchRequest{Version: 11, MaxWaitTime: 0, MinBytes: 1, MaxBytes: s.cfg.LoadBufferSize,
			Isolation: sarama.ReadCommitted}
		req.AddBlock(topic, partition, offset, s.cfg.LoadBufferSize, -1)
		resp, err := broker.Fetch(req)
		if err != nil {
			return fmt.Errorf("coordinator: fetch %s-%d@%d: %w", topic, partition, offset, err)
		}
		block := resp.GetBlock(topic, partition)
		if block == nil {
			return fmt.Errorf("coordinator: fetch %s-%d@%d: no partition in response", topic, partition, offset)
		}
		switch block.Err {
		case sarama.ErrNoError:
		case sarama.ErrNotLeaderForPartition, sarama.ErrLeaderNotAvailable, sarama.ErrReplicaNotAvailable:
			// nothing of this response was replayed: refresh and fetch the same offset again
			if retry.again(ctx, s.client, topic, block.Err) {
				continue
			}
			return fmt.Errorf("coordinator: fetch %s-%d@%d: %w", topic, partition, offset, block.Err)
		case sarama.ErrOffsetOutOfRange:
			if block.LogStartOffset > offset {
				offset = block.LogStartOffset // compaction or retention moved the log start
				continue
			}
			return fmt.Errorf("coordinator: fetch %s-%d@%d: %w", topic, partition, offset, block.Err)
		default:
			return fmt.Errorf("coordinator: fetch %s-%d@%d: %w", topic, partition, offset, block.Err)
		}
		end := block.LastStableOffset
		if end < 0 {
			end = block.HighWaterMarkOffset
		}
		if offset >= end {
			return nil
		}
		pendingAborts = append(pendingAborts, block.AbortedTransactions...)
		slices.SortFunc(pendingAborts, func(a, b *sarama.AbortedTransaction) int {
			return int(min(max(a.FirstOffset-b.FirstOffset, -1), 1))
		})
		progressed := false
		for _, rs := range block.RecordsSet {
			b := rs.RecordBatch
			if b == nil {
				return fmt.Errorf("coordinator: %s-%d@%d: legacy message set in state topic", topic, partition, offset)
			}
			last := b.FirstOffset + int64(b.LastOffsetDelta)
			if last < offset || b.PartialTrailingRecord {
				continue
			}
			if b.FirstOffset >= end {
				break
			}
			for len(pendingAborts) > 0 && pendingAborts[0].FirstOffset <= last {
				aborted[pendingAborts[0].ProducerID] = true
				pendingAborts = pendingAborts[1:]
			}
			switch {
			case b.Control:
				if len(b.Records) > 0 && len(b.Records[0].Key) >= 4 && binary.BigEndian.Uint16(b.Records[0].Key[2:]) == 0 {
					delete(aborted, b.ProducerID) // ABORT marker ends the aborted transaction
				}
			case b.IsTransactional && aborted[b.ProducerID]:
			default:
				for _, rec := range b.Records {
					o := b.FirstOffset + rec.OffsetDelta
					if o < offset || o >= end {
						continue
					}
					sr, err := records.DecodeStateRecord(rec.Key, rec.Value)
					if err != nil {
						return fmt.Errorf("coordinator: %s-%d@%d: %w", topic, partition, o, err)
					}
					if err := fn(sr); err != nil {
						return fmt.Errorf("coordinator: replay %s-%d@%d: %w", topic, partition, o, err)
					}
				}
			}
			offset = last + 1
			progressed = true
		}
		if !progressed {
			empty++
			if empty > 100 {
				return fmt.Errorf("coordinator: fetch %s-%d@%d: no progress below last stable offset %d", topic, partition, offset, end)
			}
			continue
		}
		empty = 0
	}
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
	case part.fenced:
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: -1}
	case part.broken != nil:
		return fmt.Errorf("coordinator: partition %d needs a new load after %w", partition, part.broken)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		k, v := records.EncodeStateRecord(r)
		m := &sarama.ProducerMessage{Topic: s.cfg.Topic, Partition: partition, Key: sarama.ByteEncoder(k)}
		if v != nil {
			m.Value = sarama.ByteEncoder(v)
		}
		msgs[i] = m
	}
	p := part.producer
	err := p.BeginTxn()
	if err == nil {
		err = p.SendMessages(msgs)
		if err == nil && s.testBeforeCommit != nil {
			s.testBeforeCommit()
		}
		if err == nil {
			err = p.CommitTxn()
		}
	}
	if err == nil {
		return nil
	}
	if isFenced(err) {
		part.fenced = true
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: -1, Cause: err}
	}
	st := p.TxnStatus()
	if st&sarama.ProducerTxnFlagAbortableError != 0 || st&sarama.ProducerTxnFlagInTransaction != 0 {
		if aerr := p.AbortTxn(); aerr != nil {
			if isFenced(aerr) {
				part.fenced = true
				return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: -1, Cause: err}
			}
			part.broken = aerr
		}
	}
	if p.TxnStatus()&sarama.ProducerTxnFlagFatalError != 0 {
		part.broken = err
	}
	return fmt.Errorf("coordinator: append to partition %d: %w", partition, err)
}

// Unload implements Store: it closes the partition's producer when ownerEpoch
// is the loaded one. A fenced partition stays known as fenced.
func (s *KafkaStore) Unload(partition, ownerEpoch int32) {
	s.mu.Lock()
	part := s.parts[partition]
	if part == nil || part.epoch != ownerEpoch || part.producer == nil {
		s.mu.Unlock()
		return
	}
	producer := part.producer
	if part.fenced {
		// keep the entry so later appends still report the fence
		part.producer = nil
	} else {
		delete(s.parts, partition)
	}
	s.mu.Unlock()
	_ = producer.Close()
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
		if p.producer == nil {
			continue
		}
		if err := p.producer.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.client.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
