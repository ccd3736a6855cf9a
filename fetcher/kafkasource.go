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
	// DisableFetchSessions makes every Fetch a sessionless full one
	// (SessionEpoch -1), even under WithFetchSessions: for sources whose
	// sessions misbehave, and to measure what sessions save.
	DisableFetchSessions bool
	// FetchConnections bounds the connections to each broker the fetch
	// loops' Fetch requests go on (default DefaultFetchConnections; 1: all on
	// the metadata client's). Each loop (a Fetcher, with its FetchSessions)
	// keeps one; loops beyond the bound share them. A broker serves one
	// connection's requests one after the other, so loops sharing a
	// connection wait for each other's long polls.
	FetchConnections int
}

// Validate checks the configuration.
func (c KafkaSourceConfig) Validate() error {
	if len(c.SeedBrokers) == 0 {
		return errors.New("fetcher: KafkaSourceConfig.SeedBrokers is empty")
	}
	if c.IsolationLevel != ReadUncommitted && c.IsolationLevel != ReadCommitted {
		return fmt.Errorf("fetcher: invalid isolation level %d", c.IsolationLevel)
	}
	if c.MaxWait < 0 || c.MinBytes < 0 || c.MaxBytes < 0 || c.MetadataMinAge < 0 || c.FetchConnections < 0 {
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
// from Metadata requests. At most one Fetch is in flight per source broker and fetch connection
// (KafkaSourceConfig.FetchConnections).
// A Fetch whose context carries FetchSessions (a Fetcher's own) runs in an
// incremental fetch session with each broker (KIP-227,
// kafkasource_session.go); others are sessionless. It is safe for concurrent
// use.
type KafkaSource struct {
	cl  *kgo.Client
	cfg KafkaSourceConfig
	// main is the lane of cl's own fetch connections (kafkasource_lanes.go).
	main *fetchLane

	mu     sync.Mutex // guards the fields below
	topics map[string]*topicMeta
	// lanes are the fetch lanes made beyond main, nextLane the next one to
	// give a fetch loop; closed is set by Close.
	lanes    []*fetchLane
	nextLane int
	closed   bool
	// refreshing holds the Metadata request in flight for each topic: a refresh of
	// the same topic meanwhile waits for its answer instead of sending its own, so
	// the reconcilers of a topic's P partitions starting at once send one request,
	// not P.
	refreshing map[string]*metadataCall
}

// metadataCall is one Metadata request in flight; err is set before done closes.
type metadataCall struct {
	done chan struct{}
	err  error
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
	if cfg.FetchConnections == 0 {
		cfg.FetchConnections = DefaultFetchConnections
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.SeedBrokers...)}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("fetcher: kafka source client: %w", err)
	}
	return &KafkaSource{cl: cl, cfg: cfg, main: &fetchLane{cl: cl, brokers: map[int32]*brokerGate{}}, topics: make(map[string]*topicMeta)}, nil
}

// Close closes the clients.
func (s *KafkaSource) Close() error {
	s.mu.Lock()
	s.closed = true
	lanes := s.lanes
	s.lanes = nil
	s.mu.Unlock()
	for _, l := range lanes {
		l.cl.Close()
	}
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
	var waits []*metadataCall
	call := &metadataCall{done: make(chan struct{})}
	s.mu.Lock()
	for _, t := range topics {
		m := s.topics[t]
		if m == nil || (force && now.Sub(m.refreshed) >= s.cfg.MetadataMinAge) {
			if c := s.refreshing[t]; c != nil {
				waits = append(waits, c) // its answer is as fresh as ours would be
				continue
			}
			if s.refreshing == nil {
				s.refreshing = make(map[string]*metadataCall)
			}
			s.refreshing[t] = call
			want = append(want, t)
		}
	}
	s.mu.Unlock()
	var err error
	if len(want) > 0 {
		err = s.requestMetadata(ctx, want, now)
		s.mu.Lock()
		for _, t := range want {
			delete(s.refreshing, t)
		}
		s.mu.Unlock()
		call.err = err
		close(call.done)
	}
	for _, c := range waits {
		select {
		case <-c.done:
			err = errors.Join(err, c.err)
		case <-ctx.Done():
			return errors.Join(err, fmt.Errorf("fetcher: source metadata: %w", ctx.Err()))
		}
	}
	return err
}

// requestMetadata sends one Metadata request for topics and caches the answer.
func (s *KafkaSource) requestMetadata(ctx context.Context, want []string, now time.Time) error {
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
		// A partition without a usable leader is refreshed too, not only a topic never
		// loaded: forget drops single partitions, and a topic entry missing one of them
		// would otherwise answer "no leader" for it until every partition was forgotten.
		if p, ok, err := s.cached(tp.Topic, tp.Partition); (!ok || err != nil || p.Leader < 0) && !seen[tp.Topic] {
			seen[tp.Topic] = true
			missing = append(missing, tp.Topic)
		}
	}
	if len(missing) > 0 {
		_ = s.refresh(ctx, missing, true) // at most once per MetadataMinAge; failures show up as no leader below
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

// perLeader runs send(leader, idx) for each source leader of tps, each on a
// goroutine of its own, idx being the indexes in tps of the partitions it
// leads, and waits for them all. A partition with no known leader gets
// CodeLeaderNotAvailable in *code(i). Afterwards the cached leader of every
// partition answered with a leader-change code is forgotten, so the next call
// refreshes it. The error is ctx's, when it ended meanwhile.
func (s *KafkaSource) perLeader(ctx context.Context, tps []TopicPartition, code func(i int) *int16, send func(leader int32, idx []int, infos []PartitionInfo)) error {
	groups, infos, noLeader := s.leaders(ctx, tps)
	for _, i := range noLeader {
		*code(i) = CodeLeaderNotAvailable
	}
	var g errgroup.Group
	for leader, idx := range groups {
		g.Go(func() error {
			send(leader, idx, infos)
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range tps {
		if leaderChangeCode(*code(i)) {
			s.forget(tps[i])
		}
	}
	return nil
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
	err := s.perLeader(ctx, tps, func(i int) *int16 { return &out[i].ErrorCode }, func(leader int32, idx []int, infos []PartitionInfo) {
		s.fetchFrom(ctx, leader, parts, infos, idx, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OffsetForLeaderEpoch implements Source with OffsetForLeaderEpoch v4 (consumer
// form, ReplicaID -1) sent to each partition's leader.
func (s *KafkaSource) OffsetForLeaderEpoch(ctx context.Context, qs []EpochQuery) ([]EpochResult, error) {
	pq := make([]partQuery, len(qs))
	for i, q := range qs {
		pq[i] = partQuery{TopicPartition{q.Topic, q.Partition}, q.CurrentLeaderEpoch, int64(q.LeaderEpoch)}
	}
	as, err := s.epochOffsets(ctx, false, pq)
	return results(as, err, func(i int, a epochOffset) EpochResult {
		return EpochResult{Topic: qs[i].Topic, Partition: qs[i].Partition, ErrorCode: a.code, LeaderEpoch: a.epoch, EndOffset: a.offset}
	})
}

// ListOffsets implements Source with ListOffsets sent to each partition's leader.
func (s *KafkaSource) ListOffsets(ctx context.Context, qs []OffsetQuery) ([]OffsetResult, error) {
	pq := make([]partQuery, len(qs))
	for i, q := range qs {
		pq[i] = partQuery{TopicPartition{q.Topic, q.Partition}, q.CurrentLeaderEpoch, q.Timestamp}
	}
	as, err := s.epochOffsets(ctx, true, pq)
	return results(as, err, func(i int, a epochOffset) OffsetResult {
		return OffsetResult{Topic: qs[i].Topic, Partition: qs[i].Partition, ErrorCode: a.code, Offset: a.offset, LeaderEpoch: a.epoch}
	})
}

// epochOffsets sends qs to their leaders as OffsetForLeaderEpoch (listing
// false) or ListOffsets (listing true) requests, one per leader (and, for
// ListOffsets, per timestamp: a request may not name a partition twice), and
// returns each partition's answer; (-1, -1) with the error code when there is
// none.
func (s *KafkaSource) epochOffsets(ctx context.Context, listing bool, qs []partQuery) ([]epochOffset, error) {
	out := make([]epochOffset, len(qs))
	tps := make([]TopicPartition, len(qs))
	for i, q := range qs {
		tps[i], out[i] = q.TopicPartition, epochOffset{code: CodeNone, epoch: epoch.UndefinedEpoch, offset: -1}
	}
	err := s.perLeader(ctx, tps, func(i int) *int16 { return &out[i].code }, func(leader int32, idx []int, _ []PartitionInfo) {
		if !listing {
			s.epochOffsetsFrom(ctx, leader, false, qs, idx, out)
			return
		}
		byTS := make(map[int64][]int)
		for _, i := range idx {
			byTS[qs[i].arg] = append(byTS[qs[i].arg], i)
		}
		for _, ids := range byTS {
			s.epochOffsetsFrom(ctx, leader, true, qs, ids, out)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// results turns the answers as into the results of a Source method, made by
// mk; nil and err when err is set.
func results[R any](as []epochOffset, err error, mk func(i int, a epochOffset) R) ([]R, error) {
	if err != nil {
		return nil, err
	}
	out := make([]R, len(as))
	for i, a := range as {
		out[i] = mk(i, a)
	}
	return out, nil
}
