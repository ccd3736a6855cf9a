package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirror"
)

// groupSiteConfig is a site whose groups rebalance quickly: short session
// timeouts allowed, a short initial delay.
func groupSiteConfig() Config {
	return Config{MinSessionTimeout: 100 * time.Millisecond, InitialRebalanceDelay: 100 * time.Millisecond, GroupRejoinGrace: -1}
}

// produceN produces n records "<tag>-p<partition>-<i>" to every partition
// of topic with kgo.
func produceN(t *testing.T, s *site, topic, tag string, parts int32, n int) {
	t.Helper()
	cl := s.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-p%d-%d", tag, p, i))})
		}
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// killableDialer dials the site through connections it can cut at once,
// refusing new ones afterwards: a consumer process that dies without
// leaving its group.
type killableDialer struct {
	mu     sync.Mutex
	dead   bool
	conns  []net.Conn
	dialer net.Dialer
}

func (k *killableDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, errors.New("killed")
	}
	c, err := k.dialer.DialContext(ctx, network, addr)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killableDialer) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		_ = c.Close()
	}
}

// groupConsumer is one kgo group member and what it consumed.
type groupConsumer struct {
	cl   *kgo.Client
	kill *killableDialer

	mu       sync.Mutex
	got      map[string]int // value → times seen
	assigned map[int32]bool
	stop     chan struct{}
	done     chan struct{}
}

func startGroupConsumer(t *testing.T, s *site, group, topic string, balancer kgo.GroupBalancer, extra ...kgo.Opt) *groupConsumer {
	t.Helper()
	gc := &groupConsumer{kill: &killableDialer{}, got: map[string]int{}, assigned: map[int32]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(balancer),
		kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100 * time.Millisecond), kgo.RebalanceTimeout(5 * time.Second),
		kgo.AutoCommitInterval(100 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Dialer(gc.kill.dial), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			gc.mu.Lock()
			defer gc.mu.Unlock()
			for _, p := range m[topic] {
				gc.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx) // kgo's own revoke commit, replaced by this callback
			gc.mu.Lock()
			defer gc.mu.Unlock()
			for _, p := range m[topic] {
				delete(gc.assigned, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			gc.mu.Lock()
			defer gc.mu.Unlock()
			for _, p := range m[topic] {
				delete(gc.assigned, p)
			}
		}),
	}
	cl := s.client(t, append(opts, extra...)...)
	gc.cl = cl
	go func() {
		defer close(gc.done)
		for {
			select {
			case <-gc.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				gc.mu.Lock()
				gc.got[string(r.Value)]++
				gc.mu.Unlock()
			})
		}
	}()
	return gc
}

// close leaves the group (kgo's LeaveGroup on close, after a commit).
func (gc *groupConsumer) close(t *testing.T) {
	t.Helper()
	close(gc.stop)
	<-gc.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, gc.cl.CommitUncommittedOffsets(ctx))
	gc.cl.Close()
}

func (gc *groupConsumer) partitions() []int32 {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	var out []int32
	for p := range gc.assigned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (gc *groupConsumer) seen() map[string]int {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	out := make(map[string]int, len(gc.got))
	for k, v := range gc.got {
		out[k] = v
	}
	return out
}

// describe returns the group's DescribeGroups answer.
func describe(t *testing.T, s *site, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := s.dp.Serve(context.Background(), req)
	require.NoError(t, err)
	return resp.(*kmsg.DescribeGroupsResponse).Groups[0]
}

// waitAssigned waits until the consumers own disjoint sets covering every
// partition, with the sizes given.
func waitAssigned(t *testing.T, parts int32, sizes []int, cs ...*groupConsumer) {
	t.Helper()
	require.Eventually(t, func() bool {
		all := map[int32]bool{}
		var got []int
		for _, c := range cs {
			ps := c.partitions()
			got = append(got, len(ps))
			for _, p := range ps {
				if all[p] {
					return false
				}
				all[p] = true
			}
		}
		sort.Ints(got)
		return len(all) == int(parts) && fmt.Sprint(got) == fmt.Sprint(sizes)
	}, 20*time.Second, 20*time.Millisecond)
}

// TestClassicGroupKgo: kgo group consumers with the range and the
// cooperative-sticky balancers join a site's group, share its partitions,
// rebalance when a member joins, leaves and dies (session timeout), commit
// as members, and a new consumer resumes from the committed offsets.
func TestClassicGroupKgo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		protocol string
	}{
		{"range", kgo.RangeBalancer(), "range"},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), "cooperative-sticky"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSite(t, groupSiteConfig())
			const parts = 4
			s.topic(t, "t", parts)
			produceN(t, s, "t", "r1", parts, 10)

			a := startGroupConsumer(t, s, "g", "t", tc.balancer)
			waitAssigned(t, parts, []int{4}, a)
			require.Eventually(t, func() bool { return len(a.seen()) == 40 }, 20*time.Second, 20*time.Millisecond)

			b := startGroupConsumer(t, s, "g", "t", tc.balancer)
			waitAssigned(t, parts, []int{2, 2}, a, b)
			d := describe(t, s, "g")
			require.Equal(t, stateStable, d.State)
			require.Equal(t, "consumer", d.ProtocolType)
			require.Equal(t, tc.protocol, d.Protocol)
			require.Len(t, d.Members, 2)
			require.True(t, s.dp.GroupActive("g"))

			produceN(t, s, "t", "r2", parts, 10)
			require.Eventually(t, func() bool {
				union := a.seen()
				for k := range b.seen() {
					union[k]++
				}
				return len(union) == 80
			}, 20*time.Second, 20*time.Millisecond)

			// A third member dies without leaving: the session timeout removes it.
			c := startGroupConsumer(t, s, "g", "t", tc.balancer)
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
			require.Len(t, describe(t, s, "g").Members, 1)

			a.close(t)
			require.Eventually(t, func() bool { return !s.dp.GroupActive("g") }, 10*time.Second, 10*time.Millisecond)
			require.Equal(t, stateEmpty, describe(t, s, "g").State)
			require.True(t, committedAll(20)(), "%v", s.dst.CommittedOffsets("g"))

			// A new consumer resumes where the group left off.
			produceN(t, s, "t", "r3", parts, 1)
			n := startGroupConsumer(t, s, "g", "t", tc.balancer)
			require.Eventually(t, func() bool { return len(n.seen()) == 4 }, 20*time.Second, 20*time.Millisecond)
			for v := range n.seen() {
				require.Regexp(t, `^r3-p\d-0$`, v)
			}
			n.close(t)
		})
	}
}

// saramaHandler collects the messages of a sarama consumer group member and
// the partitions of each of its sessions.
type saramaHandler struct {
	mu     sync.Mutex
	got    map[string]bool
	claims map[int32]bool
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = map[int32]bool{}
	for _, p := range s.Claims()["t"] {
		h.claims[p] = true
	}
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.got[string(m.Value)] = true
		h.mu.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func (h *saramaHandler) state() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got), len(h.claims)
}

// runSarama runs a sarama consumer group member until the returned stop.
func runSarama(t *testing.T, s *site, group string) (*saramaHandler, func()) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	// Sarama stops heartbeating when told of a rebalance and commits once
	// its claims are released: a session timeout of 1 s can expire first
	// (the member is then removed and its commit refused, as Kafka does).
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Metadata.RefreshFrequency = 100 * time.Millisecond
	cg, err := sarama.NewConsumerGroup([]string{s.addr}, group, cfg)
	require.NoError(t, err)
	h := &saramaHandler{got: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{"t"}, h); err != nil && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			require.NoError(t, cg.Close())
		})
	}
	t.Cleanup(stop)
	return h, stop
}

// TestClassicGroupSarama: two sarama consumer group members share a topic's
// partitions, consume every record, and commit as members; after both
// close, the group is Empty at the end of the log.
func TestClassicGroupSarama(t *testing.T) {
	s := startSite(t, groupSiteConfig())
	s.topic(t, "t", 2)
	produceN(t, s, "t", "r1", 2, 10)
	a, stopA := runSarama(t, s, "sg")
	b, stopB := runSarama(t, s, "sg")
	require.Eventually(t, func() bool {
		na, ca := a.state()
		nb, cb := b.state()
		return na+nb == 20 && ca == 1 && cb == 1
	}, 30*time.Second, 20*time.Millisecond)
	d := describe(t, s, "sg")
	require.Equal(t, stateStable, d.State)
	require.Len(t, d.Members, 2)
	require.Equal(t, "range", d.Protocol)
	stopA()
	stopB()
	require.Eventually(t, func() bool { return !s.dp.GroupActive("sg") }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, map[mirror.TopicPartition]int64{{Topic: "t", Partition: 0}: 10, {Topic: "t", Partition: 1}: 10}, s.dst.CommittedOffsets("sg"))
}
