package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/kmirror/kmirror/records"
)

// DefaultControllerTopic is the default topic of a KafkaControllerLog.
const DefaultControllerTopic = "__mirror_controller"

// Errors of the Kafka controller log.
var (
	// ErrControllerTopic: the controller topic exists but cannot hold the controller
	// log (not compacted, or not exactly one partition).
	ErrControllerTopic = errors.New("mirror: unusable controller topic")
	// ErrControllerLog wraps every Kafka failure of the controller log.
	ErrControllerLog = errors.New("mirror: kafka controller log")
	// ErrControllerLogClosed is returned after Close.
	ErrControllerLogClosed = errors.New("mirror: kafka controller log closed")
)

// KafkaControllerLogConfig configures a KafkaControllerLog.
type KafkaControllerLogConfig struct {
	// Brokers is the bootstrap list of the cluster holding the topic (required).
	Brokers []string
	// Sarama is an optional base client config (TLS, SASL, timeouts); it is copied, never
	// modified. Default: sarama.NewConfig with Version 3.6. Its Version must be >= 2.8.
	Sarama *sarama.Config
	// Topic is the compacted single-partition topic; default DefaultControllerTopic.
	Topic string
	// ReplicationFactor of the topic when it is created; default -1 (the broker's
	// default.replication.factor).
	ReplicationFactor int16
	// MinInsyncReplicas sets min.insync.replicas on a created topic; 0 leaves the
	// broker default.
	MinInsyncReplicas int
	// TransactionalID of the writer; default "kmirror-controller-" + Topic. Opening a
	// second log with the same id fences the first (its Appends fail).
	TransactionalID string
	// FetchMaxWait bounds one fetch while loading; default 500 ms.
	FetchMaxWait time.Duration
	// FetchMaxBytes is the partition byte budget of one fetch while loading (the broker
	// returns at least one whole batch anyway); default 1 MiB.
	FetchMaxBytes int32
}

// Validate checks cfg and fills in defaults.
func (cfg *KafkaControllerLogConfig) Validate() error {
	var problems []string
	if len(cfg.Brokers) == 0 {
		problems = append(problems, "Brokers is required")
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultControllerTopic
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = -1
	}
	if cfg.ReplicationFactor < -1 {
		problems = append(problems, "ReplicationFactor must be -1 or positive")
	}
	if cfg.MinInsyncReplicas < 0 {
		problems = append(problems, "MinInsyncReplicas must not be negative")
	}
	if cfg.TransactionalID == "" {
		cfg.TransactionalID = "kmirror-controller-" + cfg.Topic
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = 500 * time.Millisecond
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = 1 << 20
	}
	if cfg.Sarama != nil && !cfg.Sarama.Version.IsAtLeast(sarama.V2_8_0_0) {
		problems = append(problems, "Sarama.Version must be at least 2.8")
	}
	if len(problems) > 0 {
		return fmt.Errorf("mirror: kafka controller log config: %s", strings.Join(problems, "; "))
	}
	return nil
}

// KafkaControllerLog is a ControllerLog on a compacted, single-partition Kafka topic.
//
// Each Append is one Kafka transaction of a transactional idempotent producer: all
// records of the call become visible to read_committed readers together, or none do. The
// returned first offset is the offset the broker assigned to the first record, read
// from the produce response (sarama fills ProducerMessage.Offset). With a single writer
// the records of one transaction get consecutive offsets (Append checks it); the commit
// marker then takes one more offset, so offsets across Appends have gaps of one — the
// Controller only compares offsets (StateOffset fencing and Offset), so gaps are fine.
//
// Load reads from the log start with read_committed isolation up to the last stable
// offset observed when Load starts (after the producer's InitProducerId has fenced any
// previous writer and completed its transaction). Keys and values are
// records.EncodeControllerRecord; a mirror tombstone is a nil value, which compaction
// eventually removes. Safe for concurrent use; Appends are serialized.
type KafkaControllerLog struct {
	cfg      KafkaControllerLogConfig
	client   sarama.Client
	admin    sarama.ClusterAdmin
	producer sarama.SyncProducer

	mu     sync.Mutex
	closed bool
}

// OpenKafkaControllerLog connects, creates the topic when missing (cleanup.policy=compact,
// one partition) or checks the existing one, and starts the transactional producer.
func OpenKafkaControllerLog(ctx context.Context, cfg KafkaControllerLogConfig) (*KafkaControllerLog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := sarama.NewConfig()
	if cfg.Sarama != nil {
		c := *cfg.Sarama
		base = &c
	} else {
		base.Version = sarama.V3_6_0_0
	}
	acfg := *base
	acfg.ClientID = "kmirror-controller-log"
	client, err := sarama.NewClient(cfg.Brokers, &acfg)
	if err != nil {
		return nil, fmt.Errorf("%w: connect %v: %w", ErrControllerLog, cfg.Brokers, err)
	}
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("%w: %w", ErrControllerLog, err)
	}
	l := &KafkaControllerLog{cfg: cfg, client: client, admin: adm}
	if err := l.ensureTopic(ctx); err != nil {
		adm.Close()
		return nil, err
	}
	pcfg := *base
	pcfg.ClientID = "kmirror-controller-log-producer"
	pcfg.Producer.Idempotent = true
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.Return.Errors = true
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	pcfg.Producer.Transaction.ID = cfg.TransactionalID
	pcfg.Producer.Retry.Max = 10
	pcfg.Net.MaxOpenRequests = 1
	if err := pcfg.Validate(); err != nil {
		adm.Close()
		return nil, fmt.Errorf("%w: producer config: %w", ErrControllerLog, err)
	}
	p, err := sarama.NewSyncProducer(cfg.Brokers, &pcfg)
	if err != nil {
		adm.Close()
		return nil, fmt.Errorf("%w: transactional producer: %w", ErrControllerLog, err)
	}
	l.producer = p
	return l, nil
}

// Topic is the name of the controller topic.
func (l *KafkaControllerLog) Topic() string { return l.cfg.Topic }

func (l *KafkaControllerLog) ensureTopic(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		exists, err := l.checkTopic()
		if err != nil || exists {
			return err
		}
		entries := map[string]*string{"cleanup.policy": ptr("compact")}
		if l.cfg.MinInsyncReplicas > 0 {
			entries["min.insync.replicas"] = ptr(strconv.Itoa(l.cfg.MinInsyncReplicas))
		}
		err = l.admin.CreateTopic(l.cfg.Topic, &sarama.TopicDetail{
			NumPartitions: 1, ReplicationFactor: l.cfg.ReplicationFactor, ConfigEntries: entries,
		}, false)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sarama.ErrTopicAlreadyExists) || attempt > 0 {
			return fmt.Errorf("%w: create topic %q: %w", ErrControllerLog, l.cfg.Topic, err)
		}
		// Created concurrently: check what was created.
	}
}

// checkTopic reports whether the topic exists; an existing topic that is not compacted
// or has another partition count than one is refused.
func (l *KafkaControllerLog) checkTopic() (bool, error) {
	metas, err := l.admin.DescribeTopics([]string{l.cfg.Topic})
	if err != nil {
		return false, fmt.Errorf("%w: describe topic %q: %w", ErrControllerLog, l.cfg.Topic, err)
	}
	if len(metas) != 1 {
		return false, fmt.Errorf("%w: describe topic %q: %d results", ErrControllerLog, l.cfg.Topic, len(metas))
	}
	m := metas[0]
	if errors.Is(m.Err, sarama.ErrUnknownTopicOrPartition) {
		return false, nil
	}
	if !errors.Is(m.Err, sarama.ErrNoError) {
		return false, fmt.Errorf("%w: describe topic %q: %w", ErrControllerLog, l.cfg.Topic, m.Err)
	}
	if len(m.Partitions) != 1 {
		return true, fmt.Errorf("%w: topic %q has %d partitions, want exactly 1", ErrControllerTopic, l.cfg.Topic, len(m.Partitions))
	}
	results, err := l.admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: l.cfg.Topic, ConfigNames: []string{"cleanup.policy"}}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return true, fmt.Errorf("%w: describe configs of %q: %w", ErrControllerLog, l.cfg.Topic, err)
	}
	policy := "delete" // Kafka's default
	for _, r := range results {
		if r.ErrorCode != sarama.ErrNoError {
			return true, fmt.Errorf("%w: describe configs of %q: %w (%s)", ErrControllerLog, l.cfg.Topic, r.ErrorCode, r.ErrorMsg)
		}
		for _, e := range r.Configs {
			if e.Name == "cleanup.policy" {
				policy = e.Value
			}
		}
	}
	if strings.TrimSpace(policy) != "compact" {
		return true, fmt.Errorf("%w: topic %q has cleanup.policy=%q, want compact", ErrControllerTopic, l.cfg.Topic, policy)
	}
	return true, nil
}

func ptr(s string) *string { return &s }

// Append implements ControllerLog: recs are written in one transaction.
func (l *KafkaControllerLog) Append(ctx context.Context, recs []records.ControllerRecord) (int64, error) {
	if len(recs) == 0 {
		return 0, fmt.Errorf("%w: append of no records", ErrControllerLog)
	}
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		if err := r.Validate(); err != nil {
			return 0, fmt.Errorf("%w: record %d: %w", ErrControllerLog, i, err)
		}
		key, value := records.EncodeControllerRecord(r)
		m := &sarama.ProducerMessage{Topic: l.cfg.Topic, Partition: 0, Key: sarama.ByteEncoder(key)}
		if value != nil {
			m.Value = sarama.ByteEncoder(value)
		}
		msgs[i] = m
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrControllerLogClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := l.producer.BeginTxn(); err != nil {
		return 0, fmt.Errorf("%w: begin transaction: %w", ErrControllerLog, err)
	}
	if err := l.producer.SendMessages(msgs); err != nil {
		if aerr := l.producer.AbortTxn(); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return 0, fmt.Errorf("%w: produce: %w", ErrControllerLog, err)
	}
	if err := l.producer.CommitTxn(); err != nil {
		if aerr := l.producer.AbortTxn(); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return 0, fmt.Errorf("%w: commit transaction: %w", ErrControllerLog, err)
	}
	first := msgs[0].Offset
	for i, m := range msgs {
		if m.Offset != first+int64(i) {
			// Only possible with a second writer on the topic: the data is committed,
			// but the Controller's view would name wrong offsets.
			return 0, fmt.Errorf("%w: records of one transaction got non-consecutive offsets (%d at index %d, first %d): another writer on %q?", ErrControllerLog, m.Offset, i, first, l.cfg.Topic)
		}
	}
	return first, nil
}

// Load implements ControllerLog: committed records from the log start up to the last
// stable offset observed when Load starts.
func (l *KafkaControllerLog) Load(ctx context.Context, fn func(int64, records.ControllerRecord) error) error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrControllerLogClosed
	}
	start, end, err := l.bounds()
	if err != nil {
		return err
	}
	next := start
	maxBytes := l.cfg.FetchMaxBytes
	for next < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := l.leader()
		if err != nil {
			return err
		}
		req := &sarama.FetchRequest{Version: 11, MaxWaitTime: int32(l.cfg.FetchMaxWait / time.Millisecond), MinBytes: 1, MaxBytes: maxBytes, Isolation: sarama.ReadCommitted}
		req.AddBlock(l.cfg.Topic, 0, next, maxBytes, -1)
		resp, err := b.Fetch(req)
		if err != nil {
			return fmt.Errorf("%w: fetch at %d: %w", ErrControllerLog, next, err)
		}
		blk := resp.GetBlock(l.cfg.Topic, 0)
		if blk == nil {
			return fmt.Errorf("%w: fetch at %d: no partition in the response", ErrControllerLog, next)
		}
		if !errors.Is(blk.Err, sarama.ErrNoError) {
			return fmt.Errorf("%w: fetch at %d: %w", ErrControllerLog, next, blk.Err)
		}
		advanced, partial, err := replayFetched(blk, next, end, fn)
		if err != nil {
			return err
		}
		if advanced == next {
			if partial || blk.Partial {
				// The first batch is larger than the fetch budget.
				if maxBytes >= 1<<30 {
					return fmt.Errorf("%w: a batch at %d is larger than 1 GiB", ErrControllerLog, next)
				}
				maxBytes *= 2
				continue
			}
			// Nothing decodable below end: sarama drops record-less batches (kept by
			// the log cleaner for producer state), so only such batches remain.
			return nil
		}
		next = advanced
	}
	return nil
}

// replayFetched calls fn for every committed controller record of blk with an offset in
// [from, end) and returns the offset after the last whole batch seen, and whether it
// stopped at a truncated batch.
func replayFetched(blk *sarama.FetchResponseBlock, from, end int64, fn func(int64, records.ControllerRecord) error) (next int64, partial bool, err error) {
	aborted := append([]*sarama.AbortedTransaction(nil), blk.AbortedTransactions...)
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	abortedPIDs := map[int64]bool{}
	next = from
	for _, rs := range blk.RecordsSet {
		batch := rs.RecordBatch
		if batch == nil {
			return next, false, fmt.Errorf("%w: legacy message set at %d", ErrControllerLog, next)
		}
		if batch.PartialTrailingRecord {
			return next, true, nil
		}
		last := batch.FirstOffset + int64(batch.LastOffsetDelta)
		for len(aborted) > 0 && aborted[0].FirstOffset <= last {
			abortedPIDs[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		switch {
		case batch.Control:
			for _, r := range batch.Records {
				if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 0 { // ABORT
					delete(abortedPIDs, batch.ProducerID)
				}
			}
		case batch.IsTransactional && abortedPIDs[batch.ProducerID]:
		default:
			for _, r := range batch.Records {
				off := batch.FirstOffset + r.OffsetDelta
				if off < from || off >= end {
					continue
				}
				cr, err := records.DecodeControllerRecord(r.Key, r.Value)
				if err != nil {
					return next, false, fmt.Errorf("%w: record at offset %d: %w", ErrControllerLog, off, err)
				}
				if err := fn(off, cr); err != nil {
					return next, false, err
				}
			}
		}
		if last+1 > next {
			next = last + 1
		}
	}
	return next, false, nil
}

// bounds returns the log start and the last stable offset of the partition.
func (l *KafkaControllerLog) bounds() (start, end int64, err error) {
	b, err := l.leader()
	if err != nil {
		return 0, 0, err
	}
	get := func(ts int64, iso sarama.IsolationLevel) (int64, error) {
		req := &sarama.OffsetRequest{Version: 6, IsolationLevel: iso}
		req.AddBlock(l.cfg.Topic, 0, ts, 1)
		resp, err := b.GetAvailableOffsets(req)
		if err != nil {
			return 0, fmt.Errorf("%w: list offsets: %w", ErrControllerLog, err)
		}
		blk := resp.GetBlock(l.cfg.Topic, 0)
		if blk == nil {
			return 0, fmt.Errorf("%w: list offsets: no partition in the response", ErrControllerLog)
		}
		if !errors.Is(blk.Err, sarama.ErrNoError) {
			return 0, fmt.Errorf("%w: list offsets: %w", ErrControllerLog, blk.Err)
		}
		return blk.Offset, nil
	}
	if start, err = get(sarama.OffsetOldest, sarama.ReadUncommitted); err != nil {
		return 0, 0, err
	}
	if end, err = get(sarama.OffsetNewest, sarama.ReadCommitted); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

func (l *KafkaControllerLog) leader() (*sarama.Broker, error) {
	b, err := l.client.Leader(l.cfg.Topic, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: leader of %q: %w", ErrControllerLog, l.cfg.Topic, err)
	}
	if err := b.Open(l.client.Config()); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
		return nil, fmt.Errorf("%w: connect to the leader: %w", ErrControllerLog, err)
	}
	return b, nil
}

// Close implements ControllerLog: it closes the producer and the admin client.
func (l *KafkaControllerLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return errors.Join(l.producer.Close(), l.admin.Close())
}
