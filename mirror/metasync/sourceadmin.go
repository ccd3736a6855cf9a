package metasync

import (
	"context"
	"errors"
	"fmt"
	"sort"

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
