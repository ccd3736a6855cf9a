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
