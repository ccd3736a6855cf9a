package killtest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// TestMain runs RunChild instead of the tests when the test binary is started as the
// child of TestKillRestart.
func TestMain(m *testing.M) {
	if root := os.Getenv("KMIRROR_KILLTEST_ROOT"); root != "" {
		err := RunChild(context.Background(), os.Stdout, root, os.Getenv("KMIRROR_KILLTEST_BOOTSTRAP"), os.Getenv("KMIRROR_KILLTEST_MODE"))
		fmt.Fprintln(os.Stderr, "child ended:", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

var partitions = map[string]int32{TopicRun: 2, TopicStop: 1}

// producer writes to every source partition until stopped.
func startProducers(t *testing.T, src *kfake.Cluster) (stop func()) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			var recs []*kgo.Record
			for topic, n := range partitions {
				for p := range n {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", topic, p, i)})
				}
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil && ctx.Err() == nil {
				t.Errorf("produce: %v", err)
				return
			}
		}
	}()
	return func() { cancel(); wg.Wait(); cl.Close() }
}

// trigger starts the kill timer: delay after the child printed a line starting with
// prefix.
type trigger struct {
	prefix string
	delay  time.Duration
}

// roundResult is what one child printed: before is every line read before the kill,
// fired the trigger that started the kill timer.
type roundResult struct {
	before, all []string
	fired       trigger
}

// round runs one child until it is killed: the timer starts at the first line that
// matches one of triggers, and the kill follows its delay; a later line that matches an
// earlier trigger of the list (a higher priority) starts the timer again with its own.
func round(t *testing.T, root, bootstrap, mode string, triggers ...trigger) roundResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KMIRROR_KILLTEST_ROOT="+root, "KMIRROR_KILLTEST_BOOTSTRAP="+bootstrap, "KMIRROR_KILLTEST_MODE="+mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var res roundResult
	var timer <-chan time.Time
	armed := len(triggers) // priority of the trigger that armed the timer
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				require.FailNow(t, "child exited by itself", "lines %v, stderr:\n%s", res.before, stderr.String())
			}
			res.before = append(res.before, l)
			for i, tr := range triggers[:armed] {
				if strings.HasPrefix(l, tr.prefix) {
					timer, res.fired, armed = time.After(tr.delay), tr, i // the kill moment
					break
				}
			}
		case <-timer:
			require.NoError(t, cmd.Process.Kill())
			_ = cmd.Wait()
			res.all = append([]string(nil), res.before...)
			for l := range lines {
				res.all = append(res.all, l)
			}
			return res
		}
	}
}

// contains reports whether one of lines starts with prefix.
func contains(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// logEnds opens every partition log of the root (the child is dead) and returns the log
// end offsets; missing logs are left out.
func logEnds(t *testing.T, root string) map[string]int64 {
	t.Helper()
	ends := map[string]int64{}
	for topic, n := range partitions {
		for p := range n {
			dir := fetcher.PartitionDir(root, topic, p)
			if _, err := os.Stat(dir); err != nil {
				continue
			}
			l, err := fetcher.OpenFileLog(dir, fetcher.FileLogOptions{})
			require.NoError(t, err)
			ends[fmt.Sprintf("%s-%d", topic, p)] = l.LogEndOffset()
			require.NoError(t, l.Close())
		}
	}
	return ends
}

// TestKillRestart SIGKILLs the default setup at random moments while producers run
// (some kills land in PREPARING right after the start, most while MIRRORING, the last
// rounds during and after STOPPING of one topic). After every restart the mirror is
// listed again, and no partition log ever shrinks (nothing is truncated and copied
// again); at the end the MIRRORING partitions are byte-identical to the source and the
// stopped one holds its mirrored prefix and exactly one MIRROR_PID_RESET barrier.
func TestKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test: -short")
	}
	const rounds, stopRounds = 22, 6
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 12))
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, TopicRun), kfake.SeedTopics(1, TopicStop))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	bootstrap := strings.Join(src.ListenAddrs(), ",")
	stopProducers := startProducers(t, src)
	defer stopProducers()
	root := t.TempDir()
	created := false
	prev := map[string]int64{}
	var inPreparing, inStopping int
	for r := range rounds {
		mode := "run"
		if r >= rounds-stopRounds {
			mode = "stop"
		}
		// Most kills land anywhere in the first 400 ms after the open. The first two
		// rounds are killed as soon as a partition reports PREPARING, the first three of
		// the stop rounds as soon as the stopped topic reports STOPPING (a resumed stop
		// reports no new state: then 1 s after "started").
		triggers := []trigger{{"listed", time.Duration(rng.Int64N(int64(400 * time.Millisecond)))}}
		switch {
		case r < 2:
			triggers = []trigger{{"state " + TopicRun + "-0 PREPARING", 0}, {"started", time.Second}}
		case r >= rounds-stopRounds && r < rounds-stopRounds+3:
			triggers = []trigger{{"state " + TopicStop + "-0 STOPPING", 0}, {"started", time.Second}}
		}
		res := round(t, root, bootstrap, mode, triggers...)
		t.Logf("round %d (%s, kill %v after %q): %v", r, mode, res.fired.delay, res.fired.prefix, res.all)
		if strings.HasSuffix(res.fired.prefix, "PREPARING") && !contains(res.before, "state "+TopicRun+"-0 MIRRORING") {
			inPreparing++
		}
		if strings.HasSuffix(res.fired.prefix, "STOPPING") && !contains(res.before, "state "+TopicStop+"-0 STOPPED") {
			inStopping++
		}
		lines := res.all
		if created {
			require.Equal(t, "listed "+MirrorName, lines[0], "round %d: the mirror survived the kill", r)
		}
		created = created || len(lines) > 1
		ends := logEnds(t, root)
		for tp, end := range prev {
			require.GreaterOrEqual(t, ends[tp], end, "round %d: %s shrank (truncated, copied again)", r, tp)
		}
		prev = ends
	}
	t.Logf("%d kills inside PREPARING, %d inside STOPPING", inPreparing, inStopping)
	require.Positive(t, inPreparing, "a kill landed inside PREPARING")
	require.Positive(t, inStopping, "a kill landed inside STOPPING")
	stopProducers()
	verifyFinal(t, root, bootstrap)
}

func verifyFinal(t *testing.T, root, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dest, m, err := Open(root)
	require.NoError(t, err)
	defer func() {
		require.NoError(t, m.Close())
		require.NoError(t, dest.Close())
	}()
	require.NoError(t, stop(ctx, m), "the stop of the last rounds finishes")
	raw, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	require.NoError(t, err)
	defer raw.Close()
	spec, ok := dest.Topic(TopicRun)
	require.True(t, ok)
	for p := range partitions[TopicRun] {
		hw := highWatermark(t, raw, TopicRun, p)
		waitCaughtUp(t, ctx, m, p, hw)
		l, err := dest.Log(TopicRun, p)
		require.NoError(t, err)
		require.Equal(t, sourceBytes(t, raw, TopicRun, spec.TopicID, p, hw), readAll(t, l), "partition %d byte-identical to the source", p)
	}
	l, err := dest.Log(TopicStop, 0)
	require.NoError(t, err)
	data := readAll(t, l)
	barriers, at := 0, int64(-1)
	for it := records.NewIterator(data); it.Next(); {
		b := it.Batch()
		if b.Attributes().IsControl() {
			if ct, err := b.ControlType(); err == nil && ct == records.ControlMirrorPIDReset {
				barriers++
				at = b.BaseOffset()
			}
		}
	}
	require.Equal(t, 1, barriers, "exactly one MIRROR_PID_RESET barrier")
	stopSpec, _ := dest.Topic(TopicStop)
	prefix := sourceBytes(t, raw, TopicStop, stopSpec.TopicID, 0, at)
	require.Equal(t, prefix, data[:len(prefix)], "the stopped partition holds the mirrored prefix")
	require.False(t, dest.ReadOnly(TopicStop, 0))
	require.True(t, dest.ReadOnly(TopicRun, 0))
}

// waitCaughtUp polls (as examples/quickstart does: the facade has no progress
// notification outside its package) until partition p of topic run is MIRRORING at hw.
func waitCaughtUp(t *testing.T, ctx context.Context, m *mirror.Mirror, p int32, hw int64) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ds, err := m.DescribeClusterMirrors(ctx, []string{MirrorName}, mirror.DescribeOptions{
			TopicPartitions: map[string][]int32{TopicRun: {p}}, IncludeStates: true, IncludeLags: true})
		require.NoError(t, err)
		d := ds[0].Topics[0].Partitions[0]
		if d.State == statemachine.Mirroring && d.DestinationOffset == hw {
			return
		}
		select {
		case <-ctx.Done():
			require.FailNow(t, "not caught up", "partition %d: %+v, source high watermark %d", p, d, hw)
		case <-tick.C:
		}
	}
}

func highWatermark(t *testing.T, cl *kgo.Client, topic string, p int32) int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	pr := resp.Topics[0].Partitions[0]
	require.Zero(t, pr.ErrorCode)
	return pr.Offset
}

// sourceBytes reads [0, end) of a source partition with raw Fetch requests: the batches
// exactly as the source serves them.
func sourceBytes(t *testing.T, cl *kgo.Client, topic string, id records.UUID, p int32, end int64) []byte {
	var out []byte
	for off := int64(0); off < end; {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = 13, -1, 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		require.NoError(t, err)
		pr := resp.Topics[0].Partitions[0]
		require.Zero(t, pr.ErrorCode)
		progressed := false
		for it := records.NewIterator(pr.RecordBatches); it.Next() && off < end; {
			b := it.Batch()
			if b.NextOffset() <= off {
				continue
			}
			out = append(out, b...)
			off, progressed = b.NextOffset(), true
		}
		require.True(t, progressed, "no progress at offset %d", off)
	}
	return out
}

func readAll(t *testing.T, l fetcher.Log) []byte {
	var out []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.Read(off, 1<<20)
		require.NoError(t, err)
		if len(b) == 0 {
			break
		}
		var next int64
		for it := records.NewIterator(b); it.Next(); {
			next = it.Batch().NextOffset()
		}
		out = append(out, b...)
		off = next
	}
	return out
}
