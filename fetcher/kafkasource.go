package fetcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// KafkaSourceConfig configures a KafkaSource.
type KafkaSourceConfig struct {
	// SeedBrokers are host:port addresses of the source cluster. Required.
	SeedBrokers []string
	// ClientOptions are passed to kgo.NewClient after the seeds: TLS
	// (kgo.DialTLSConfig), SASL (kgo.SASL), client id, dialer.
	ClientOptions []kgo.Opt
	// IsolationLevel is ReadUncommitted (default, spec §7.1) or ReadCommitted.
	IsolationLevel int8
	// MaxWait is the long-poll time of a Fetch; default 500 ms.
	MaxWait time.Duration
	// MinBytes is the Fetch minimum; default 1.
	MinBytes int32
	// MaxBytes bounds a whole Fetch response per broker; default
	// DefaultResponseMaxBytes.
	MaxBytes int32
	// DivergenceViaOffsetForLeaderEpoch tells the fetch loop that this source
	// never returns DivergingEpoch (kfake; brokers before Kafka 2.7), so it must
	// probe with OffsetForLeaderEpoch after every leader change.
	DivergenceViaOffsetForLeaderEpoch bool
	// MetadataMinAge coalesces metadata refreshes of one topic: a refresh asked
	// for within this time of the previous one reuses it. Default 100 ms.
	MetadataMinAge time.Duration
}

// Validate checks the configuration.
func (c KafkaSourceConfig) Validate() error {
	if len(c.SeedBrokers) == 0 {
		return errors.New("fetcher: KafkaSourceConfig.SeedBrokers is empty")
	}
	if c.IsolationLevel != ReadUncommitted && c.IsolationLevel != ReadCommitted {
		return fmt.Errorf("fetcher: invalid isolation level %d", c.IsolationLevel)
	}
	if c.MaxWait < 0 || c.MinBytes < 0 || c.MaxBytes < 0 || c.MetadataMinAge < 0 {
		return errors.New("fetcher: negative KafkaSourceConfig value")
	}
	return nil
}

// The fetch sizes default to the KIP's mirror settings, which are Kafka's own
// replica fetcher defaults: fetch.max.bytes (per partition) and
// fetch.response.max.bytes. A batch larger than either still comes back whole
// (Kafka returns the first batch regardless).
const (
	DefaultPartitionMaxBytes = 1 << 20
	DefaultResponseMaxBytes  = 10 << 20
)

// KafkaSource is a Source reading a Kafka cluster with raw kmsg requests sent
// through a kgo client to each partition's leader: Fetch (v12+, with
// LastFetchedEpoch and CurrentLeaderEpoch, record batches kept as raw bytes),
// OffsetForLeaderEpoch (v4) and ListOffsets, with leaders and leader epochs
// from Metadata requests. At most one Fetch is in flight per source broker. It
// is safe for concurrent use.
type KafkaSource struct {
	cl  *kgo.Client
	cfg KafkaSourceConfig

	mu      sync.Mutex // guards the fields below
	topics  map[string]*topicMeta
	brokers map[int32]*sync.Mutex
}

type topicMeta struct {
	id        records.UUID
	parts     map[int32]PartitionInfo
	refreshed time.Time
	err       error
}

// NewKafkaSource connects lazily to the source cluster described by cfg.
func NewKafkaSource(cfg KafkaSourceConfig) (*KafkaSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.MinBytes == 0 {
		cfg.MinBytes = 1
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultResponseMaxBytes
	}
	if cfg.MetadataMinAge == 0 {
		cfg.MetadataMinAge = 100 * time.Millisecond
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.SeedBrokers...)}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("fetcher: kafka source client: %w", err)
	}
	return &KafkaSource{cl: cl, cfg: cfg, topics: make(map[string]*topicMeta), brokers: make(map[int32]*sync.Mutex)}, nil
}

// Close closes the client.
func (s *KafkaSource) Close() error {
	s.cl.Close()
	return nil
}

// DivergenceViaOffsetForLeaderEpoch implements EpochProber.
func (s *KafkaSource) DivergenceViaOffsetForLeaderEpoch() bool {
	return s.cfg.DivergenceViaOffsetForLeaderEpoch
}

// refresh loads metadata for topics (those not refreshed within MetadataMinAge).
func (s *KafkaSource) refresh(ctx context.Context, topics []string, force bool) error {
	now := time.Now()
	var want []string
	s.mu.Lock()
	for _, t := range topics {
		m := s.topics[t]
		if m == nil || (force && now.Sub(m.refreshed) >= s.cfg.MetadataMinAge) {
			want = append(want, t)
		}
	}
	s.mu.Unlock()
	if len(want) == 0 {
		return nil
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range want {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return fmt.Errorf("fetcher: source metadata: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rt := range resp.Topics {
		if rt.Topic == nil {
			continue
		}
		m := &topicMeta{id: records.UUID(rt.TopicID), parts: make(map[int32]PartitionInfo), refreshed: now}
		if rt.ErrorCode != CodeNone {
			m.err = &SourceError{TopicPartition: TopicPartition{*rt.Topic, -1}, Op: "Metadata", Code: rt.ErrorCode}
		}
		for _, rp := range rt.Partitions {
			info := PartitionInfo{TopicID: m.id, Leader: rp.Leader, LeaderEpoch: rp.LeaderEpoch}
			if rp.ErrorCode != CodeNone && rp.ErrorCode != 9 /* REPLICA_NOT_AVAILABLE is harmless */ {
				info.Leader = -1
			}
			m.parts[rp.Partition] = info
		}
		s.topics[*rt.Topic] = m
	}
	return nil
}

// cached returns the cached metadata of topic/partition.
func (s *KafkaSource) cached(topic string, partition int32) (PartitionInfo, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.topics[topic]
	if m == nil {
		return PartitionInfo{}, false, nil
	}
	if m.err != nil {
		return PartitionInfo{}, true, m.err
	}
	p, ok := m.parts[partition]
	if !ok {
		return PartitionInfo{}, true, fmt.Errorf("%w: %s", ErrUnknownPartition, TopicPartition{topic, partition})
	}
	return p, true, nil
}

// PartitionInfo implements Source.
func (s *KafkaSource) PartitionInfo(ctx context.Context, topic string, partition int32, refresh bool) (PartitionInfo, error) {
	if err := s.refresh(ctx, []string{topic}, refresh); err != nil {
		return PartitionInfo{}, err
	}
	p, ok, err := s.cached(topic, partition)
	if err != nil {
		return PartitionInfo{}, err
	}
	if !ok {
		return PartitionInfo{}, fmt.Errorf("%w: %s", ErrUnknownPartition, TopicPartition{topic, partition})
	}
	if p.Leader < 0 {
		return p, fmt.Errorf("%w: %s", ErrNoLeader, TopicPartition{topic, partition})
	}
	return p, nil
}

// leaders groups request indexes by the leader of each topic/partition.
// Partitions with no known leader are returned in noLeader.
func (s *KafkaSource) leaders(ctx context.Context, tps []TopicPartition) (groups map[int32][]int, infos []PartitionInfo, noLeader []int) {
	var missing []string
	seen := make(map[string]bool)
	for _, tp := range tps {
		if _, ok, _ := s.cached(tp.Topic, tp.Partition); !ok && !seen[tp.Topic] {
			seen[tp.Topic] = true
			missing = append(missing, tp.Topic)
		}
	}
	if len(missing) > 0 {
		_ = s.refresh(ctx, missing, false) // failures show up as no leader below
	}
	groups = make(map[int32][]int)
	infos = make([]PartitionInfo, len(tps))
	for i, tp := range tps {
		p, ok, err := s.cached(tp.Topic, tp.Partition)
		if !ok || err != nil || p.Leader < 0 {
			noLeader = append(noLeader, i)
			continue
		}
		infos[i] = p
		groups[p.Leader] = append(groups[p.Leader], i)
	}
	return groups, infos, noLeader
}

func (s *KafkaSource) brokerLock(id int32) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.brokers[id]
	if m == nil {
		m = new(sync.Mutex)
		s.brokers[id] = m
	}
	return m
}

// forget drops the cached leader of tp so the next call refreshes it.
func (s *KafkaSource) forget(tp TopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.topics[tp.Topic]; m != nil {
		delete(m.parts, tp.Partition)
		if len(m.parts) == 0 {
			delete(s.topics, tp.Topic)
		}
	}
}

func leaderChangeCode(code int16) bool {
	switch code {
	case CodeNotLeaderOrFollower, CodeFencedLeaderEpoch, CodeUnknownLeaderEpoch, CodeLeaderNotAvailable,
		CodeUnknownTopicOrPartition, CodeNetworkException, CodeUnknownTopicID, CodeInconsistentTopicID:
		return true
	}
	return false
}

// Fetch implements Source: one raw Fetch request per leader broker, sent in
// parallel, at most one in flight per broker.
func (s *KafkaSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	out := make([]FetchResult, len(parts))
	tps := make([]TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = p.TP()
		out[i] = FetchResult{Topic: p.Topic, Partition: p.Partition, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
	}
	groups, infos, noLeader := s.leaders(ctx, tps)
	for _, i := range noLeader {
		out[i].ErrorCode = CodeLeaderNotAvailable
	}
	var g errgroup.Group
	for leader, idx := range groups {
		g.Go(func() error {
			s.fetchFrom(ctx, leader, parts, infos, idx, out)
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if leaderChangeCode(out[i].ErrorCode) {
			s.forget(tps[i])
		}
	}
	return out, nil
}

func (s *KafkaSource) fetchFrom(ctx context.Context, leader int32, parts []FetchPartition, infos []PartitionInfo, idx []int, out []FetchResult) {
	mu := s.brokerLock(leader)
	mu.Lock()
	defer mu.Unlock()

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(s.cfg.MaxWait / time.Millisecond)
	req.MinBytes = s.cfg.MinBytes
	req.MaxBytes = s.cfg.MaxBytes
	req.IsolationLevel = s.cfg.IsolationLevel
	req.SessionID = 0
	req.SessionEpoch = -1 // full fetch, no session
	type key struct {
		topic     string
		partition int32
	}
	where := make(map[key]int, len(idx))
	byID := make(map[records.UUID]string)
	topicIdx := make(map[string]int)
	for _, i := range idx {
		p := parts[i]
		id := p.TopicID
		if id == (records.UUID{}) {
			id = infos[i].TopicID
		}
		byID[id] = p.Topic
		ti, ok := topicIdx[p.Topic]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.Topic, id
			req.Topics = append(req.Topics, rt)
			ti = len(req.Topics) - 1
			topicIdx[p.Topic] = ti
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.Partition
		rp.CurrentLeaderEpoch = p.CurrentLeaderEpoch
		rp.FetchOffset = p.FetchOffset
		rp.LastFetchedEpoch = p.LastFetchedEpoch
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = p.MaxBytes
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
		where[key{p.Topic, p.Partition}] = i
	}
	resp, err := s.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		for _, i := range idx {
			out[i].ErrorCode = CodeNetworkException
		}
		return
	}
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok || fr.ErrorCode != CodeNone {
		code := CodeNetworkException
		if ok {
			code = fr.ErrorCode
		}
		for _, i := range idx {
			out[i].ErrorCode = code
		}
		return
	}
	answered := make(map[int]bool, len(idx))
	for _, rt := range fr.Topics {
		topic := rt.Topic
		if fr.Version >= 13 {
			topic = byID[records.UUID(rt.TopicID)]
		}
		for _, rp := range rt.Partitions {
			i, ok := where[key{topic, rp.Partition}]
			if !ok {
				continue
			}
			answered[i] = true
			r := &out[i]
			r.ErrorCode = rp.ErrorCode
			r.HighWatermark, r.LastStableOffset, r.LogStartOffset = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
			if rp.DivergingEpoch.Epoch >= 0 {
				r.DivergingEpoch = &epoch.Divergence{Epoch: rp.DivergingEpoch.Epoch, EndOffset: rp.DivergingEpoch.EndOffset}
			}
			r.Records = rp.RecordBatches
		}
	}
	for _, i := range idx {
		if !answered[i] {
			out[i].ErrorCode = CodeUnknownTopicOrPartition
		}
	}
}

// OffsetForLeaderEpoch implements Source with OffsetForLeaderEpoch v4 (consumer
// form, ReplicaID -1) sent to each partition's leader.
func (s *KafkaSource) OffsetForLeaderEpoch(ctx context.Context, qs []EpochQuery) ([]EpochResult, error) {
	out := make([]EpochResult, len(qs))
	tps := make([]TopicPartition, len(qs))
	for i, q := range qs {
		tps[i] = TopicPartition{q.Topic, q.Partition}
		out[i] = EpochResult{Topic: q.Topic, Partition: q.Partition, LeaderEpoch: epoch.UndefinedEpoch, EndOffset: epoch.UndefinedOffset}
	}
	groups, _, noLeader := s.leaders(ctx, tps)
	for _, i := range noLeader {
		out[i].ErrorCode = CodeLeaderNotAvailable
	}
	var g errgroup.Group
	for leader, idx := range groups {
		g.Go(func() error {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.ReplicaID = -1
			ti := make(map[string]int)
			where := make(map[TopicPartition]int)
			for _, i := range idx {
				q := qs[i]
				j, ok := ti[q.Topic]
				if !ok {
					rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
					rt.Topic = q.Topic
					req.Topics = append(req.Topics, rt)
					j = len(req.Topics) - 1
					ti[q.Topic] = j
				}
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = q.Partition, q.CurrentLeaderEpoch, q.LeaderEpoch
				req.Topics[j].Partitions = append(req.Topics[j].Partitions, rp)
				where[tps[i]] = i
			}
			resp, err := s.cl.Broker(int(leader)).Request(ctx, req)
			r, ok := resp.(*kmsg.OffsetForLeaderEpochResponse)
			if err != nil || !ok {
				for _, i := range idx {
					out[i].ErrorCode = CodeNetworkException
				}
				return nil
			}
			for _, rt := range r.Topics {
				for _, rp := range rt.Partitions {
					if i, ok := where[TopicPartition{rt.Topic, rp.Partition}]; ok {
						out[i].ErrorCode, out[i].LeaderEpoch, out[i].EndOffset = rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset
						delete(where, TopicPartition{rt.Topic, rp.Partition})
					}
				}
			}
			for _, i := range where {
				out[i].ErrorCode = CodeUnknownTopicOrPartition
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if leaderChangeCode(out[i].ErrorCode) {
			s.forget(tps[i])
		}
	}
	return out, nil
}

// ListOffsets implements Source with ListOffsets sent to each partition's leader.
func (s *KafkaSource) ListOffsets(ctx context.Context, qs []OffsetQuery) ([]OffsetResult, error) {
	out := make([]OffsetResult, len(qs))
	tps := make([]TopicPartition, len(qs))
	for i, q := range qs {
		tps[i] = TopicPartition{q.Topic, q.Partition}
		out[i] = OffsetResult{Topic: q.Topic, Partition: q.Partition, Offset: -1, LeaderEpoch: epoch.UndefinedEpoch}
	}
	groups, _, noLeader := s.leaders(ctx, tps)
	for _, i := range noLeader {
		out[i].ErrorCode = CodeLeaderNotAvailable
	}
	var g errgroup.Group
	for leader, idx := range groups {
		g.Go(func() error {
			// A request may not name a partition twice, so send one request
			// per timestamp kind.
			byTS := make(map[int64][]int)
			for _, i := range idx {
				byTS[qs[i].Timestamp] = append(byTS[qs[i].Timestamp], i)
			}
			for _, ids := range byTS {
				s.listOffsetsFrom(ctx, leader, qs, ids, out)
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if leaderChangeCode(out[i].ErrorCode) {
			s.forget(tps[i])
		}
	}
	return out, nil
}

func (s *KafkaSource) listOffsetsFrom(ctx context.Context, leader int32, qs []OffsetQuery, idx []int, out []OffsetResult) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = s.cfg.IsolationLevel
	ti := make(map[string]int)
	where := make(map[TopicPartition]int)
	for _, i := range idx {
		q := qs[i]
		j, ok := ti[q.Topic]
		if !ok {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = q.Topic
			req.Topics = append(req.Topics, rt)
			j = len(req.Topics) - 1
			ti[q.Topic] = j
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = q.Partition, q.CurrentLeaderEpoch, q.Timestamp
		req.Topics[j].Partitions = append(req.Topics[j].Partitions, rp)
		where[TopicPartition{q.Topic, q.Partition}] = i
	}
	resp, err := s.cl.Broker(int(leader)).Request(ctx, req)
	r, ok := resp.(*kmsg.ListOffsetsResponse)
	if err != nil || !ok {
		for _, i := range idx {
			out[i].ErrorCode = CodeNetworkException
		}
		return
	}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := TopicPartition{rt.Topic, rp.Partition}
			if i, ok := where[tp]; ok {
				out[i].ErrorCode, out[i].Offset, out[i].LeaderEpoch = rp.ErrorCode, rp.Offset, rp.LeaderEpoch
				delete(where, tp)
			}
		}
	}
	for _, i := range where {
		out[i].ErrorCode = CodeUnknownTopicOrPartition
	}
}
