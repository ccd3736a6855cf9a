package kmprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
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
