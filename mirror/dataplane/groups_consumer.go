package dataplane

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/internal/consumergroup"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// Defaults of the consumer group protocol's Config fields.
const (
	// DefaultConsumerSessionTimeout is Kafka's group.consumer.session.timeout.ms.
	DefaultConsumerSessionTimeout = consumergroup.DefaultSessionTimeout
	// DefaultConsumerHeartbeatInterval is Kafka's group.consumer.heartbeat.interval.ms.
	DefaultConsumerHeartbeatInterval = consumergroup.DefaultHeartbeatInterval
	// DefaultMaxConsumerGroupSize bounds the members of one consumer group
	// (Kafka's group.consumer.max.size, unbounded in Kafka).
	DefaultMaxConsumerGroupSize = consumergroup.DefaultMaxMembers
	// DefaultMaxConsumerGroups bounds the consumer groups with members.
	DefaultMaxConsumerGroups = 10000
	// consumerTickInterval is how often member sessions and rebalance
	// timeouts are checked.
	consumerTickInterval = time.Second
)

// consumerConfig is the consumer coordinator's part of Config, defaults
// applied.
type consumerConfig struct {
	group     consumergroup.Config
	maxGroups int
}

// consumerGroups is the coordinator of the KIP-848 consumer group protocol
// (ConsumerGroupHeartbeat, ConsumerGroupDescribe): one pure
// consumergroup.Group per group with members, under one lock, driven by
// the heartbeats and by a ticker that expires sessions. Membership is kept
// in memory only (see Groups in the package documentation): after a
// restart a member's heartbeat is UNKNOWN_MEMBER_ID and it rejoins, its
// committed offsets kept by mirror.GroupOffsets.
type consumerGroups struct {
	cfg consumerConfig
	reg *groupRegistry
	dst mirror.Destination
	now func() time.Time

	mu     sync.Mutex
	groups map[string]*consumergroup.Group

	done chan struct{} // closed when the ticker goroutine has returned
}

func newConsumerGroups(cfg consumerConfig, reg *groupRegistry, dst mirror.Destination) *consumerGroups {
	c := &consumerGroups{cfg: cfg, reg: reg, dst: dst, now: time.Now, groups: map[string]*consumergroup.Group{}, done: make(chan struct{})}
	reg.register(c)
	return c
}

// run expires sessions and rebalance timeouts until closing closes.
func (c *consumerGroups) run(closing <-chan struct{}) {
	defer close(c.done)
	t := time.NewTicker(consumerTickInterval)
	defer t.Stop()
	for {
		select {
		case <-closing:
			return
		case <-t.C:
			c.tick()
		}
	}
}

// tick expires members of every group and drops the groups left empty.
func (c *consumerGroups) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now, md := c.now(), destMetadata{c.dst}
	for id, g := range c.groups {
		g.Tick(now, md)
		c.dropIfEmptyLocked(id, g)
	}
}

// dropIfEmptyLocked forgets a group without members and releases its id
// (its committed offsets stay in mirror.GroupOffsets).
func (c *consumerGroups) dropIfEmptyLocked(id string, g *consumergroup.Group) {
	if g.Empty() {
		delete(c.groups, id)
		c.reg.release(id, c)
	}
}

// destMetadata is the Destination's topics as consumergroup.Metadata.
type destMetadata struct{ dst mirror.Destination }

func (m destMetadata) Topic(name string) (consumergroup.Topic, bool) {
	spec, ok := m.dst.Topic(name)
	if !ok {
		return consumergroup.Topic{}, false
	}
	return consumergroup.Topic{Name: spec.Name, ID: spec.TopicID, Partitions: spec.Partitions}, true
}

func (m destMetadata) TopicNames() []string {
	ts := m.dst.Topics()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// groupType implements groupProtocol.
func (c *consumerGroups) groupType() string { return GroupTypeConsumer }

// view implements groupProtocol: ListGroups shows the group as a
// "consumer" group with protocol type "consumer"; DescribeGroups answers
// it as Kafka does for a group that is not classic (Dead; GROUP_ID_NOT_FOUND
// from v6), ConsumerGroupDescribe describes it.
func (c *consumerGroups) view(group string) (groupView, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		return groupView{}, false
	}
	return groupView{Group: group, Type: GroupTypeConsumer, State: g.State(), ProtocolType: "consumer", DescribeCode: codeGroupIDNotFound}, true
}

// active implements groupProtocol.
func (c *consumerGroups) active(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	return g != nil && !g.Empty()
}

// whileInactive implements groupProtocol: fn runs under the lock heartbeats
// take, so no member joins while it runs.
func (c *consumerGroups) whileInactive(group string, fn func() error) (ran, owned bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reg.ownerOf(group) != groupProtocol(c) {
		return false, false, nil
	}
	if g := c.groups[group]; g != nil && !g.Empty() {
		return false, true, nil
	}
	return true, true, fn()
}

// validateCommit implements groupProtocol with Kafka's ConsumerGroup checks
// of OffsetCommit and TxnOffsetCommit: a memberless commit only while the
// group is empty, a member's at its current epoch (STALE_MEMBER_EPOCH), with
// OffsetCommit v9 or later unless transactional (UNSUPPORTED_VERSION).
func (c *consumerGroups) validateCommit(group string, mc memberCommit) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		if mc.Generation < 0 && mc.MemberID == "" {
			return 0
		}
		return codeUnknownMemberID
	}
	return g.ValidateCommit(mc.MemberID, mc.Generation, mc.Version, mc.Transactional)
}

// validateFetch checks an OffsetFetch v9 of a member (id and epoch) of a
// consumer group: 0, UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH. A group this
// protocol does not hold answers 0 (Kafka's classic groups check nothing).
func (c *consumerGroups) validateFetch(group, memberID string, epoch int32) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		return 0
	}
	return g.ValidateFetch(memberID, epoch)
}

// heartbeat runs one heartbeat of a request consumergroup.Validate accepted.
func (c *consumerGroups) heartbeat(group string, req consumergroup.Request) consumergroup.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	now, md := c.now(), destMetadata{c.dst}
	g := c.groups[group]
	if g == nil {
		if o := c.reg.ownerOf(group); o != nil && o != groupProtocol(c) {
			return consumergroup.Response{ErrorCode: codeGroupIDNotFound, ErrorMessage: fmt.Sprintf("Group %s is not a consumer group.", group)}
		}
		if req.MemberEpoch != consumergroup.EpochJoin {
			// Kafka answers GROUP_ID_NOT_FOUND for a group it does not know; this
			// site keeps membership in memory, so a member of a group it forgot
			// (a restart, a failover) is told it is unknown and rejoins.
			return consumergroup.Response{ErrorCode: codeUnknownMemberID, ErrorMessage: fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, group)}
		}
		if len(c.groups) >= c.cfg.maxGroups {
			return consumergroup.Response{ErrorCode: codeCoordinatorNotAvailable, ErrorMessage: fmt.Sprintf("this site holds %d consumer groups, its maximum", c.cfg.maxGroups)}
		}
		if !c.reg.claim(group, c) {
			return consumergroup.Response{ErrorCode: codeGroupIDNotFound, ErrorMessage: fmt.Sprintf("Group %s is not a consumer group.", group)}
		}
		g = consumergroup.New(group, c.cfg.group)
		c.groups[group] = g
	}
	resp := g.Heartbeat(now, req, md)
	c.dropIfEmptyLocked(group, g)
	return resp
}

// describe returns the description of a group this protocol holds.
func (c *consumerGroups) describe(group string) (consumergroup.Description, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		return consumergroup.Description{}, false
	}
	return g.Describe(), true
}

// newConsumerMemberID returns a member id as Kafka's Uuid.toString makes
// them (22 characters of URL-safe base64), for a v0 heartbeat joining
// without one.
func newConsumerMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// consumerGroupHeartbeat serves ConsumerGroupHeartbeat (v0-v1).
func (dp *DataPlane) consumerGroupHeartbeat(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	answer := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	switch {
	case dp.groups() == nil:
		return answer(codeCoordinatorNotAvailable, "this destination keeps no group offsets")
	case r.Group == "":
		return answer(codeInvalidRequest, "GroupId can't be empty.")
	}
	creq := consumergroup.Request{Version: r.Version, MemberID: r.MemberID, MemberEpoch: r.MemberEpoch, InstanceID: r.InstanceID,
		RackID: r.RackID, RebalanceTimeout: r.RebalanceTimeoutMillis, SubscribedTopics: r.SubscribedTopicNames,
		SubscribedRegex: r.SubscribedTopicRegex, ServerAssignor: r.ServerAssignor, OwnedSent: r.Topics != nil}
	for _, t := range r.Topics {
		creq.Owned = append(creq.Owned, consumergroup.TopicPartitions{TopicID: t.TopicID, Partitions: t.Partitions})
	}
	if rc, ok := admin.RequestContextFrom(ctx); ok {
		if rc.ClientID != nil {
			creq.ClientID = *rc.ClientID
		}
		creq.ClientHost = "/" + rc.RemoteAddr
		if h, _, err := net.SplitHostPort(rc.RemoteAddr); err == nil {
			creq.ClientHost = "/" + h
		}
	}
	if code, msg := consumergroup.Validate(creq, dp.consumer.cfg.group); code != 0 {
		return answer(code, msg)
	}
	if creq.MemberID == "" && creq.MemberEpoch == consumergroup.EpochJoin {
		creq.MemberID = newConsumerMemberID() // v0: the coordinator names the member
	}
	out := dp.consumer.heartbeat(r.Group, creq)
	if out.ErrorCode != 0 {
		return answer(out.ErrorCode, out.ErrorMessage)
	}
	resp.MemberID, resp.MemberEpoch = &out.MemberID, out.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(out.HeartbeatInterval / time.Millisecond)
	if out.HasAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		for _, t := range out.Assignment {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = t.TopicID, t.Partitions
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp, nil
}

// consumerGroupDescribe serves ConsumerGroupDescribe (v0-v1): a consumer
// group with its epochs, assignor and members (assignment and target by
// topic id and name); GROUP_ID_NOT_FOUND for a group that is not a consumer
// group with members, as Kafka answers (the Java admin client then asks
// DescribeGroups).
func (dp *DataPlane) consumerGroupDescribe(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.ConsumerGroupDescribeRequest)
	resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	var names map[records.UUID]string
	for _, id := range r.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = id
		d, ok := dp.consumer.describe(id)
		switch {
		case dp.groups() == nil:
			g.ErrorCode = codeCoordinatorNotAvailable
		case id == "":
			g.ErrorCode = codeInvalidGroupID
		case !ok && dp.groupReg.ownerOf(id) != nil:
			g.ErrorCode, g.ErrorMessage = codeGroupIDNotFound, kmsg.StringPtr(fmt.Sprintf("Group %s is not a consumer group.", id))
		case !ok:
			g.ErrorCode, g.ErrorMessage = codeGroupIDNotFound, kmsg.StringPtr(fmt.Sprintf("Group %s not found.", id))
		}
		if g.ErrorCode != 0 {
			g.State = stateDead
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if names == nil {
			names = map[records.UUID]string{}
			for _, t := range dp.dst.Topics() {
				names[t.TopicID] = t.Name
			}
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.MemberID, m.InstanceID, m.RackID, m.MemberEpoch
			dm.ClientID, dm.ClientHost, dm.SubscribedTopics, dm.SubscribedTopicRegex = m.ClientID, m.ClientHost, m.SubscribedTopics, m.SubscribedRegex
			dm.Assignment.TopicPartitions = describedPartitions(m.Assignment, names)
			dm.TargetAssignment.TopicPartitions = describedPartitions(m.TargetAssignment, names)
			dm.MemberType = 1 // a consumer-protocol member (v1)
			g.Members = append(g.Members, dm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func describedPartitions(tps []consumergroup.TopicPartitions, names map[records.UUID]string) []kmsg.AssignmentTopicPartition {
	out := make([]kmsg.AssignmentTopicPartition, 0, len(tps))
	for _, t := range tps {
		p := kmsg.NewAssignmentTopicPartition()
		p.TopicID, p.Topic, p.Partitions = t.TopicID, names[t.TopicID], t.Partitions
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}
