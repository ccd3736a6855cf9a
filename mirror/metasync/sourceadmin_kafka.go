package metasync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkaclient"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

// KafkaSourceAdmin is the SourceAdmin of a real Kafka cluster: kmsg requests (Metadata
// v10+, DescribeConfigs, ListGroups on every broker, OffsetFetch to the group
// coordinator, DescribeAcls) sent through one franz-go client built from the mirror's
// controller.Connection, the same as the source fetch and the peer use, so any
// sasl.Mechanism and dialer apply. The client connects lazily, on first use, and again
// after a failure, so a mirror can be defined while its source is unreachable. Every
// call is bounded by its context (and by socket.timeout.ms for retries). Safe for
// concurrent use.
type KafkaSourceAdmin struct {
	cl *kgo.Client // built from the mirror's Connection; request sends through it

	mu     sync.Mutex // guards closed
	closed bool
}

// NewKafkaSourceAdmin returns the admin of the source cluster of mc's properties
// (kafkaclient.Load: bootstrap.servers, TLS and SASL). It does not connect yet.
func NewKafkaSourceAdmin(mc controller.MirrorConfig) (*KafkaSourceAdmin, error) {
	c, err := kafkaclient.Load(mc)
	if err != nil {
		return nil, err
	}
	return NewKafkaSourceAdminConn(c, mc)
}

// NewKafkaSourceAdminConn returns the admin of the cluster reached by c, with the
// timeouts of mc; extra options follow kafkaclient.KgoOptions (the client id defaults
// to kmirror-source-admin). It does not connect yet.
func NewKafkaSourceAdminConn(c controller.Connection, mc controller.MirrorConfig, extra ...kgo.Opt) (*KafkaSourceAdmin, error) {
	opts, err := kafkaclient.KgoOptions(c, mc)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ClientID("kmirror-source-admin"))
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: client: %w", ErrSourceAdmin, err)
	}
	return &KafkaSourceAdmin{cl: cl}, nil
}

// request sends req through the client (kgo routes it: any broker, or the group
// coordinator for OffsetFetch) and returns the context's error when ctx ended.
func (a *KafkaSourceAdmin) request(ctx context.Context, what string, req kmsg.Request) (kmsg.Response, error) {
	if err := a.usable(ctx); err != nil {
		return nil, err
	}
	resp, err := a.cl.Request(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrSourceAdmin, what, err)
	}
	return resp, nil
}

// usable returns ErrSourceAdminClosed after Close, else ctx.Err().
func (a *KafkaSourceAdmin) usable(ctx context.Context) error {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return ErrSourceAdminClosed
	}
	return ctx.Err()
}

// metadata sends one Metadata request for every topic; the source must answer v10 or
// later (Kafka 2.8), where topics carry their ids.
func (a *KafkaSourceAdmin) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	resp, err := a.request(ctx, "metadata", req)
	if err != nil {
		return nil, err
	}
	m := resp.(*kmsg.MetadataResponse)
	if m.Version < 10 {
		return nil, fmt.Errorf("%w: metadata v%d carries no topic ids: the source must be Kafka 2.8 or later", ErrSourceAdmin, m.Version)
	}
	return m, nil
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

// ListTopics implements SourceAdmin with one Metadata request for every topic; topics
// the broker reports with an error are left out of this listing.
func (a *KafkaSourceAdmin) ListTopics(ctx context.Context) ([]SourceTopic, error) {
	resp, err := a.metadata(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SourceTopic, 0, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || t.Topic == nil {
			continue // e.g. LEADER_NOT_AVAILABLE while being created: listed next time
		}
		out = append(out, SourceTopic{
			Name: *t.Topic, TopicID: records.UUID(t.TopicID), Partitions: int32(len(t.Partitions)),
			Internal: t.IsInternal || internalTopics[*t.Topic],
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// TopicConfigs implements SourceAdmin with one DescribeConfigs request for all topics;
// it keeps entries whose source is the topic itself and that are not sensitive.
func (a *KafkaSourceAdmin) TopicConfigs(ctx context.Context, topics []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	if len(topics) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, t
		req.Resources = append(req.Resources, r)
	}
	resp, err := a.request(ctx, "describe configs", req)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, r := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs = append(errs, &SourceTopicError{Topic: r.ResourceName, Err: fmt.Errorf("%w: describe configs: %w (%s)", ErrSourceAdmin, err, deref(r.ErrorMessage))})
			continue
		}
		cfgs := map[string]string{}
		for _, e := range r.Configs {
			if e.IsSensitive || e.Value == nil || e.Source != kmsg.ConfigSourceDynamicTopicConfig {
				continue
			}
			cfgs[e.Name] = *e.Value
		}
		out[r.ResourceName] = cfgs
	}
	for _, t := range topics {
		if _, ok := out[t]; !ok && !hasTopicError(errs, t) {
			errs = append(errs, &SourceTopicError{Topic: t, Err: fmt.Errorf("%w: no configs returned", ErrSourceAdmin)})
		}
	}
	return out, errors.Join(errs...)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
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

// ListGroups implements SourceAdmin: ListGroups on every broker; a broker that fails
// fails the listing (a partial list would look like deleted groups).
func (a *KafkaSourceAdmin) ListGroups(ctx context.Context) ([]string, error) {
	if err := a.usable(ctx); err != nil {
		return nil, err
	}
	shards := a.cl.RequestSharded(ctx, kmsg.NewPtrListGroupsRequest())
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var out []string
	var errs []error
	for _, sh := range shards {
		if sh.Err != nil {
			errs = append(errs, sh.Err)
			continue
		}
		resp := sh.Resp.(*kmsg.ListGroupsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", sh.Meta.NodeID, err))
			continue
		}
		for _, g := range resp.Groups {
			out = append(out, g.Group)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: list groups: %w", ErrSourceAdmin, err)
	}
	sort.Strings(out)
	return out, nil
}

// GroupOffsets implements SourceAdmin (OffsetFetch for all partitions of group, sent
// to its coordinator).
func (a *KafkaSourceAdmin) GroupOffsets(ctx context.Context, group string) (map[dest.TopicPartition]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.Topics = nil // every partition
	what := fmt.Sprintf("offsets of group %q", group)
	r, err := a.request(ctx, what, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.OffsetFetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSourceAdmin, what, err)
	}
	out := map[dest.TopicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Offset < 0 {
				continue
			}
			out[dest.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
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
	a.cl.Close()
	return nil
}
