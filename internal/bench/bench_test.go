package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestMain lets the test binary serve as the contender child process that Run
// re-executes.
func TestMain(m *testing.M) {
	MaybeChild()
	os.Exit(m.Run())
}

// TestRunKfake runs the whole harness (data preparation, the raw, kmirror and
// sarama contenders in child processes, all outputs) on 512 KiB against two
// embedded kfake clusters. MirrorMaker 2 needs a JVM and real brokers and is
// not run here.
func TestRunKfake(t *testing.T) {
	a, err := kfake.NewCluster(kfake.NumBrokers(3))
	require.NoError(t, err)
	defer a.Close()
	b, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer b.Close()
	out := t.TempDir()
	cfg := Config{
		SourceBrokers: a.ListenAddrs(), DestBrokers: b.ListenAddrs(),
		DataBytes: 512 << 10, Partitions: 3, Topic: "bench-test",
		Contenders: []string{ContenderRaw, ContenderKmirror, ContenderSarama},
		WorkDir:    filepath.Join(out, "work"), KafkaVersion: "kfake", Command: "go test",
		ResultsJSON: filepath.Join(out, "results.json"), Markdown: filepath.Join(out, "BENCHMARKS.md"),
		Chart: filepath.Join(out, "throughput.png"), Timeout: time.Minute, Repeat: 2,
		ProfileDir: filepath.Join(out, "prof"),
	}
	require.NoError(t, os.WriteFile(cfg.Markdown, []byte("# Benchmarks\n\nprose kept\n"), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	require.NoError(t, err)

	require.Equal(t, int64(512), rep.Records)
	require.Greater(t, rep.SourceBytes, int64(0))
	ratio := float64(rep.ValueBytes) / float64(rep.SourceBytes)
	require.Greater(t, ratio, 1.6, "lz4 should roughly halve the data")
	require.Len(t, rep.Results, 3)
	for _, r := range rep.Results {
		require.Empty(t, r.Error, r.Contender)
		require.Equal(t, rep.Records, r.Records, r.Contender)
		require.Greater(t, r.CopySeconds, 0.0, r.Contender)
		require.Greater(t, r.WallSeconds, r.CopySeconds, r.Contender)
		require.Greater(t, r.MBps, 0.0, r.Contender)
		require.Greater(t, r.PeakRSSMiB, 1.0, r.Contender)
		require.Greater(t, r.CPUSeconds, 0.0, r.Contender)
	}
	// kmirror copies the batches byte for byte: its segments hold exactly the source bytes.
	require.Equal(t, rep.SourceBytes, rep.Results[1].DestBytes)
	require.Greater(t, rep.Results[2].DestBytes, int64(0))
	require.NotEmpty(t, rep.Goals)

	data, err := os.ReadFile(cfg.ResultsJSON)
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, rep.Records, back.Records)
	require.Len(t, back.Results, 3)

	md, err := os.ReadFile(cfg.Markdown)
	require.NoError(t, err)
	require.Contains(t, string(md), "prose kept")
	require.Contains(t, string(md), MarkdownBegin)
	require.Contains(t, string(md), "| kmirror | **")
	require.Contains(t, string(md), "| sarama | **")

	f, err := os.Open(cfg.Chart)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, chartW, img.Bounds().Dx())

	for _, name := range []string{"raw-1", "kmirror-2", "sarama-2"} {
		st, err := os.Stat(filepath.Join(cfg.ProfileDir, name+".pprof"))
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(0))
	}

	// Render regenerates the section from the JSON alone.
	require.NoError(t, os.WriteFile(cfg.Markdown, []byte("prose\n"+MarkdownBegin+"\nstale\n"+MarkdownEnd+"\n"), 0o644))
	require.NoError(t, Render(cfg, &back))
	md, err = os.ReadFile(cfg.Markdown)
	require.NoError(t, err)
	require.NotContains(t, string(md), "stale")
	require.Contains(t, string(md), "| raw | **")

	// The kmirror FileLogs are removed after the run.
	_, err = os.Stat(kmirrorDir(cfg.WorkDir))
	require.True(t, os.IsNotExist(err))
}

func TestSpliceMarkdown(t *testing.T) {
	doc := []byte("intro\n" + MarkdownBegin + "\nold table\n" + MarkdownEnd + "\noutro\n")
	got := string(SpliceMarkdown(doc, "new table\n"))
	require.Equal(t, "intro\n"+MarkdownBegin+"\nnew table\n"+MarkdownEnd+"\noutro\n", got)
	// Splicing twice is stable.
	require.Equal(t, got, string(SpliceMarkdown([]byte(got), "new table\n")))

	appended := string(SpliceMarkdown([]byte("no markers"), "t\n"))
	require.Equal(t, "no markers\n"+MarkdownBegin+"\nt\n"+MarkdownEnd+"\n", appended)
	require.True(t, strings.HasPrefix(string(SpliceMarkdown(nil, "t\n")), "# Benchmarks\n"))
}

func TestFillValueCompressesAboutTwoToOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var raw bytes.Buffer
	v := make([]byte, 1024)
	for range 256 {
		fillValue(rng, v)
		require.Equal(t, v[:512], v[512:])
		raw.Write(v)
	}
	var c bytes.Buffer
	w := lz4.NewWriter(&c)
	_, err := w.Write(raw.Bytes())
	require.NoError(t, err)
	require.NoError(t, w.Close())
	ratio := float64(raw.Len()) / float64(c.Len())
	require.Greater(t, ratio, 1.6)
	require.Less(t, ratio, 2.5)
}

func TestConfigValidate(t *testing.T) {
	ok := Config{SourceBrokers: []string{"x:1"}, DestBrokers: []string{"y:1"}, MM2Classpath: "cp"}
	require.NoError(t, ok.Validate())
	for name, c := range map[string]Config{
		"no source":    {},
		"bad name":     {SourceBrokers: []string{"x:1"}, Contenders: []string{"kafka-streams"}},
		"sarama no B":  {SourceBrokers: []string{"x:1"}, Contenders: []string{ContenderSarama}},
		"mm2 no cp":    {SourceBrokers: []string{"x:1"}, DestBrokers: []string{"y:1"}, Contenders: []string{ContenderMM2}},
		"tiny records": {SourceBrokers: []string{"x:1"}, RecordBytes: 8},
		"negative":     {SourceBrokers: []string{"x:1"}, DataBytes: -1},
	} {
		err := c.Validate()
		require.ErrorIs(t, err, ErrConfig, name)
	}
}

func TestGoals(t *testing.T) {
	rs := []Result{
		{Contender: ContenderRaw, MBps: 100},
		{Contender: ContenderKmirror, MBps: 95, CPUSecondsPerGB: 0.5, PeakRSSMiB: 100},
		{Contender: ContenderSarama, MBps: 40},
		{Contender: ContenderMM2, Error: "boom"},
	}
	gs := goals(rs)
	require.Len(t, gs, 4) // no MM2 ratio: it failed
	require.Equal(t, Goal{Name: "kmirror / raw ceiling MB/s", Target: ">= 0.90", Value: 0.95, Reached: true}, gs[0])
	require.False(t, gs[1].Reached) // 95/40 < 3
	require.False(t, gs[2].Reached) // CPU
	require.True(t, gs[3].Reached)  // RSS
	require.Nil(t, goals(rs[:1]))
}

func TestRunChildReportsBadSpec(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, 1, runChild("{not json", &out))
	line, ok := strings.CutPrefix(strings.TrimSpace(out.String()), resultPrefix)
	require.True(t, ok)
	var res childResult
	require.NoError(t, json.Unmarshal([]byte(line), &res))
	require.Contains(t, res.Err, ChildEnv)

	out.Reset()
	require.Equal(t, 1, runChild(`{"contender":"mm2","timeout_ms":1000}`, &out))
	require.Contains(t, out.String(), "cannot run as a Go child")
}

func TestMM2Properties(t *testing.T) {
	cfg := Config{SourceBrokers: []string{"a:1", "a:2"}, DestBrokers: []string{"b:1"}, Topic: "t1"}
	cfg.defaults()
	p := mm2Properties(&cfg)
	for _, want := range []string{
		"A.bootstrap.servers = a:1,a:2", "B.bootstrap.servers = b:1", "A->B.enabled = true",
		"B->A.enabled = false", "A->B.topics = t1", "tasks.max = 3", "replication.factor = 1",
		"emit.checkpoints.enabled = false", "B.producer.compression.type = lz4",
	} {
		require.Contains(t, p, want)
	}
}

func TestProcUsage(t *testing.T) {
	self, err := selfUsage()
	require.NoError(t, err)
	require.Greater(t, self.PeakRSSKiB, int64(0))
	byPid, err := pidUsage(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, byPid.PeakRSSKiB, int64(0))
	require.GreaterOrEqual(t, byPid.CPUSeconds, 0.0)
	_, err = pidUsage(-5)
	require.Error(t, err)
}

func TestMedian(t *testing.T) {
	rs := []Result{{Contender: "k", MBps: 30}, {Contender: "k", MBps: 10}, {Contender: "k", MBps: 20}}
	m := median(rs)
	require.Equal(t, 20.0, m.MBps)
	require.Equal(t, 3, m.Runs)
	require.Equal(t, []float64{30, 10, 20}, m.SamplesMBps)
	require.Equal(t, 10.0, median(rs[:2]).MBps) // lower middle of an even count
	rs[1].Error = "timeout"
	require.Equal(t, "timeout", median(rs).Error)
}
