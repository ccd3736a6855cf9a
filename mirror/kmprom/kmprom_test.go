package kmprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/adminhandler"
	"github.com/kmirror/kmirror/mirror/kmprom"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// series returns the gathered families by name.
func series(t *testing.T, mt *kmprom.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := mt.Registry().Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// value returns the value of the series of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestPrometheusSeriesOfAKfakeMirror(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	require.NoError(t, err)
	defer src.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()
	const n = 25
	for i := 0; i < n; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte(fmt.Sprint("v", i))}).FirstErr())
	}

	mt := kmprom.New("")
	dest := mirror.NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	defer dest.Close()
	m, err := mirror.New(mirror.Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		mirror.WithMetrics(mt), mirror.WithPeerFactory(func(string, mirror.MirrorConfig) (mirror.Peer, error) { return nil, nil }))
	require.NoError(t, err)
	defer m.Close()
	h := adminhandler.New(m)

	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		mirror.KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), mirror.KeyFetchWaitMaxMs: "50"}))
	_, err = m.StartMirrorTopics(ctx, "k", []string{"events"}, mirror.StartOptions{})
	require.NoError(t, err)
	require.NoError(t, m.WaitForLag(ctx, "k", []string{"events"}, 0))
	req := admin.NewPtrDescribeClusterMirrorsRequest()
	req.IncludeMirrorStates, req.IncludeMirrorLags = true, true
	_, err = h.DescribeClusterMirrors(ctx, &admin.RequestContext{}, req)
	require.NoError(t, err)
	del := admin.NewPtrDeleteClusterMirrorsRequest()
	del.MirrorName = "nope"
	_, err = h.DeleteClusterMirrors(ctx, &admin.RequestContext{}, del)
	require.ErrorIs(t, err, admin.CodeUnknownClusterMirror.Err())

	part := map[string]string{"mirror": "k", "topic": "events", "partition": "0"}
	fams := series(t, mt)
	v, ok := value(t, fams, "kmirror_partition_state", map[string]string{"mirror": "k", "topic": "events", "partition": "0", "state": "MIRRORING"})
	require.True(t, ok, "state gauge")
	require.Equal(t, 1.0, v)
	require.Len(t, fams["kmirror_partition_state"].GetMetric(), 1, "one state per partition")
	v, ok = value(t, fams, "kmirror_partition_lag_offsets", part)
	require.True(t, ok)
	require.Equal(t, 0.0, v, "caught up")
	v, ok = value(t, fams, "kmirror_partition_lag_seconds", part)
	require.True(t, ok)
	require.Equal(t, 0.0, v, "caught up")
	v, _ = value(t, fams, "kmirror_mirrored_bytes_total", map[string]string{"mirror": "k", "topic": "events"})
	require.Positive(t, v)
	v, _ = value(t, fams, "kmirror_mirrored_records_total", map[string]string{"mirror": "k", "topic": "events"})
	require.Equal(t, float64(n), v)
	v, _ = value(t, fams, "kmirror_fetch_latency_seconds", map[string]string{"mirror": "k", "broker": "0"})
	require.Positive(t, v, "fetch round trips to broker 0")
	v, _ = value(t, fams, "kmirror_coordinator_write_latency_seconds", map[string]string{"mirror": "k"})
	require.Positive(t, v)
	v, _ = value(t, fams, "kmirror_state_transitions_total", map[string]string{"mirror": "k", "from": "PREPARING", "to": "MIRRORING"})
	require.Equal(t, 1.0, v)
	v, _ = value(t, fams, "kmirror_leader_epoch_bumps_total", map[string]string{"mirror": "k", "topic": "events", "cause": "ahead"})
	require.Positive(t, v)
	v, _ = value(t, fams, "kmirror_admin_requests_total", map[string]string{"api": "DescribeClusterMirrors", "code": "NONE"})
	require.Equal(t, 1.0, v)
	v, _ = value(t, fams, "kmirror_admin_requests_total", map[string]string{"api": "DeleteClusterMirrors", "code": "UNKNOWN_CLUSTER_MIRROR"})
	require.Equal(t, 1.0, v)

	_, err = m.StopMirrorTopics(ctx, "k", []string{"events"}, mirror.StopOptions{Wait: true})
	require.NoError(t, err)
	fams = series(t, mt)
	v, _ = value(t, fams, "kmirror_stopping_duration_seconds", map[string]string{"mirror": "k"})
	require.Equal(t, 1.0, v, "one failover observed")
	_, ok = value(t, fams, "kmirror_partition_lag_offsets", part)
	require.False(t, ok, "no fetcher: lag is unknown, not 0")
	v, _ = value(t, fams, "kmirror_partition_state", map[string]string{"mirror": "k", "topic": "events", "partition": "0", "state": "STOPPED"})
	require.Equal(t, 1.0, v)
	require.Equal(t, 1, testutil.CollectAndCount(mt.Registry(), "kmirror_partition_state"))

	// The HTTP handler serves the same series.
	srv := httptest.NewServer(mt.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `kmirror_partition_state{mirror="k",partition="0",state="STOPPED",topic="events"} 1`)
	require.Contains(t, string(body), "kmirror_mirrored_bytes_total")
}

func TestPartitionGoneDropsSeries(t *testing.T) {
	mt := kmprom.New("test")
	p := mirror.PartitionRef{Mirror: "m", Topic: "t", Partition: 3}
	mt.PartitionState(p, statemachine.Preparing)
	mt.PartitionState(p, statemachine.Mirroring)
	mt.Lag(p, 5, time.Now().Add(-90*time.Second))
	require.Equal(t, 1, testutil.CollectAndCount(mt.Registry(), "test_partition_state"))
	v, ok := value(t, series(t, mt), "test_partition_lag_seconds", map[string]string{"partition": "3"})
	require.True(t, ok)
	require.GreaterOrEqual(t, v, 90.0, "computed at scrape time")
	mt.Lag(p, 5, time.Time{}) // behind with nothing mirrored: seconds unknown, offsets known
	_, ok = value(t, series(t, mt), "test_partition_lag_seconds", map[string]string{"partition": "3"})
	require.False(t, ok)
	v, ok = value(t, series(t, mt), "test_partition_lag_offsets", map[string]string{"partition": "3"})
	require.True(t, ok)
	require.Equal(t, 5.0, v)
	mt.Lag(p, 0, time.Time{})
	v, _ = value(t, series(t, mt), "test_partition_lag_seconds", map[string]string{"partition": "3"})
	require.Equal(t, 0.0, v, "caught up")
	mt.PartitionGone(p)
	require.Equal(t, 0, testutil.CollectAndCount(mt.Registry(), "test_partition_state"))
	require.Equal(t, 0, testutil.CollectAndCount(mt.Registry(), "test_partition_lag_offsets"))
	require.Equal(t, 0, testutil.CollectAndCount(mt.Registry(), "test_partition_lag_seconds"))
}

// TestDashboardUsesExportedSeries keeps docs/grafana/kmirror.json in step with New: every
// kmirror_ name its queries use is a series this package exports.
func TestDashboardUsesExportedSeries(t *testing.T) {
	raw, err := os.ReadFile("../../docs/grafana/kmirror.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	mt := kmprom.New("")
	p := mirror.PartitionRef{Mirror: "m", Topic: "t"}
	mt.PartitionState(p, statemachine.Mirroring) // vectors appear in Gather once they have a child
	mt.Lag(p, 0, time.Time{})
	mt.Mirrored(p, 1, 1)
	mt.Fetch("m", 0, time.Millisecond, errors.New("x"), []int16{6})
	mt.Truncation(p, mirror.TruncationOutOfRange, 3)
	mt.LeaderEpochBump(p, mirror.EpochBumpAhead, 1, 11)
	mt.StateTransition(p, statemachine.Preparing, statemachine.Mirroring)
	mt.StoppingDuration(p, time.Second)
	mt.CoordinatorWrite("m", 1, time.Millisecond, errors.New("x"))
	mt.AdminRequest(admin.RequestObservation{Key: admin.KeyListClusterMirrors, API: "ListClusterMirrors"})
	exported := map[string]bool{}
	for name, f := range series(t, mt) {
		exported[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			exported[name+"_bucket"] = true
		}
	}
	require.Len(t, exported, 17+4, "every series has a child (17 families, 4 histograms)")
	names := regexp.MustCompile(`kmirror_[a-z_]+`)
	used := 0
	for _, pn := range dash.Panels {
		require.NotEmpty(t, pn.Targets, pn.Title)
		for _, tg := range pn.Targets {
			for _, n := range names.FindAllString(tg.Expr, -1) {
				require.True(t, exported[n], "panel %q uses %s", pn.Title, n)
				used++
			}
		}
	}
	require.Positive(t, used)
}

func TestFidelitySeries(t *testing.T) {
	mt := kmprom.New("test")
	p := mirror.PartitionRef{Mirror: "m", Topic: "t", Partition: 2}
	mt.FidelityVerified(p, 40)
	v, ok := value(t, series(t, mt), "test_partition_verified_offset", map[string]string{"partition": "2"})
	require.True(t, ok)
	require.Equal(t, 40.0, v)
	mt.FidelityMismatch(p, 10)
	v, ok = value(t, series(t, mt), "test_fidelity_mismatches_total", map[string]string{"topic": "t"})
	require.True(t, ok)
	require.Equal(t, 1.0, v)
	mt.PartitionGone(p)
	require.Equal(t, 0, testutil.CollectAndCount(mt.Registry(), "test_partition_verified_offset"))
}

// A Mirror over a file destination reports what the opens of its logs
// removed, those before New (replayed) and after: a warning naming the
// partition and the offsets, and the log_recovery series.
func TestLogRecoveryDiscardSeries(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := mirror.OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	require.NoError(t, d.CreateTopic(ctx, mirror.TopicSpec{Name: "orders", TopicID: [16]byte{1}, Partitions: 2}))
	var segs, sizes []int64
	for p := int32(0); p < 2; p++ {
		l, err := d.Log("orders", p)
		require.NoError(t, err)
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: 0, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]records.Record{{Value: []byte("v")}})
		require.NoError(t, err)
		require.NoError(t, l.Append(b))
	}
	require.NoError(t, d.Close())
	tear := func(p int32, n int) {
		seg := fetcher.PartitionDir(root, "orders", p) + "/00000000000000000000.log"
		f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		fi, err := f.Stat()
		require.NoError(t, err)
		segs, sizes = append(segs, fi.Size()), append(sizes, int64(n))
		_, err = f.Write(make([]byte, n)) // a batch header cut short
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	tear(0, 20)
	tear(1, 30)

	d, err = mirror.OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	_, err = d.Log("orders", 0) // opened before the Mirror exists
	require.NoError(t, err)
	var logs strings.Builder
	var logsMu sync.Mutex
	mt := kmprom.New("test")
	m, err := mirror.New(mirror.Config{Destination: d, SyncInterval: -1},
		mirror.WithMetrics(mt), mirror.WithLogger(slog.New(slog.NewJSONHandler(lockedWriter{&logsMu, &logs}, nil))),
		mirror.WithPeerFactory(func(string, mirror.MirrorConfig) (mirror.Peer, error) { return nil, nil }))
	require.NoError(t, err)
	_, err = d.Log("orders", 1)
	require.NoError(t, err)

	fams := series(t, mt)
	v, ok := value(t, fams, "test_log_recovery_discards_total", map[string]string{"topic": "orders", "kind": "torn_tail"})
	require.True(t, ok)
	require.Equal(t, 2.0, v)
	v, ok = value(t, fams, "test_log_recovery_discarded_bytes_total", map[string]string{"topic": "orders", "kind": "torn_tail"})
	require.True(t, ok)
	require.Equal(t, float64(sizes[0]+sizes[1]), v)
	logsMu.Lock()
	out := logs.String()
	logsMu.Unlock()
	for p := range 2 {
		require.Contains(t, out, fmt.Sprintf(`"partition":%d,"file":%q,"position":%d,"from_offset":1,"to_offset":-1,"bytes":%d`,
			p, fetcher.PartitionDir(root, "orders", int32(p))+"/00000000000000000000.log", segs[p], sizes[p]))
	}
	require.NoError(t, m.Close())
	_, err = d.Log("orders", 1)
	require.NoError(t, err)
	v, _ = value(t, series(t, mt), "test_log_recovery_discards_total", map[string]string{"topic": "orders"})
	require.Equal(t, 2.0, v, "a closed Mirror reports nothing more")
}

// lockedWriter serializes the writes of concurrent loggers.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// BenchmarkPartitionStateAtScale is one state change of a partition among
// 10,000 with a state series each: one map write in the partition's shard, not
// a scan of the others (which made P state changes cost P² label matches) nor
// a series deleted and created under the vector's one lock. RunParallel: the
// failover changes every partition at once.
func BenchmarkPartitionStateAtScale(b *testing.B) {
	mt := kmprom.New("bench")
	const n = 10000
	for i := range n {
		mt.PartitionState(mirror.PartitionRef{Mirror: "m", Topic: "t", Partition: int32(i)}, statemachine.Mirroring)
	}
	states := []statemachine.State{statemachine.Stopping, statemachine.Stopped}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			mt.PartitionState(mirror.PartitionRef{Mirror: "m", Topic: "t", Partition: int32(i % n)}, states[i%2])
		}
	})
}
