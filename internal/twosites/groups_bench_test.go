package twosites

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kafkatest"
)

// Settings of the group benchmarks: ten members share rebalanceTopic's
// partitions; the session timeout is the smallest Kafka 4.4 accepts by
// default (group.min.session.timeout.ms), so the kill measure is the same
// detection delay plus each server's rebalance on both sides.
const (
	rebalanceMembers    = 10
	rebalancePartitions = 30
	rebalanceSession    = 6 * time.Second
	envGroupMember      = "KMIRROR_BENCH_GROUP_MEMBER" // addr,topic,group,balancer,id
)

// memberReport is one line a member process prints: its assignment after
// each assign or revoke callback, or its record count when asked to consume.
type memberReport struct {
	ID       string  `json:"id"`
	Assigned []int32 `json:"assigned"`
	Records  int     `json:"records,omitempty"`
}

// runGroupMember is the body of a member child process (a re-exec of the
// test binary with envGroupMember set): a kgo group consumer that prints its
// assignment on every change and consumes until killed.
func runGroupMember(spec string) int {
	f := strings.Split(spec, ",")
	if len(f) != 5 {
		fmt.Fprintln(os.Stderr, "member spec: addr,topic,group,balancer,id")
		return 2
	}
	addr, topic, group, balancer, id := f[0], f[1], f[2], f[3], f[4]
	var mu sync.Mutex
	owned := map[int32]bool{}
	enc := json.NewEncoder(os.Stdout)
	report := func() {
		r := memberReport{ID: id, Assigned: []int32{}}
		for p := range owned {
			r.Assigned = append(r.Assigned, p)
		}
		sort.Slice(r.Assigned, func(i, j int) bool { return r.Assigned[i] < r.Assigned[j] })
		_ = enc.Encode(r)
	}
	bal := kgo.GroupBalancer(kgo.RangeBalancer())
	if balancer == "cooperative-sticky" {
		bal = kgo.CooperativeStickyBalancer()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(bal), kgo.SessionTimeout(rebalanceSession), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				owned[p] = true
			}
			report()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				delete(owned, p)
			}
			report()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				delete(owned, p)
			}
			report()
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		fs := cl.PollFetches(context.Background())
		if fs.IsClientClosed() {
			return 0
		}
	}
}

// memberSet runs group member processes and tracks their assignments.
type memberSet struct {
	b       *testing.B
	addr    string
	topic   string
	group   string
	bal     string
	mu      sync.Mutex
	procs   map[string]*exec.Cmd
	current map[string][]int32 // the last assignment each live member reported
	changed chan struct{}
}

func newMemberSet(b *testing.B, addr, topic, group, bal string) *memberSet {
	s := &memberSet{b: b, addr: addr, topic: topic, group: group, bal: bal, procs: map[string]*exec.Cmd{},
		current: map[string][]int32{}, changed: make(chan struct{})}
	b.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	return s
}

// start starts member id.
func (s *memberSet) start(id string) {
	s.b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), envGroupMember+"="+strings.Join([]string{s.addr, s.topic, s.group, s.bal, id}, ","))
	out, err := cmd.StdoutPipe()
	require.NoError(s.b, err)
	cmd.Stderr = os.Stderr
	require.NoError(s.b, cmd.Start())
	s.mu.Lock()
	s.procs[id] = cmd
	s.mu.Unlock()
	go s.read(out)
}

func (s *memberSet) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var m memberReport
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		s.mu.Lock()
		if _, live := s.procs[m.ID]; live {
			s.current[m.ID] = m.Assigned
			close(s.changed)
			s.changed = make(chan struct{})
		}
		s.mu.Unlock()
	}
}

// kill9 kills member id with SIGKILL: it leaves no LeaveGroup behind, so
// the server notices it only when its session expires.
func (s *memberSet) kill9(id string) {
	s.b.Helper()
	s.mu.Lock()
	cmd := s.procs[id]
	delete(s.procs, id)
	delete(s.current, id)
	s.mu.Unlock()
	require.NoError(s.b, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
}

// stable reports whether the live members' assignments cover every
// partition exactly once and every live member holds some (there are more
// partitions than members).
func (s *memberSet) stable() bool {
	seen := map[int32]bool{}
	for id := range s.procs {
		a := s.current[id]
		if len(a) == 0 {
			return false
		}
		for _, p := range a {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == rebalancePartitions
}

// waitStable waits until the assignment is stable and returns how long
// that took from since.
func (s *memberSet) waitStable(since time.Time, timeout time.Duration) time.Duration {
	s.b.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ok, ch := s.stable(), s.changed
		s.mu.Unlock()
		if ok {
			return time.Since(since)
		}
		select {
		case <-ch:
		case <-deadline:
			s.mu.Lock()
			defer s.mu.Unlock()
			s.b.Fatalf("group %s: no stable assignment after %v: %v", s.group, timeout, s.current)
		}
	}
}

// BenchmarkGroupRebalance measures, side by side on a real Kafka 4.4 broker
// (the harness's cluster B, one node, group.initial.rebalance.delay.ms=0)
// and on a kmirrord site (its initial rebalance delay set to 0 too), the time
// a group of ten kgo member processes takes to reach a stable assignment
// (every partition owned by exactly one live member): after the ten start,
// after an eleventh joins, and after a member is killed with SIGKILL (the
// session timeout, 6 s on both, is part of that figure). Reported metrics:
// start-s, join-s, kill-s per iteration, for the range and cooperative-sticky
// balancers.
//
//	go test -run '^$' -bench GroupRebalance -benchtime 3x ./internal/twosites/
func BenchmarkGroupRebalance(b *testing.B) {
	brokers := kafkatest.ClusterB(b)
	kcl := kafkatest.NewClient(b, brokers)
	topic := kafkatest.TopicName(b)
	kafkatest.CreateTopic(b, kcl, topic, rebalancePartitions, 1, nil)
	site := newSite(b, "G", "-group.initial.rebalance.delay.ms", "0")
	createTopic(b, site.addr, topic, rebalancePartitions)
	for _, target := range []struct{ name, addr string }{{"kafka", brokers[0]}, {"kmirrord", site.addr}} {
		for _, bal := range []string{"range", "cooperative-sticky"} {
			b.Run(target.name+"/"+bal, func(b *testing.B) {
				var start, join, kill time.Duration
				for i := 0; i < b.N; i++ {
					group := fmt.Sprintf("rebalance-%s-%d-%d", bal, time.Now().UnixNano(), i)
					s := newMemberSet(b, target.addr, topic, group, bal)
					t0 := time.Now()
					for m := 0; m < rebalanceMembers; m++ {
						s.start("m" + strconv.Itoa(m))
					}
					start += s.waitStable(t0, 2*time.Minute)
					t1 := time.Now()
					s.start("joiner")
					join += s.waitStable(t1, 2*time.Minute)
					t2 := time.Now()
					s.kill9("m0")
					kill += s.waitStable(t2, 2*time.Minute)
				}
				n := float64(b.N)
				b.ReportMetric(start.Seconds()/n, "start-s")
				b.ReportMetric(join.Seconds()/n, "join-s")
				b.ReportMetric(kill.Seconds()/n, "kill-s")
			})
		}
	}
}

// BenchmarkGroupConsume compares group consumption throughput: a kgo group
// consumer (one member) reads the whole topic from a real Kafka 4.4 broker
// (cluster B) and from a kmirrord site that mirrored it byte for byte, in the
// same run. MB/s counts record values; each iteration uses a new group.
//
//	go test -run '^$' -bench GroupConsume -benchtime 5x ./internal/twosites/
func BenchmarkGroupConsume(b *testing.B) {
	brokers := kafkatest.ClusterB(b)
	kcl := kafkatest.NewClient(b, brokers)
	topic := kafkatest.TopicName(b)
	kafkatest.CreateTopic(b, kcl, topic, benchPartitions, 1, nil)
	fillBench(b, brokers[0], topic)
	site := newSite(b, "C", "-group.initial.rebalance.delay.ms", "0")
	site.createMirrorTo("kafka-to-c", brokers[0], b.TempDir()+"/kafka.properties")
	site.ctl("--start", "--mirror", "kafka-to-c", "--topics", topic)
	site.waitPartitionsFor(120*time.Second, "kafka-to-c", topic, benchPartitions, "caught up", func(p partitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == benchRecords/benchPartitions
	})
	for _, target := range []struct{ name, addr string }{{"kafka", brokers[0]}, {"kmirrord", site.addr}} {
		b.Run(target.name, func(b *testing.B) {
			b.SetBytes(benchRecords * benchValueBytes)
			for i := 0; i < b.N; i++ {
				consumeGroup(b, target.addr, topic, fmt.Sprintf("consume-%d-%d", time.Now().UnixNano(), i))
			}
		})
	}
}

// consumeGroup reads every record of the topic as the one member of group.
func consumeGroup(b *testing.B, addr, topic, group string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	require.NoError(b, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := 0
	for n < benchRecords {
		fs := cl.PollFetches(ctx)
		require.NoError(b, ctx.Err())
		fs.EachError(func(_ string, p int32, err error) { b.Fatalf("fetch partition %d: %v", p, err) })
		n += fs.NumRecords()
	}
	require.Equal(b, benchRecords, n)
}
