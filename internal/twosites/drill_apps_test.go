package twosites

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The applications of the DR drills. Each consumer application is a process
// of its own (Kafka's console consumer, or a re-exec of the test binary that
// runs a kgo consumer) that prints one line per record it processed; the test
// reads the lines. Its offsets are committed only for records it printed,
// so a record whose offset reached the group was processed.

// appKind names one consumer application.
type appKind string

const (
	// appConsoleClassic is kafka-console-consumer --group on the classic
	// group protocol (JoinGroup/SyncGroup/Heartbeat), auto commit.
	appConsoleClassic appKind = "console-classic"
	// appConsoleConsumer is kafka-console-consumer --group with
	// group.protocol=consumer (KIP-848 ConsumerGroupHeartbeat), auto commit.
	appConsoleConsumer appKind = "console-consumer"
	// appKgoGroup is a kgo.ConsumerGroup member that marks each record
	// after printing it; kgo commits the marks every 200 ms.
	appKgoGroup appKind = "kgo-group"
	// appKgoAssign is a kgo consumer with manual assignment of every
	// partition that starts at the group's committed offsets (OffsetFetch)
	// and commits what it printed with a standalone OffsetCommit
	// (generation -1), as stream processors that manage their own
	// assignment do. It needs no group membership on the server.
	appKgoAssign appKind = "kgo-assign"
)

// envDrillApp makes the test binary run a kgo consumer application instead
// of the tests: kind,addr,topic,group,partitions.
const envDrillApp = "KMIRROR_DRILL_APP"

// drillCommitInterval is the consumers' commit interval (auto.commit.interval.ms).
const drillCommitInterval = 200 * time.Millisecond

// consumed is one record an application processed.
type consumed struct {
	P int32  `json:"p"`
	O int64  `json:"o"`
	V string `json:"v"`
}

// runDrillApp is the body of a kgo consumer application process; it prints
// one JSON consumed line per record, flushed before the record is marked or
// committed, until it is killed.
func runDrillApp(spec string) int {
	f := strings.Split(spec, ",")
	if len(f) != 5 {
		fmt.Fprintln(os.Stderr, "drill app spec: kind,addr,topic,group,partitions")
		return 2
	}
	kind, addr, topic, group := appKind(f[0]), f[1], f[2], f[3]
	n, err := strconv.Atoi(f[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, "drill app partitions:", err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	print := func(fs kgo.Fetches) error {
		var err error
		fs.EachRecord(func(r *kgo.Record) {
			if err == nil {
				err = enc.Encode(consumed{P: r.Partition, O: r.Offset, V: string(r.Value)})
			}
		})
		if err == nil {
			err = out.Flush()
		}
		return err
	}
	// SIGTERM is a graceful stop: commit what was printed, leave the group.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	switch kind {
	case appKgoGroup:
		return runGroupApp(ctx, addr, topic, group, print)
	case appKgoAssign:
		return runAssignApp(ctx, addr, topic, group, int32(n), print)
	}
	fmt.Fprintln(os.Stderr, "drill app: unknown kind", kind)
	return 2
}

// runGroupApp is the appKgoGroup application.
func runGroupApp(ctx context.Context, addr, topic, group string, print func(kgo.Fetches) error) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(drillCommitInterval))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "fetch %s-%d: %v\n", t, p, err)
			}
		})
		if err := print(fs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cl.MarkCommitRecords(fs.Records()...)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.CommitMarkedOffsets(cctx); err != nil {
		fmt.Fprintln(os.Stderr, "final commit:", err)
		return 1
	}
	cl.Close() // leaves the group
	return 0
}

// runAssignApp is the appKgoAssign application.
func runAssignApp(ctx context.Context, addr, topic, group string, partitions int32, print func(kgo.Fetches) error) int {
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr), byName())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var start map[int32]int64
	for start == nil { // retry until the group's coordinator answers
		if start, err = fetchOffsets(ctx, admin, group, topic, partitions); err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintln(os.Stderr, "offset fetch:", err)
			start = nil
			time.Sleep(100 * time.Millisecond)
		}
	}
	parts := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		if o, ok := start[p]; ok && o >= 0 {
			parts[p] = kgo.NewOffset().At(o)
		} else {
			parts[p] = kgo.NewOffset().AtStart()
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	next := map[int32]int64{}
	committed := map[int32]int64{}
	commit := func(ctx context.Context) error {
		todo := map[int32]int64{}
		for p, o := range next {
			if committed[p] != o {
				todo[p] = o
			}
		}
		if len(todo) == 0 {
			return nil
		}
		if err := commitOffsets(ctx, admin, group, topic, todo); err != nil {
			return err
		}
		for p, o := range todo {
			committed[p] = o
		}
		return nil
	}
	last := time.Now()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, drillCommitInterval)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "fetch %s-%d: %v\n", t, p, err)
			}
		})
		if err := print(fs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fs.EachRecord(func(r *kgo.Record) { next[r.Partition] = r.Offset + 1 })
		if time.Since(last) < drillCommitInterval {
			continue
		}
		last = time.Now()
		if err := commit(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "offset commit:", err)
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := commit(cctx); err != nil {
		fmt.Fprintln(os.Stderr, "final commit:", err)
		return 1
	}
	return 0
}

// byName keeps a client's OffsetCommit and OffsetFetch at version 9, the
// last that names topics: fetchOffsets and commitOffsets do not look up the
// topic ids version 10 sends instead (Kafka 4.4 speaks it; the site's data
// plane stops at 9).
func byName() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	v.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 9)
	return kgo.MaxVersions(v)
}

// fetchOffsets returns a group's committed offsets of topic's partitions
// (-1: none).
func fetchOffsets(ctx context.Context, cl *kgo.Client, group, topic string, partitions int32) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < partitions; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

// commitOffsets commits offsets for a group outside any generation.
func commitOffsets(ctx context.Context, cl *kgo.Client, group, topic string, offsets map[int32]int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}

// consumerApp is one running consumer application process.
type consumerApp struct {
	t     testing.TB
	kind  appKind
	group string
	addr  string
	cmd   *exec.Cmd
	done  chan struct{} // closed when the output is read and the process waited for

	mu      sync.Mutex
	got     []consumed
	bad     []string // output lines that are not records
	changed chan struct{}
}

// startApp starts application kind in group against addr.
func startApp(t testing.TB, kind appKind, addr, topic, group string, partitions int32) *consumerApp {
	t.Helper()
	a := &consumerApp{t: t, kind: kind, group: group, addr: addr, done: make(chan struct{}), changed: make(chan struct{})}
	switch kind {
	case appConsoleClassic, appConsoleConsumer:
		bin, cp := java(t)
		args := []string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp", cp,
			"org.apache.kafka.tools.consumer.ConsoleConsumer",
			"--bootstrap-server", addr, "--topic", topic, "--group", group,
			"--consumer-property", "auto.offset.reset=earliest",
			"--consumer-property", fmt.Sprintf("auto.commit.interval.ms=%d", drillCommitInterval.Milliseconds()),
			"--consumer-property", "fetch.max.wait.ms=200",
			"--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
			"--formatter-property", "print.value=true"}
		if kind == appConsoleConsumer {
			args = append(args, "--consumer-property", "group.protocol=consumer")
		}
		a.cmd = exec.Command(bin, args...)
	case appKgoGroup, appKgoAssign:
		a.cmd = exec.Command(os.Args[0], "-test.run", "^$")
		a.cmd.Env = append(os.Environ(), envDrillApp+"="+strings.Join([]string{string(kind), addr, topic, group,
			strconv.Itoa(int(partitions))}, ","))
	default:
		t.Fatalf("unknown application %s", kind)
	}
	out, err := a.cmd.StdoutPipe()
	require.NoError(t, err)
	a.cmd.Stderr = &prefixWriter{t: t, prefix: string(kind) + " " + group + ": "}
	require.NoError(t, a.cmd.Start())
	go a.read(out)
	t.Cleanup(func() { a.kill9() })
	return a
}

// read collects the application's records until its output ends.
func (a *consumerApp) read(r io.Reader) {
	defer close(a.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		c, ok := parseConsumed(a.kind, sc.Text())
		a.mu.Lock()
		if ok {
			a.got = append(a.got, c)
		} else {
			a.bad = append(a.bad, sc.Text())
		}
		close(a.changed)
		a.changed = make(chan struct{})
		a.mu.Unlock()
	}
	_ = a.cmd.Wait()
}

// parseConsumed reads one output line of an application.
func parseConsumed(kind appKind, line string) (consumed, bool) {
	var c consumed
	switch kind {
	case appConsoleClassic, appConsoleConsumer:
		// Partition:0	Offset:12	value
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			return c, false
		}
		if _, err := fmt.Sscanf(f[0], "Partition:%d", &c.P); err != nil {
			return c, false
		}
		if _, err := fmt.Sscanf(f[1], "Offset:%d", &c.O); err != nil {
			return c, false
		}
		c.V = f[2]
		return c, true
	}
	return c, json.Unmarshal([]byte(line), &c) == nil
}

// records returns a copy of what the application processed so far.
func (a *consumerApp) records() []consumed {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]consumed(nil), a.got...)
}

// waitFor waits until ok holds for the records processed so far.
func (a *consumerApp) waitFor(timeout time.Duration, what string, ok func([]consumed) bool) {
	a.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		good, ch := ok(a.got), a.changed
		n, bad := len(a.got), append([]string(nil), a.bad...)
		a.mu.Unlock()
		if good {
			return
		}
		select {
		case <-ch:
		case <-a.done:
			a.t.Fatalf("%s in group %s on %s exited before %s (%d records, other output %q)", a.kind, a.group, a.addr, what, n, bad)
		case <-deadline.C:
			a.t.Fatalf("%s in group %s on %s: not %s within %v (%d records, other output %q)", a.kind, a.group, a.addr, what, timeout, n, bad)
		}
	}
}

// kill9 ends the application with SIGKILL, as a crash does: it commits
// nothing more and leaves no group.
func (a *consumerApp) kill9() {
	if a.cmd.Process == nil {
		return
	}
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
}

// prefixWriter logs a child's standard error through the test.
type prefixWriter struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Logf("%s%s", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// produced is one write attempt of the producer application.
type produced struct {
	P    int32
	O    int64 // -1 unless acknowledged
	V    string
	Addr string
	Run  int // which start of the producer wrote it (1, 2, ...)
	Err  error
	At   time.Time // when the answer came
}

// producerApp is the producer application: one kgo idempotent producer
// (acks all) that writes one record after another, round robin over the
// partitions, to the cluster it is pointed at; a failed write is not
// retried (the next record gets a new value).
type producerApp struct {
	t          testing.TB
	topic      string
	partitions int32

	mu      sync.Mutex
	log     []produced
	changed chan struct{}
	seq     int
	run     int // starts so far

	cancel context.CancelFunc // ends the writes of the current start
	done   chan struct{}
}

func newProducerApp(t testing.TB, topic string, partitions int32) *producerApp {
	return &producerApp{t: t, topic: topic, partitions: partitions, changed: make(chan struct{})}
}

// start points the producer at addr (a new client, the same code); it
// writes until halt. It returns the run number of the writes.
func (pa *producerApp) start(addr string) int {
	pa.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.DefaultProduceTopic(pa.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(pa.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	pa.run++
	run := pa.run
	pa.done = make(chan struct{})
	// A record already sent waits for its answer whatever the context says:
	// closing the client fails it (a dead broker never answers).
	pa.cancel = func() { cancel(); cl.Close() }
	pa.t.Cleanup(pa.halt)
	go func() {
		defer close(pa.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pa.mu.Lock()
			seq := pa.seq
			pa.seq++
			pa.mu.Unlock()
			r := &kgo.Record{Partition: int32(seq) % pa.partitions, Key: []byte(fmt.Sprintf("k%d", seq)),
				Value: []byte(fmt.Sprintf("v%d", seq))}
			err := cl.ProduceSync(ctx, r).FirstErr()
			p := produced{P: r.Partition, O: -1, V: string(r.Value), Addr: addr, Run: run, Err: err, At: time.Now()}
			if err == nil {
				p.O = r.Offset
			}
			pa.mu.Lock()
			pa.log = append(pa.log, p)
			close(pa.changed)
			pa.changed = make(chan struct{})
			pa.mu.Unlock()
		}
	}()
	return run
}

// halt stops the producer: a write still waiting for its answer is
// abandoned (it counts as failed: the producer never saw it acknowledged).
func (pa *producerApp) halt() {
	if pa.cancel != nil {
		pa.cancel()
		<-pa.done
		pa.cancel = nil
	}
}

// attempts returns a copy of every write attempt so far.
func (pa *producerApp) attempts() []produced {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	return append([]produced(nil), pa.log...)
}

// waitFor waits until ok holds for the attempts so far.
func (pa *producerApp) waitFor(timeout time.Duration, what string, ok func([]produced) bool) {
	pa.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		pa.mu.Lock()
		good, ch, n := ok(pa.log), pa.changed, len(pa.log)
		pa.mu.Unlock()
		if good {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			pa.t.Fatalf("producer: not %s within %v (%d attempts)", what, timeout, n)
		}
	}
}

// term stops the application gracefully (SIGTERM: it commits what it
// processed and leaves its group) and waits for it to exit.
func (a *consumerApp) term(timeout time.Duration) {
	a.t.Helper()
	require.NoError(a.t, a.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-a.done:
	case <-time.After(timeout):
		a.t.Fatalf("%s in group %s on %s: still running %v after SIGTERM", a.kind, a.group, a.addr, timeout)
	}
}
