package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkatest"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/dataplane"
	"github.com/kmirror/kmirror/records"
)

// BenchmarkIdleSourceCPU measures what an idle mirror costs its source: the
// CPU time the source process spends per minute while one fetcher.Fetcher
// (KafkaSource into MemoryLogs) follows KMIRROR_BENCH_IDLE_PARTITIONS empty
// partitions (default 10,000), with incremental fetch sessions (KIP-227) and
// without (KafkaSourceConfig.DisableFetchSessions), next to the source left
// alone (baseline, before and after). The source is a private single-node Kafka broker
// (kafka/..., through kafkatest.StartPrivate; run it under
// flock /work/wt/broker.lock) and a data plane over a memory destination in a
// child process (dataplane/...). The source's CPU is read from
// /proc/<pid>/stat over KMIRROR_BENCH_IDLE_WINDOW (default 1m), after
// KMIRROR_BENCH_IDLE_SETTLE (default 20s) for the mirror to reach its idle
// state. Metrics: source-cpu-s/min and fetches/s. Run with -benchtime=1x.
func BenchmarkIdleSourceCPU(b *testing.B) {
	parts := envInt(b, "KMIRROR_BENCH_IDLE_PARTITIONS", 10_000)
	window := envDuration(b, "KMIRROR_BENCH_IDLE_WINDOW", time.Minute)
	settle := envDuration(b, "KMIRROR_BENCH_IDLE_SETTLE", 20*time.Second)
	b.Run("kafka", func(b *testing.B) {
		p := kafkatest.StartPrivate(b, kafkatest.PrivateOptions{NoAuthorizer: true})
		createIdleTopic(b, p.Brokers(), parts)
		pid := readPid(b, filepath.Join(p.Workdir(), "c1", "pid"))
		idleModes(b, p.Brokers(), pid, parts, window, settle)
	})
	b.Run("dataplane", func(b *testing.B) {
		addr, pid := startSiteChild(b, parts)
		idleModes(b, []string{addr}, pid, parts, window, settle)
	})
}

// idleModes runs the baseline, sessionless and sessions measurements
// against one source.
func idleModes(b *testing.B, brokers []string, pid, parts int, window, settle time.Duration) {
	baseline := func(b *testing.B) {
		cpu := processCPU(b, pid, window)
		b.ReportMetric(cpu.Seconds()*float64(time.Minute)/float64(window), "source-cpu-s/min")
	}
	b.Run("baseline", baseline)
	defer b.Run("baseline-after", baseline) // the source alone again: its drift over the run
	for _, m := range []struct {
		name string
		off  bool
	}{{"sessionless", true}, {"sessions", false}} {
		b.Run(m.name, func(b *testing.B) {
			src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{SeedBrokers: brokers, DisableFetchSessions: m.off})
			require.NoError(b, err)
			defer src.Close()
			cs := &countingSource{Source: src}
			f, err := fetcher.NewFetcher(cs, fetcher.Config{})
			require.NoError(b, err)
			defer f.Close()
			specs := make([]fetcher.PartitionSpec, parts)
			for p := range specs {
				l := fetcher.NewMemoryLog(fetcher.MemoryLogOptions{})
				_, err := l.BumpLeaderEpoch(999)
				require.NoError(b, err)
				specs[p] = fetcher.PartitionSpec{Topic: idleTopic, Partition: int32(p), Log: l}
			}
			require.NoError(b, f.Add(specs...))
			time.Sleep(settle)
			before := cs.n.Load()
			cpu := processCPU(b, pid, window)
			fetches := cs.n.Load() - before
			for _, s := range f.Status() {
				require.NoError(b, s.Err, "%s", s.TopicPartition)
			}
			b.ReportMetric(cpu.Seconds()*float64(time.Minute)/float64(window), "source-cpu-s/min")
			b.ReportMetric(float64(fetches)/window.Seconds(), "fetches/s")
		})
	}
}

const (
	idleTopic     = "idle"
	partitionStep = 5000
)

// countingSource counts Fetch calls.
type countingSource struct {
	fetcher.Source
	n atomic.Int64
}

func (c *countingSource) Fetch(ctx context.Context, parts []fetcher.FetchPartition) ([]fetcher.FetchResult, error) {
	c.n.Add(1)
	return c.Source.Fetch(ctx, parts)
}

// processCPU sleeps for window and returns the user+system CPU time pid
// spent meanwhile (pidUsage: /proc/<pid>/stat).
func processCPU(b *testing.B, pid int, window time.Duration) time.Duration {
	before, err := pidUsage(pid)
	require.NoError(b, err)
	time.Sleep(window)
	after, err := pidUsage(pid)
	require.NoError(b, err)
	return time.Duration((after.CPUSeconds - before.CPUSeconds) * float64(time.Second))
}

func readPid(b *testing.B, path string) int {
	raw, err := os.ReadFile(path)
	require.NoError(b, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(b, err)
	return pid
}

// createIdleTopic creates idleTopic with n partitions on a Kafka cluster, in
// steps of partitionStep (a KRaft controller refuses a request writing more
// than max.records.per.user.op, 10,000, records).
func createIdleTopic(b *testing.B, brokers []string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(b, err)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32((5 * time.Minute).Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = idleTopic, int32(min(n, partitionStep)), 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(b, err)
	require.Equal(b, int16(0), resp.Topics[0].ErrorCode, "create %s", idleTopic)
	for have := partitionStep; have < n; have += partitionStep {
		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.TimeoutMillis = req.TimeoutMillis
		ct := kmsg.NewCreatePartitionsRequestTopic()
		ct.Topic, ct.Count = idleTopic, int32(min(n, have+partitionStep))
		cp.Topics = []kmsg.CreatePartitionsRequestTopic{ct}
		cr, err := cp.RequestWith(ctx, cl)
		require.NoError(b, err)
		require.Equal(b, int16(0), cr.Topics[0].ErrorCode, "grow %s to %d", idleTopic, ct.Count)
	}
	// Wait until every partition has its leader.
	require.Eventually(b, func() bool {
		md := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(idleTopic)
		md.Topics = []kmsg.MetadataRequestTopic{mt}
		r, err := md.RequestWith(ctx, cl)
		if err != nil || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != n {
			return false
		}
		for _, p := range r.Topics[0].Partitions {
			if p.Leader < 0 || p.ErrorCode != 0 {
				return false
			}
		}
		return true
	}, 5*time.Minute, time.Second)
}

// siteChildEnv makes TestIdleSiteChild serve a data plane with that many
// empty partitions of idleTopic (the source of BenchmarkIdleSourceCPU's
// kmirrord case, in a process of its own so that its CPU can be read).
const siteChildEnv = "KMIRROR_BENCH_IDLE_SITE"

const siteAddrPrefix = "KMIRROR_BENCH_IDLE_SITE_ADDR "

// startSiteChild starts the site child and returns its address and pid; it
// is stopped when b ends.
func startSiteChild(b *testing.B, parts int) (string, int) {
	args := []string{"-test.run=^TestIdleSiteChild$", "-test.count=1"}
	if prof := os.Getenv("KMIRROR_BENCH_IDLE_SITE_PROFILE"); prof != "" {
		args = append(args, "-test.cpuprofile="+prof) // the site's CPU profile, written as it stops
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), siteChildEnv+"="+strconv.Itoa(parts))
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), siteAddrPrefix); ok {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return addr, cmd.Process.Pid
		}
	}
	b.Fatalf("site child ended without an address: %v", sc.Err())
	return "", 0
}

// TestIdleSiteChild is the site child process of BenchmarkIdleSourceCPU
// (it skips unless siteChildEnv is set): a data plane over a memory
// destination holding idleTopic, serving until its stdin closes.
func TestIdleSiteChild(t *testing.T) {
	v := os.Getenv(siteChildEnv)
	if v == "" {
		t.Skip("the site child process of BenchmarkIdleSourceCPU")
	}
	parts, err := strconv.Atoi(v)
	require.NoError(t, err)
	dst := mirror.NewMemoryDestination("idle-site", fetcher.MemoryLogOptions{})
	defer dst.Close()
	ctx := context.Background()
	require.NoError(t, dst.CreateTopic(ctx, mirror.TopicSpec{Name: idleTopic, TopicID: records.UUID{7, 7}, Partitions: int32(parts)}))
	for p := range int32(parts) {
		l, err := dst.Log(idleTopic, p)
		require.NoError(t, err)
		_, err = l.BumpLeaderEpoch(-1)
		require.NoError(t, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dp, err := dataplane.New(dataplane.Config{Destination: dst, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(ln.Addr().(*net.TCPAddr).Port)})
	require.NoError(t, err)
	defer dp.Close()
	srv, err := admin.NewServer(admin.ServerConfig{Handler: admin.UnimplementedHandler{}, Extra: dp.APIs()})
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Printf("%s%s\n", siteAddrPrefix, ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, key)
	return n
}

func envDuration(b *testing.B, key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(b, err, key)
	return d
}
