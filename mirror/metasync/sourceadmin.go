package metasync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/IBM/sarama"

	"github.com/kmirror/kmirror/internal/kafkaclient"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

// Errors of the source admin.
var (
	// ErrSourceAdmin wraps every failure of a source cluster admin request.
	ErrSourceAdmin = errors.New("mirror: source admin")
	// ErrSourceAdminClosed is returned by a SourceAdmin used after Close.
	ErrSourceAdminClosed = errors.New("mirror: source admin closed")
)

// SourceTopic describes one topic of the source cluster.
type SourceTopic struct {
	Name       string
	TopicID    records.UUID
	Partitions int32
	// Internal is Kafka's internal flag (__consumer_offsets, __transaction_state, ...).
	Internal bool
}

// SourceAdmin is what the metadata sync needs from a source cluster (spec §17). The
// methods take a context for cancellation; an implementation whose client does not
// support cancellation checks ctx before each request. Implementations must be safe for
// concurrent use.
type SourceAdmin interface {
	// ClusterID returns the source cluster's id.
	ClusterID(ctx context.Context) (string, error)
	// ListTopics lists every topic of the source, sorted by name.
	ListTopics(ctx context.Context) ([]SourceTopic, error)
	// TopicConfigs returns, per topic, the configs set on the topic itself: no default,
	// broker-level or sensitive values. Topics that could not be described are absent
	// from the map and reported in the error (an errors.Join of *SourceTopicError); the
	// map is still valid for the others.
	TopicConfigs(ctx context.Context, topics []string) (map[string]map[string]string, error)
	// ListGroups lists the consumer groups of the source, sorted.
	ListGroups(ctx context.Context) ([]string, error)
	// GroupOffsets returns the committed offsets of group (partitions with no committed
	// offset are absent).
	GroupOffsets(ctx context.Context, group string) (map[dest.TopicPartition]int64, error)
	// Close releases the connections.
	Close() error
}

// SourceTopicError is a failure about one topic of a source admin request.
type SourceTopicError struct {
	Topic string
	Err   error
}

// Error implements error.
func (e *SourceTopicError) Error() string {
	return fmt.Sprintf("mirror: source topic %q: %v", e.Topic, e.Err)
}

// Unwrap returns the cause.
func (e *SourceTopicError) Unwrap() error { return e.Err }

// internalTopics are the topics Kafka itself flags internal.
var internalTopics = map[string]bool{
	"__consumer_offsets": true, "__transaction_state": true, "__share_group_state": true,
}

// SaramaConfig builds a sarama client configuration from a mirror's connection settings:
// protocol version 3.6 (Metadata v10+ carries topic ids), TLS from the PEM files named by
// the ssl.* keys, and SASL PLAIN or SCRAM-SHA-256/512 with sasl.username/sasl.password.
func SaramaConfig(mc controller.MirrorConfig, clientID string) (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	if clientID != "" {
		cfg.ClientID = clientID
	}
	if mc.RequestTimeout > 0 {
		cfg.Net.DialTimeout = mc.RequestTimeout
		cfg.Net.ReadTimeout = mc.RequestTimeout
		cfg.Net.WriteTimeout = mc.RequestTimeout
		cfg.Admin.Timeout = mc.RequestTimeout
	}
	switch mc.SecurityProtocol {
	case "SSL", "SASL_SSL":
		tc, err := kafkaclient.TLSConfig(mc)
		if err != nil {
			return nil, err
		}
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tc
	}
	switch mc.SecurityProtocol {
	case "SASL_PLAINTEXT", "SASL_SSL":
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.User = mc.SASLUsername
		cfg.Net.SASL.Password = mc.SASLPassword
		cfg.Net.SASL.Handshake = true
		switch mc.SASLMechanism {
		case "PLAIN", "":
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case "SCRAM-SHA-256":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newSCRAMClient(scramSHA256) }
		case "SCRAM-SHA-512":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newSCRAMClient(scramSHA512) }
		default:
			return nil, fmt.Errorf("mirror: unsupported sasl.mechanism %q", mc.SASLMechanism)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mirror: sarama config: %w", err)
	}
	return cfg, nil
}

// KafkaSourceAdmin is the SourceAdmin of a real Kafka cluster, built on a sarama Client
// and ClusterAdmin. It connects lazily, on first use, and again after a failed connect,
// so a mirror can be defined while its source is unreachable. sarama requests cannot be
// cancelled: ctx is checked before each request and the request itself is bounded by
// request.timeout.ms. Safe for concurrent use.
type KafkaSourceAdmin struct {
	brokers []string
	cfg     *sarama.Config

	mu      sync.Mutex // guards the fields below
	client  sarama.Client
	admin   sarama.ClusterAdmin
	dialing *saramaDial // the connection attempt in progress, nil if none
	closed  bool
}

// NewKafkaSourceAdmin returns the admin of the source cluster of mc (bootstrap.servers,
// TLS and SASL settings). It does not connect yet.
func NewKafkaSourceAdmin(mc controller.MirrorConfig) (*KafkaSourceAdmin, error) {
	cfg, err := SaramaConfig(mc, "kmirror-source-admin")
	if err != nil {
		return nil, err
	}
	return NewKafkaSourceAdminWith(mc.BootstrapServers, cfg)
}

// NewKafkaSourceAdminWith is NewKafkaSourceAdmin with a caller-built sarama config; its
// Version must be at least 2.8 (Metadata v10 carries topic ids).
func NewKafkaSourceAdminWith(brokers []string, cfg *sarama.Config) (*KafkaSourceAdmin, error) {
	if !cfg.Version.IsAtLeast(sarama.V2_8_0_0) {
		return nil, fmt.Errorf("%w: sarama version %s is below 2.8: no topic ids", ErrSourceAdmin, cfg.Version)
	}
	if len(brokers) == 0 {
		return nil, fmt.Errorf("%w: no bootstrap servers", ErrSourceAdmin)
	}
	return &KafkaSourceAdmin{brokers: append([]string(nil), brokers...), cfg: cfg}, nil
}

// conn returns the client and admin, connecting when needed: one attempt at
// a time, on its own goroutine (dial), which callers wait for until ctx ends.
func (a *KafkaSourceAdmin) conn(ctx context.Context) (sarama.Client, sarama.ClusterAdmin, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		a.mu.Lock()
		switch {
		case a.closed:
			a.mu.Unlock()
			return nil, nil, ErrSourceAdminClosed
		case a.client != nil:
			client, adm := a.client, a.admin
			a.mu.Unlock()
			return client, adm, nil
		case a.dialing == nil:
			a.dialing = &saramaDial{done: make(chan struct{})}
			go a.dial(a.dialing)
		}
		d := a.dialing
		a.mu.Unlock()
		select {
		case <-d.done:
			if d.err != nil {
				return nil, nil, d.err
			}
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// saramaDial is one connection attempt; err is set before done is closed.
type saramaDial struct {
	done chan struct{}
	err  error
}

// dial connects (sarama.NewClient ignores contexts and retries metadata for
// as long as its config says) and installs the client, unless the admin was
// closed meanwhile.
func (a *KafkaSourceAdmin) dial(d *saramaDial) {
	defer close(d.done)
	client, err := sarama.NewClient(a.brokers, a.cfg)
	var adm sarama.ClusterAdmin
	if err != nil {
		err = fmt.Errorf("%w: connect %v: %w", ErrSourceAdmin, a.brokers, err)
	} else if adm, err = sarama.NewClusterAdminFromClient(client); err != nil {
		_ = client.Close()
		err = fmt.Errorf("%w: %w", ErrSourceAdmin, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dialing = nil
	switch {
	case err != nil:
		d.err = err
	case a.closed:
		d.err = ErrSourceAdminClosed
		_ = adm.Close() // closes the client too
	default:
		a.client, a.admin = client, adm
	}
}

// bounded runs fn, a sarama call that ignores contexts, on its own goroutine
// and returns its result, or ctx.Err() as soon as ctx ends; an abandoned call
// finishes in the background within sarama's own timeouts (Net.ReadTimeout,
// from request.timeout.ms) and its result is dropped.
func bounded[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// broker returns a connected broker of the source cluster.
func (a *KafkaSourceAdmin) broker(ctx context.Context) (*sarama.Broker, error) {
	client, _, err := a.conn(ctx)
	if err != nil {
		return nil, err
	}
	b, err := bounded(ctx, func() (*sarama.Broker, error) { return connectedBroker(client) })
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSourceAdmin, err)
	}
	return b, nil
}

// connectedBroker returns the least loaded broker of client, opened.
func connectedBroker(client sarama.Client) (*sarama.Broker, error) {
	b := client.LeastLoadedBroker()
	if b == nil {
		if err := client.RefreshMetadata(); err != nil {
			return nil, err
		}
		if b = client.LeastLoadedBroker(); b == nil {
			return nil, sarama.ErrOutOfBrokers
		}
	}
	if err := b.Open(client.Config()); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
		return nil, err
	}
	return b, nil
}

// metadata sends one Metadata v10 request. A broker connection that fails (the
// source restarted, the connection was cut) is closed so that the next attempt
// reconnects; the request is tried once more on a fresh connection before the
// failure is returned.
func (a *KafkaSourceAdmin) metadata(ctx context.Context) (*sarama.MetadataResponse, error) {
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		b, err := a.broker(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := bounded(ctx, func() (*sarama.MetadataResponse, error) {
			return b.GetMetadata(&sarama.MetadataRequest{Version: 10})
		})
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		_ = b.Close() // raw broker requests never reconnect by themselves
		lastErr = err
	}
	return nil, fmt.Errorf("%w: metadata: %w", ErrSourceAdmin, lastErr)
}

// ClusterID implements SourceAdmin (from the Metadata response).
func (a *KafkaSourceAdmin) ClusterID(ctx context.Context) (string, error) {
	resp, err := a.metadata(ctx)
	if err != nil {
		return "", err
	}
	if resp.ClusterID == nil {
		return "", fmt.Errorf("%w: the source returned no cluster id", ErrSourceAdmin)
	}
	return *resp.ClusterID, nil
}

// ListTopics implements SourceAdmin with one Metadata v10 request for every topic;
// topics the broker reports with an error are left out of this listing.
func (a *KafkaSourceAdmin) ListTopics(ctx context.Context) ([]SourceTopic, error) {
	resp, err := a.metadata(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SourceTopic, 0, len(resp.Topics))
	for _, t := range resp.Topics {
		if !errors.Is(t.Err, sarama.ErrNoError) {
			continue // e.g. LEADER_NOT_AVAILABLE while being created: listed next time
		}
		out = append(out, SourceTopic{
			Name: t.Name, TopicID: records.UUID(t.Uuid), Partitions: int32(len(t.Partitions)),
			Internal: t.IsInternal || internalTopics[t.Name],
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// TopicConfigs implements SourceAdmin with one DescribeConfigs call for all topics;
// it keeps entries whose source is the topic itself and that are not sensitive.
func (a *KafkaSourceAdmin) TopicConfigs(ctx context.Context, topics []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	if len(topics) == 0 {
		return out, nil
	}
	_, adm, err := a.conn(ctx)
	if err != nil {
		return nil, err
	}
	resources := make([]*sarama.ConfigResource, 0, len(topics))
	for _, t := range topics {
		resources = append(resources, &sarama.ConfigResource{Type: sarama.TopicResource, Name: t})
	}
	results, err := bounded(ctx, func() ([]*sarama.ConfigResourceResult, error) {
		return adm.DescribeConfigs(resources, sarama.DescribeConfigsOptions{})
	})
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: describe configs: %w", ErrSourceAdmin, err)
	}
	var errs []error
	for _, r := range results {
		if r.ErrorCode != sarama.ErrNoError {
			errs = append(errs, &SourceTopicError{Topic: r.Name, Err: fmt.Errorf("%w: describe configs: %w (%s)", ErrSourceAdmin, r.ErrorCode, r.ErrorMsg)})
			continue
		}
		cfgs := map[string]string{}
		for _, e := range r.Configs {
			if e.Sensitive || e.Default || e.Source != sarama.SourceTopic {
				continue
			}
			cfgs[e.Name] = e.Value
		}
		out[r.Name] = cfgs
	}
	for _, t := range topics {
		if _, ok := out[t]; !ok && !hasTopicError(errs, t) {
			errs = append(errs, &SourceTopicError{Topic: t, Err: fmt.Errorf("%w: no configs returned", ErrSourceAdmin)})
		}
	}
	return out, errors.Join(errs...)
}

func hasTopicError(errs []error, topic string) bool {
	for _, e := range errs {
		var te *SourceTopicError
		if errors.As(e, &te) && te.Topic == topic {
			return true
		}
	}
	return false
}

// ListGroups implements SourceAdmin (consumer groups of every broker).
func (a *KafkaSourceAdmin) ListGroups(ctx context.Context) ([]string, error) {
	_, adm, err := a.conn(ctx)
	if err != nil {
		return nil, err
	}
	groups, err := bounded(ctx, adm.ListConsumerGroups)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: list groups: %w", ErrSourceAdmin, err)
	}
	out := make([]string, 0, len(groups))
	for g := range groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out, nil
}

// GroupOffsets implements SourceAdmin (OffsetFetch for all partitions of group).
func (a *KafkaSourceAdmin) GroupOffsets(ctx context.Context, group string) (map[dest.TopicPartition]int64, error) {
	_, adm, err := a.conn(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := bounded(ctx, func() (*sarama.OffsetFetchResponse, error) {
		return adm.ListConsumerGroupOffsets(group, nil)
	})
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: offsets of group %q: %w", ErrSourceAdmin, group, err)
	}
	if !errors.Is(resp.Err, sarama.ErrNoError) {
		return nil, fmt.Errorf("%w: offsets of group %q: %w", ErrSourceAdmin, group, resp.Err)
	}
	out := map[dest.TopicPartition]int64{}
	for topic, parts := range resp.Blocks {
		for p, blk := range parts {
			if blk == nil || !errors.Is(blk.Err, sarama.ErrNoError) || blk.Offset < 0 {
				continue
			}
			out[dest.TopicPartition{Topic: topic, Partition: p}] = blk.Offset
		}
	}
	return out, nil
}

// Close implements SourceAdmin.
func (a *KafkaSourceAdmin) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	if a.admin == nil {
		return nil
	}
	return a.admin.Close() // closes the client too
}

// GroupLister is optionally implemented by a Destination (next to GroupOffsets) that can
// list the groups it stores offsets for.
type GroupLister interface {
	Groups() []string
}

// LocalSourceAdmin is a SourceAdmin over an in-process Destination, so that a kmirror
// site can be the source of another (reverse mirroring, simulations). Topics come from
// Destination.Topics, configs from TopicSpec.Configs, offsets from the Destination's
// GroupOffsets. Groups come from a GroupLister Destination, else from the Groups
// function given to NewLocalSourceAdmin. Safe for concurrent use when the Destination
// is.
type LocalSourceAdmin struct {
	dest   dest.Destination
	groups func() []string
}

// NewLocalSourceAdmin returns a SourceAdmin over dest. groups lists the groups to offer
// when dest does not implement GroupLister (nil: none).
func NewLocalSourceAdmin(d dest.Destination, groups func() []string) *LocalSourceAdmin {
	return &LocalSourceAdmin{dest: d, groups: groups}
}

// ClusterID implements SourceAdmin.
func (a *LocalSourceAdmin) ClusterID(ctx context.Context) (string, error) {
	return a.dest.ClusterID(), ctx.Err()
}

// ListTopics implements SourceAdmin.
func (a *LocalSourceAdmin) ListTopics(ctx context.Context) ([]SourceTopic, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	specs := a.dest.Topics()
	out := make([]SourceTopic, 0, len(specs))
	for _, s := range specs {
		out = append(out, SourceTopic{Name: s.Name, TopicID: s.TopicID, Partitions: s.Partitions, Internal: internalTopics[s.Name]})
	}
	return out, nil
}

// TopicConfigs implements SourceAdmin.
func (a *LocalSourceAdmin) TopicConfigs(ctx context.Context, topics []string) (map[string]map[string]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	var errs []error
	for _, t := range topics {
		s, ok := a.dest.Topic(t)
		if !ok {
			errs = append(errs, &SourceTopicError{Topic: t, Err: fmt.Errorf("%w: unknown topic", ErrSourceAdmin)})
			continue
		}
		out[t] = dest.CloneConfigs(s.Configs)
	}
	return out, errors.Join(errs...)
}

// ListGroups implements SourceAdmin.
func (a *LocalSourceAdmin) ListGroups(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var gs []string
	if gl, ok := a.dest.(GroupLister); ok {
		gs = gl.Groups()
	} else if a.groups != nil {
		gs = a.groups()
	}
	gs = append([]string(nil), gs...)
	sort.Strings(gs)
	return gs, nil
}

// GroupOffsets implements SourceAdmin.
func (a *LocalSourceAdmin) GroupOffsets(ctx context.Context, group string) (map[dest.TopicPartition]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g, ok := a.dest.(dest.GroupOffsets)
	if !ok {
		return nil, fmt.Errorf("%w: the destination stores no group offsets", ErrSourceAdmin)
	}
	out := map[dest.TopicPartition]int64{}
	for tp, off := range g.CommittedOffsets(group) {
		out[tp] = off
	}
	return out, nil
}

// Close implements SourceAdmin; the Destination stays open (its owner closes it).
func (a *LocalSourceAdmin) Close() error { return nil }
