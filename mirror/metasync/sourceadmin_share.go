package metasync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirror/dest"
)

// ErrShareGroupsUnsupported: the source cannot describe share groups (a broker before
// Kafka 4.0, or share groups not enabled). The sync skips share groups for the cycle,
// as the prototype does.
var ErrShareGroupsUnsupported = errors.New("mirror: source does not support share groups")

// ShareGroupSource is optionally implemented by a SourceAdmin that can read the share
// groups (KIP-932) of the source (KafkaShareSource: ListGroups with the "share" type
// filter, ShareGroupDescribe and DescribeShareGroupOffsets, Kafka 4.x).
type ShareGroupSource interface {
	// ShareGroupNames lists, sorted, every share group of the source, active or not
	// (the consumer-group sync leaves them out: they have no committed offsets).
	ShareGroupNames(ctx context.Context) ([]string, error)
	// InactiveShareGroups lists, sorted, the share groups of the source that have no
	// members (state Empty).
	InactiveShareGroups(ctx context.Context) ([]string, error)
	// ShareStartOffsets returns the share-partition start offset of every partition
	// group has share state for; partitions whose start offset is not initialized yet
	// are absent.
	ShareStartOffsets(ctx context.Context, group string) (map[dest.TopicPartition]int64, error)
}

// KafkaShareSource reads the share groups of a Kafka 4.x source with kmsg requests
// over a kgo client (sarama has none of these APIs). The client connects lazily.
type KafkaShareSource struct {
	cl *kgo.Client
}

var _ ShareGroupSource = (*KafkaShareSource)(nil)

// NewKafkaShareSource returns a KafkaShareSource over a kgo client built from opts (the
// source's seed brokers, TLS and SASL: mirror.KgoOptions of the mirror config).
func NewKafkaShareSource(opts ...kgo.Opt) (*KafkaShareSource, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: share-group client: %w", ErrSourceAdmin, err)
	}
	return &KafkaShareSource{cl: cl}, nil
}

// Close releases the client's connections.
func (s *KafkaShareSource) Close() error {
	s.cl.Close()
	return nil
}

// InactiveShareGroups implements ShareGroupSource: ListGroups (every broker) with the
// "share" type filter, then ShareGroupDescribe; a group is inactive when it is Empty
// with no members. A group that vanished between the two is left out.
func (s *KafkaShareSource) InactiveShareGroups(ctx context.Context) ([]string, error) {
	names, err := s.listShareGroups(ctx)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = names
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, shareRequestErr("describe share groups", err)
	}
	var out []string
	for _, g := range resp.Groups {
		switch err := kerr.ErrorForCode(g.ErrorCode); {
		case errors.Is(err, kerr.GroupIDNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("%w: describe share group %q: %w", ErrSourceAdmin, g.GroupID, err)
		}
		if strings.EqualFold(g.GroupState, "Empty") && len(g.Members) == 0 {
			out = append(out, g.GroupID)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ShareGroupNames implements ShareGroupSource.
func (s *KafkaShareSource) ShareGroupNames(ctx context.Context) ([]string, error) {
	return s.listShareGroups(ctx)
}

// listShareGroups lists the share groups of every broker; a broker's failure fails the
// listing (a partial list would skip groups silently).
func (s *KafkaShareSource) listShareGroups(ctx context.Context) ([]string, error) {
	if err := s.checkShareAPIs(ctx); err != nil {
		return nil, err
	}
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = []string{"share"}
	var names []string
	for _, shard := range s.cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, shareRequestErr("list share groups", shard.Err)
		}
		resp := shard.Resp.(*kmsg.ListGroupsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, fmt.Errorf("%w: list share groups on broker %d: %w", ErrSourceAdmin, shard.Meta.NodeID, err)
		}
		if resp.Version < 5 {
			return nil, fmt.Errorf("%w: broker %d answers ListGroups v%d (no group types)", ErrShareGroupsUnsupported, shard.Meta.NodeID, resp.Version)
		}
		for _, g := range resp.Groups {
			if strings.EqualFold(g.GroupType, "share") {
				names = append(names, g.Group)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

// ShareStartOffsets implements ShareGroupSource with one DescribeShareGroupOffsets for
// every topic the group has state for. A partition error fails the group, naming the
// partition.
func (s *KafkaShareSource) ShareStartOffsets(ctx context.Context, group string) (map[dest.TopicPartition]int64, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group // Topics nil: every topic with share state
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, shareRequestErr(fmt.Sprintf("describe share group %q offsets", group), err)
	}
	out := map[dest.TopicPartition]int64{}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, fmt.Errorf("%w: describe share group %q offsets: %w", ErrSourceAdmin, group, err)
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("%w: describe share group %q offsets of %s-%d: %w", ErrSourceAdmin, group, t.Topic, p.Partition, err)
				}
				if p.StartOffset >= 0 {
					out[dest.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.StartOffset
				}
			}
		}
	}
	return out, nil
}

// shareRequestErr wraps a request failure; UNSUPPORTED_VERSION is
// ErrShareGroupsUnsupported.
func shareRequestErr(what string, err error) error {
	if errors.Is(err, kerr.UnsupportedVersion) {
		return fmt.Errorf("%w: %s: %w", ErrShareGroupsUnsupported, what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrSourceAdmin, what, err)
}

// Keys of the share-group admin APIs (KIP-932).
const (
	keyShareGroupDescribe        = 77
	keyDescribeShareGroupOffsets = 90
)

// checkShareAPIs asks a broker for its API versions: without ShareGroupDescribe or
// DescribeShareGroupOffsets the source is ErrShareGroupsUnsupported.
func (s *KafkaShareSource) checkShareAPIs(ctx context.Context) error {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, s.cl)
	if err != nil {
		return fmt.Errorf("%w: api versions: %w", ErrSourceAdmin, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("%w: api versions: %w", ErrSourceAdmin, err)
	}
	have := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		have[k.ApiKey] = true
	}
	for _, k := range []int16{keyShareGroupDescribe, keyDescribeShareGroupOffsets} {
		if !have[k] {
			return fmt.Errorf("%w: the broker does not serve API key %d", ErrShareGroupsUnsupported, k)
		}
	}
	return nil
}

// A KafkaSourceAdmin reads share groups too, over its own client (one client per
// source: its Connection, dialer and SASL apply).
var _ ShareGroupSource = (*KafkaSourceAdmin)(nil)

// shares is the share-group reader over the admin's client; it owns nothing.
func (a *KafkaSourceAdmin) shares(ctx context.Context) (*KafkaShareSource, error) {
	if err := a.usable(ctx); err != nil {
		return nil, err
	}
	return &KafkaShareSource{cl: a.cl}, nil
}

// ShareGroupNames implements ShareGroupSource.
func (a *KafkaSourceAdmin) ShareGroupNames(ctx context.Context) ([]string, error) {
	s, err := a.shares(ctx)
	if err != nil {
		return nil, err
	}
	return s.ShareGroupNames(ctx)
}

// InactiveShareGroups implements ShareGroupSource.
func (a *KafkaSourceAdmin) InactiveShareGroups(ctx context.Context) ([]string, error) {
	s, err := a.shares(ctx)
	if err != nil {
		return nil, err
	}
	return s.InactiveShareGroups(ctx)
}

// ShareStartOffsets implements ShareGroupSource.
func (a *KafkaSourceAdmin) ShareStartOffsets(ctx context.Context, group string) (map[dest.TopicPartition]int64, error) {
	s, err := a.shares(ctx)
	if err != nil {
		return nil, err
	}
	return s.ShareStartOffsets(ctx, group)
}
