package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestRunLatencyKfake runs the latency harness with the kmirror contender
// against a kfake cluster for one short window, and checks every record was
// seen with a positive latency and that all three outputs are written.
func TestRunLatencyKfake(t *testing.T) {
	a, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer a.Close()
	out := t.TempDir()
	md := filepath.Join(out, "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(md, []byte("# Benchmarks\n\nprose kept\n"), 0o644))
	cfg := LatencyConfig{SourceBrokers: a.ListenAddrs(), RatesMBps: []float64{0.2, 0.5}, Partitions: 2,
		Warmup: 200 * time.Millisecond, Measure: time.Second, Contenders: []string{ContenderKmirror},
		WorkDir: filepath.Join(out, "work"), ResultsJSON: filepath.Join(out, "latency.json"), Markdown: md,
		Chart: filepath.Join(out, "latency.png"), KafkaVersion: "kfake", Command: "go test"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunLatency(ctx, cfg)
	require.NoError(t, err)
	require.Len(t, rep.Results, 2)
	for _, r := range rep.Results {
		require.Empty(t, r.Error)
		require.Greater(t, r.Sent, int64(50))
		require.Equal(t, r.Sent, r.Seen, "every measured record must reach the FileLogs")
		require.Greater(t, r.P50Ms, 0.0)
		require.LessOrEqual(t, r.FromAckP99Ms, r.P99Ms)
		require.GreaterOrEqual(t, r.P99Ms, r.P50Ms)
		require.GreaterOrEqual(t, r.MaxMs, r.P99Ms)
	}
	data, err := os.ReadFile(cfg.ResultsJSON)
	require.NoError(t, err)
	var back LatencyReport
	require.NoError(t, json.Unmarshal(data, &back))
	require.Len(t, back.Results, 2)
	doc, err := os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(doc), "prose kept")
	require.Contains(t, string(doc), LatencyMarkdownBegin)
	img, err := os.ReadFile(cfg.Chart)
	require.NoError(t, err)
	_, err = png.Decode(bytes.NewReader(img))
	require.NoError(t, err)
}

func TestLatencyHelpers(t *testing.T) {
	ds := []time.Duration{5 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	require.Equal(t, 3.0, quantileMs(ds, 0.5))
	require.Equal(t, 5.0, quantileMs(ds, 0.99))
	require.Equal(t, 5.0, quantileMs(ds, 1))
	require.Zero(t, quantileMs(nil, 0.5))

	rec := newRecorder()
	v := make([]byte, 32)
	now := time.Now()
	binary.BigEndian.PutUint64(v, uint64(now.Add(-7*time.Millisecond).UnixNano()))
	v[8] = 2
	rec.observe(v, now)
	rec.observe(v[:4], now) // too short: ignored
	require.Equal(t, int64(1), rec.seen(2))
	sent := int64(binary.BigEndian.Uint64(v))
	fromSend, fromAck := rec.take(2, map[int64]int64{sent: sent + int64(3*time.Millisecond)})
	require.Equal(t, []time.Duration{7 * time.Millisecond}, fromSend)
	require.Equal(t, []time.Duration{4 * time.Millisecond}, fromAck)
	_, fromAck = rec.take(2, map[int64]int64{sent: sent + int64(time.Second)})
	require.Equal(t, []time.Duration{0}, fromAck, "durable before the ack counts 0")

	goals := latencyGoals([]LatencyResult{{Contender: ContenderKmirror, RateMBps: 10, P99Ms: 5, FromAckP99Ms: 1},
		{Contender: ContenderMM2, RateMBps: 10, P99Ms: 100, FromAckP99Ms: 5}})
	require.Len(t, goals, 2)
	require.False(t, goals[0].Reached, "from ack: 1/5")
	require.InDelta(t, 0.2, goals[0].Value, 1e-9)
	require.True(t, goals[1].Reached, "from send: 5/100")

	require.Error(t, LatencyConfig{SourceBrokers: []string{"x:1"}, RecordBytes: 1024, Partitions: 1, Measure: time.Second,
		Contenders: []string{ContenderRaw}}.Validate())
	require.Error(t, LatencyConfig{SourceBrokers: []string{"x:1"}, RecordBytes: 1024, Partitions: 1, Measure: time.Second,
		Contenders: []string{ContenderMM2}}.Validate(), "mm2 needs B and a classpath")
}
