package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirror"
)

// consumerSiteConfig has short consumer-protocol timeouts for tests.
func consumerSiteConfig() Config {
	c := groupSiteConfig()
	c.ConsumerSessionTimeout, c.ConsumerHeartbeatInterval = 2*time.Second, 100*time.Millisecond
	return c
}

func consumerDescribe(t *testing.T, s *site, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := s.dp.Serve(context.Background(), req)
	require.NoError(t, err)
	return resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
}

func listGroup(t *testing.T, s *site, group string) (kmsg.ListGroupsResponseGroup, bool) {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	resp, err := s.dp.Serve(context.Background(), req)
	require.NoError(t, err)
	for _, g := range resp.(*kmsg.ListGroupsResponse).Groups {
		if g.Group == group {
			return g, true
		}
	}
	return kmsg.ListGroupsResponseGroup{}, false
}

// TestConsumerGroupKgo: kgo consumers with the KIP-848 protocol (server-side
// uniform and range assignors) join a site's group, split its partitions,
// rebalance when a member joins, leaves and dies (session timeout), commit
// at their member epoch, and a new consumer resumes from the committed
// offsets. The group shows as a "consumer" group in ListGroups and in
// ConsumerGroupDescribe, and the offset sync's activity query sees it.
func TestConsumerGroupKgo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		assignor string
	}{
		{"uniform", kgo.CooperativeStickyBalancer(), "uniform"},
		{"range", kgo.RangeBalancer(), "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSite(t, consumerSiteConfig())
			const parts = 4
			s.topic(t, "t", parts)
			produceN(t, s, "t", "r1", parts, 10)

			a := startGroupConsumer(t, s, "g", "t", tc.balancer, kgo.ServerSideBalancer())
			waitAssigned(t, parts, []int{4}, a)
			require.Eventually(t, func() bool { return len(a.seen()) == 40 }, 20*time.Second, 20*time.Millisecond)

			b := startGroupConsumer(t, s, "g", "t", tc.balancer, kgo.ServerSideBalancer())
			waitAssigned(t, parts, []int{2, 2}, a, b)
			d := consumerDescribe(t, s, "g")
			require.Zero(t, d.ErrorCode)
			require.Equal(t, tc.assignor, d.AssignorName)
			require.Len(t, d.Members, 2)
			for _, m := range d.Members {
				require.Len(t, m.Assignment.TopicPartitions, 1)
				require.Equal(t, "t", m.Assignment.TopicPartitions[0].Topic)
				require.Len(t, m.Assignment.TopicPartitions[0].Partitions, 2)
			}
			lg, ok := listGroup(t, s, "g")
			require.True(t, ok)
			require.Equal(t, "consumer", lg.GroupType)
			require.Equal(t, "consumer", lg.ProtocolType)
			require.True(t, s.dp.GroupActive("g"))
			ran, err := s.dp.CommitIfInactive("g", func() error { return nil })
			require.NoError(t, err)
			require.False(t, ran, "the offset sync must not write an active consumer group")
			// DescribeGroups (the classic API) answers it Dead, as Kafka does.
			require.Equal(t, stateDead, describe(t, s, "g").State)

			produceN(t, s, "t", "r2", parts, 10)
			require.Eventually(t, func() bool {
				union := a.seen()
				for k := range b.seen() {
					union[k]++
				}
				return len(union) == 80
			}, 20*time.Second, 20*time.Millisecond)

			// A third member dies without leaving: the session timeout removes it.
			c := startGroupConsumer(t, s, "g", "t", tc.balancer, kgo.ServerSideBalancer())
			waitAssigned(t, parts, []int{1, 1, 2}, a, b, c)
			c.kill.kill()
			waitAssigned(t, parts, []int{2, 2}, a, b)
			c.cl.Close()
			committedAll := func(want int64) func() bool {
				return func() bool {
					committed := s.dst.CommittedOffsets("g")
					for p := int32(0); p < parts; p++ {
						if committed[mirror.TopicPartition{Topic: "t", Partition: p}] != want {
							return false
						}
					}
					return true
				}
			}
			require.Eventually(t, committedAll(20), 20*time.Second, 20*time.Millisecond, "members commit")

			// b leaves: a owns everything again.
			b.close(t)
			waitAssigned(t, parts, []int{4}, a)
			require.Len(t, consumerDescribe(t, s, "g").Members, 1)

			a.close(t)
			require.Eventually(t, func() bool { return !s.dp.GroupActive("g") }, 10*time.Second, 10*time.Millisecond)
			require.Equal(t, codeGroupIDNotFound, consumerDescribe(t, s, "g").ErrorCode)
			require.True(t, committedAll(20)(), "%v", s.dst.CommittedOffsets("g"))
			ran, err = s.dp.CommitIfInactive("g", func() error { return nil })
			require.NoError(t, err)
			require.True(t, ran, "an empty group's offsets may be synced")

			// A new consumer resumes where the group left off.
			produceN(t, s, "t", "r3", parts, 1)
			n := startGroupConsumer(t, s, "g", "t", tc.balancer, kgo.ServerSideBalancer())
			require.Eventually(t, func() bool { return len(n.seen()) == 4 }, 20*time.Second, 20*time.Millisecond)
			for v := range n.seen() {
				require.Regexp(t, `^r3-p\d-0$`, v)
			}
			n.close(t)
		})
	}
}

// hb is a ConsumerGroupHeartbeat v1 of member in group.
func hb(group, member string, epoch int32, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, group, member, epoch
	r.RebalanceTimeoutMillis = -1
	if epoch == 0 {
		r.RebalanceTimeoutMillis, r.SubscribedTopicNames = 5000, topics
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	return r
}

func serveHB(t *testing.T, s *site, r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	resp, err := s.dp.Serve(context.Background(), r)
	require.NoError(t, err)
	return resp.(*kmsg.ConsumerGroupHeartbeatResponse)
}

func memberCommitReq(version int16, group, member string, epoch int32, topic string, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, group, member, epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return req
}

func commitCode(t *testing.T, s *site, req *kmsg.OffsetCommitRequest) int16 {
	t.Helper()
	resp, err := s.dp.Serve(context.Background(), req)
	require.NoError(t, err)
	return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// TestConsumerGroupWire: the heartbeat's answers on the wire (assignment by
// topic id, epochs, Kafka's codes), offset commits and fetches fenced by
// member epoch, and a group id owned by the classic protocol refused as
// Kafka refuses it (GROUP_ID_NOT_FOUND here, INCONSISTENT_GROUP_PROTOCOL for
// a JoinGroup on a consumer group).
func TestConsumerGroupWire(t *testing.T) {
	s := startSite(t, consumerSiteConfig())
	spec := s.topic(t, "t", 1)

	resp := serveHB(t, s, hb("g", "m1", 0, "t"))
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, int32(1), resp.MemberEpoch)
	require.Equal(t, int32(100), resp.HeartbeatIntervalMillis)
	require.NotNil(t, resp.Assignment)
	require.Len(t, resp.Assignment.Topics, 1)
	require.Equal(t, [16]byte(spec.TopicID), resp.Assignment.Topics[0].TopicID)
	require.Equal(t, []int32{0}, resp.Assignment.Topics[0].Partitions)

	// Malformed heartbeats.
	bad := hb("g", "", 0, "t")
	require.Equal(t, codeInvalidRequest, serveHB(t, s, bad).ErrorCode, "v1 without a member id")
	bad = hb("g", "m9", 0, "t")
	bad.RebalanceTimeoutMillis = -1
	require.Equal(t, codeInvalidRequest, serveHB(t, s, bad).ErrorCode, "join without a rebalance timeout")
	bad = hb("g", "m9", 0, "t")
	bad.ServerAssignor = kmsg.StringPtr("sticky")
	require.Equal(t, int16(112), serveHB(t, s, bad).ErrorCode, "UNSUPPORTED_ASSIGNOR")
	require.Equal(t, codeInvalidRequest, serveHB(t, s, hb("", "m9", 0, "t")).ErrorCode, "empty group id")
	require.Equal(t, int16(110), serveHB(t, s, hb("g", "m1", 7)).ErrorCode, "FENCED_MEMBER_EPOCH")
	require.Equal(t, codeUnknownMemberID, serveHB(t, s, hb("g", "nobody", 1)).ErrorCode)
	// A member of a group this site does not hold (it restarted) is unknown and rejoins.
	require.Equal(t, codeUnknownMemberID, serveHB(t, s, hb("forgotten", "m1", 4)).ErrorCode)

	// v0: the coordinator names a joining member.
	v0 := hb("g0", "", 0, "t")
	v0.Version = 0
	r0 := serveHB(t, s, v0)
	require.Zero(t, r0.ErrorCode)
	require.NotNil(t, r0.MemberID)
	require.Len(t, *r0.MemberID, 22)

	// Commits: at the member's epoch only, v9 or later, never memberless while it has members.
	require.Equal(t, int16(0), commitCode(t, s, memberCommitReq(9, "g", "m1", 1, "t", 3)))
	require.Equal(t, int16(113), commitCode(t, s, memberCommitReq(9, "g", "m1", 0, "t", 4)), "STALE_MEMBER_EPOCH")
	require.Equal(t, codeUnknownMemberID, commitCode(t, s, memberCommitReq(9, "g", "other", 1, "t", 4)))
	require.Equal(t, int16(35), commitCode(t, s, memberCommitReq(8, "g", "m1", 1, "t", 4)), "UNSUPPORTED_VERSION")
	require.Equal(t, codeUnknownMemberID, commitCode(t, s, memberCommitReq(9, "g", "", -1, "t", 4)), "memberless on an active group")
	require.Equal(t, int64(3), s.dst.CommittedOffsets("g")[mirror.TopicPartition{Topic: "t"}])

	// OffsetFetch v9: the member's epoch, or -1 for an admin client.
	fetch := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.MemberID, g.MemberEpoch = "g", kmsg.StringPtr(member), epoch
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
		resp, err := s.dp.Serve(context.Background(), req)
		require.NoError(t, err)
		return resp.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode
	}
	require.Equal(t, int16(0), fetch("m1", 1))
	require.Equal(t, int16(113), fetch("m1", 0))
	require.Equal(t, codeUnknownMemberID, fetch("other", 1))
	require.Equal(t, int16(0), fetch("", -1))

	// The classic protocol cannot take the consumer group's id, nor the reverse.
	jr := joinRequest("g", "", nil)
	jresp, err := s.dp.Serve(context.Background(), jr)
	require.NoError(t, err)
	require.Equal(t, codeInconsistentGroupProtocol, jresp.(*kmsg.JoinGroupResponse).ErrorCode)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	joined := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		r, err := s.dp.Serve(ctx, joinRequest("classic", "", nil))
		if err == nil {
			joined <- r.(*kmsg.JoinGroupResponse)
		}
		close(joined)
	}()
	require.Eventually(t, func() bool { return s.dp.groupReg.ownerOf("classic") != nil }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, codeGroupIDNotFound, serveHB(t, s, hb("classic", "m1", 0, "t")).ErrorCode)
	require.Equal(t, codeGroupIDNotFound, consumerDescribe(t, s, "classic").ErrorCode)
	<-joined

	// Leaving empties the group: its id is free for either protocol again.
	require.Equal(t, int32(-1), serveHB(t, s, hb("g", "m1", -1)).MemberEpoch)
	require.False(t, s.dp.GroupActive("g"))
	require.Nil(t, s.dp.groupReg.ownerOf("g"))
	require.Equal(t, int16(0), commitCode(t, s, memberCommitReq(9, "g", "", -1, "t", 5)), "memberless once empty")
}

// TestConsumerGroupLimits: a site bounds the consumer groups it holds and the
// members of each.
func TestConsumerGroupLimits(t *testing.T) {
	cfg := consumerSiteConfig()
	cfg.MaxConsumerGroups, cfg.MaxConsumerGroupSize = 2, 2
	s := startSite(t, cfg)
	s.topic(t, "t", 1)
	require.Zero(t, serveHB(t, s, hb("g1", "a", 0, "t")).ErrorCode)
	require.Zero(t, serveHB(t, s, hb("g1", "b", 0, "t")).ErrorCode)
	require.Equal(t, codeGroupMaxSizeReached, serveHB(t, s, hb("g1", "c", 0, "t")).ErrorCode)
	require.Zero(t, serveHB(t, s, hb("g2", "a", 0, "t")).ErrorCode)
	require.Equal(t, codeCoordinatorNotAvailable, serveHB(t, s, hb("g3", "a", 0, "t")).ErrorCode)
	big := hb("g2", "b", 0, make([]string, 10001)...)
	for i := range big.SubscribedTopicNames {
		big.SubscribedTopicNames[i] = "t"
	}
	require.Equal(t, codeInvalidRequest, serveHB(t, s, big).ErrorCode, "too many subscribed topics")
}

// TestConsumerGroupSessionExpiry: a member that stops heartbeating is
// removed after the session timeout, by the site's own clock, and the
// group's id is released.
func TestConsumerGroupSessionExpiry(t *testing.T) {
	s := startSite(t, consumerSiteConfig())
	s.topic(t, "t", 1)
	require.Zero(t, serveHB(t, s, hb("g", "a", 0, "t")).ErrorCode)
	require.True(t, s.dp.GroupActive("g"))
	require.Eventually(t, func() bool { return !s.dp.GroupActive("g") }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, codeUnknownMemberID, serveHB(t, s, hb("g", "a", 1)).ErrorCode)
}
