package bench

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Result is one contender's measurement.
type Result struct {
	Contender   string `json:"contender"`
	Description string `json:"description"`
	// Records copied (or fetched, for raw) and the source bytes they came from.
	Records     int64 `json:"records"`
	SourceBytes int64 `json:"source_bytes"`
	// DestBytes are the bytes the copy occupies on the destination (FileLog
	// .log files, or the destination topic's size on B); 0 for raw.
	DestBytes int64 `json:"dest_bytes"`
	// WallSeconds runs from launching the contender's process to the end of
	// the copy (Go: process exit as seen by the parent; MM2: the poll that saw
	// every record on B), startup included.
	WallSeconds float64 `json:"wall_seconds"`
	// CopySeconds runs from the first fetch (Go) or the first record seen on
	// B (MM2) to the end of the copy; MBps is based on it.
	CopySeconds float64 `json:"copy_seconds"`
	// MBps is SourceBytes / 10^6 / CopySeconds.
	MBps float64 `json:"mb_per_s"`
	// WallMBps is SourceBytes / 10^6 / WallSeconds.
	WallMBps float64 `json:"wall_mb_per_s"`
	// CPUSeconds is user+sys of the contender process for its whole life up to
	// the end of the copy; CPUSecondsPerGB divides it by SourceBytes / 10^9.
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUSecondsPerGB float64 `json:"cpu_seconds_per_gb"`
	// UserSeconds and SysSeconds split CPUSeconds.
	UserSeconds float64 `json:"user_seconds"`
	SysSeconds  float64 `json:"sys_seconds"`
	// StartupCPUSeconds is CPU spent before the first record was copied (MM2 only).
	StartupCPUSeconds float64 `json:"startup_cpu_seconds,omitempty"`
	// PeakRSSMiB is VmHWM of the contender process.
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// LoadBefore and LoadAfter are the 1-minute load averages around the run.
	LoadBefore float64 `json:"load_before"`
	LoadAfter  float64 `json:"load_after"`
	// Runs is the number of rounds; the other fields are the median round's.
	Runs int `json:"runs"`
	// SamplesMBps is every round's MB/s, in run order.
	SamplesMBps []float64 `json:"samples_mb_per_s"`
	Error       string    `json:"error,omitempty"`
}

// Goal is one of the targets the issue sets, with what was reached.
type Goal struct {
	Name    string  `json:"name"`
	Target  string  `json:"target"`
	Value   float64 `json:"value"`
	Reached bool    `json:"reached"`
}

// Report is everything one run measured.
type Report struct {
	Started           time.Time `json:"started"`
	Command           string    `json:"command"`
	KafkaVersion      string    `json:"kafka_version"`
	SourceBrokers     []string  `json:"source_brokers"`
	DestBrokers       []string  `json:"dest_brokers"`
	Machine           Machine   `json:"machine"`
	Topic             string    `json:"topic"`
	Partitions        int32     `json:"partitions"`
	ReplicationFactor int16     `json:"replication_factor"`
	RecordBytes       int       `json:"record_bytes"`
	Records           int64     `json:"records"`
	ValueBytes        int64     `json:"value_bytes"`
	// SourceBytes is the size of the source topic on A (lz4 batches).
	SourceBytes    int64    `json:"source_bytes"`
	ProduceSeconds float64  `json:"produce_seconds"`
	MM2Tasks       int      `json:"mm2_tasks"`
	Repeat         int      `json:"repeat"`
	KmirrorNoFsync bool     `json:"kmirror_no_fsync,omitempty"`
	LoadBefore     float64  `json:"load_before"`
	LoadAfter      float64  `json:"load_after"`
	Results        []Result `json:"results"`
	Goals          []Goal   `json:"goals"`
}

var descriptions = map[string]string{
	ContenderRaw:     "raw kmsg Fetch loop, bytes discarded (ceiling)",
	ContenderKmirror: "fetcher.KafkaSource + Fetcher into FileLogs, FsyncOnFlush + final Flush",
	ContenderSarama:  "sarama consumer -> sarama async producer (lz4) into a topic on B",
	ContenderMM2:     "MirrorMaker 2 dedicated mode A->B",
}

// Run prepares the data, runs every configured contender one after the
// other, and writes the configured outputs. A contender that fails is
// reported in its Result.Error and the run goes on; Run itself fails only
// when the data cannot be prepared or an output cannot be written.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "kmirror-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.WorkDir = dir
	}
	if cfg.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		cfg.Executable = exe
	}
	rep := &Report{
		Started: time.Now().UTC(), Command: cfg.Command, KafkaVersion: cfg.KafkaVersion,
		SourceBrokers: cfg.SourceBrokers, DestBrokers: cfg.DestBrokers, Machine: machineInfo(),
		Topic: cfg.Topic, Partitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor,
		RecordBytes: cfg.RecordBytes, MM2Tasks: cfg.MM2Tasks, Repeat: cfg.Repeat, KmirrorNoFsync: cfg.KmirrorNoFsync, LoadBefore: loadAvg(),
	}
	src, err := newClient(cfg.SourceBrokers)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	logf(&cfg, "creating %s (%d partitions, RF %d) on %s", cfg.Topic, cfg.Partitions, cfg.ReplicationFactor, strings.Join(cfg.SourceBrokers, ","))
	if err := createTopic(ctx, src, cfg.Topic, cfg.Partitions, cfg.ReplicationFactor); err != nil {
		return nil, err
	}
	if !cfg.KeepTopics {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = deleteTopics(cctx, src, cfg.Topic)
		}()
	}
	logf(&cfg, "producing %d MiB of %d-byte lz4 records", cfg.DataBytes>>20, cfg.RecordBytes)
	data, err := produceData(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	rep.Records, rep.ValueBytes, rep.ProduceSeconds = data.Records, data.ValueBytes, data.Elapsed.Seconds()
	if rep.SourceBytes, err = topicBytes(ctx, src, cfg.Topic, cfg.Partitions); err != nil {
		return nil, err
	}
	logf(&cfg, "source: %d records, %d value bytes, %d bytes on disk (%.2f:1) in %.1fs",
		rep.Records, rep.ValueBytes, rep.SourceBytes, float64(rep.ValueBytes)/float64(max(rep.SourceBytes, 1)), rep.ProduceSeconds)

	// Go contenders run Repeat rounds, interleaved (raw, kmirror, sarama, raw,
	// ...) so that a change in machine load hits each alike; MM2 runs once,
	// last. Each contender's Result is its median-MB/s round.
	samples := make(map[string][]Result)
	for round := range cfg.Repeat {
		for _, name := range cfg.Contenders {
			if name == ContenderMM2 && round < cfg.Repeat-1 {
				continue
			}
			r := runMeasured(ctx, &cfg, data, name, rep.SourceBytes, round)
			samples[name] = append(samples[name], r)
		}
	}
	for _, name := range cfg.Contenders {
		if rs, ok := samples[name]; ok {
			rep.Results = append(rep.Results, median(rs))
			delete(samples, name)
		}
	}
	rep.LoadAfter = loadAvg()
	rep.Goals = goals(rep.Results)
	if err := writeOutputs(&cfg, rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func logf(cfg *Config, format string, args ...any) {
	fmt.Fprintf(cfg.Log, "bench: "+format+"\n", args...)
}

// runMeasured runs contender name once and returns its Result.
func runMeasured(ctx context.Context, cfg *Config, data produced, name string, sourceBytes int64, round int) Result {
	r := Result{Contender: name, Description: descriptions[name], SourceBytes: sourceBytes, Runs: 1, LoadBefore: loadAvg()}
	logf(cfg, "running %s, round %d (load %.2f)", name, round+1, r.LoadBefore)
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err := runOne(cctx, cfg, data, &r, round)
	cancel()
	r.LoadAfter = loadAvg()
	if err != nil {
		r.Error = err.Error()
		logf(cfg, "%s failed: %v", name, err)
		return r
	}
	if r.CopySeconds > 0 {
		r.MBps = float64(r.SourceBytes) / 1e6 / r.CopySeconds
	}
	if r.WallSeconds > 0 {
		r.WallMBps = float64(r.SourceBytes) / 1e6 / r.WallSeconds
	}
	if r.SourceBytes > 0 {
		r.CPUSecondsPerGB = r.CPUSeconds / (float64(r.SourceBytes) / 1e9)
	}
	r.SamplesMBps = []float64{r.MBps}
	logf(cfg, "%s: %.1f MB/s (wall %.1fs, copy %.1fs), %.2f CPU s/GB, peak RSS %.0f MiB",
		name, r.MBps, r.WallSeconds, r.CopySeconds, r.CPUSecondsPerGB, r.PeakRSSMiB)
	return r
}

// median returns the round with the median MB/s (the lower middle one for an
// even count), with Runs and SamplesMBps covering every round. A failed round
// makes the whole contender failed: a benchmark that sometimes does not
// finish has no throughput to report.
func median(rs []Result) Result {
	all := make([]float64, 0, len(rs))
	for _, r := range rs {
		if r.Error != "" {
			r.Runs = len(rs)
			return r
		}
		all = append(all, r.MBps)
	}
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b Result) int { return cmp.Compare(a.MBps, b.MBps) })
	m := sorted[(len(sorted)-1)/2]
	m.Runs, m.SamplesMBps = len(rs), all
	return m
}

// runOne runs one contender and fills r.
func runOne(ctx context.Context, cfg *Config, data produced, r *Result, round int) error {
	spec := childSpec{
		Contender: r.Contender, SourceBrokers: cfg.SourceBrokers, DestBrokers: cfg.DestBrokers,
		Topic: cfg.Topic, EndOffsets: data.EndOffsets, TimeoutMS: cfg.Timeout.Milliseconds(),
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		spec.CPUProfile = filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-%d.pprof", r.Contender, round+1))
	}
	switch r.Contender {
	case ContenderMM2:
		return runMM2Result(ctx, cfg, data, r)
	case ContenderKmirror:
		spec.Dir, spec.NoFsync = kmirrorDir(cfg.WorkDir), cfg.KmirrorNoFsync
		defer os.RemoveAll(spec.Dir)
	case ContenderSarama:
		spec.DestTopic = cfg.Topic + "-sarama"
		cl, err := newClient(cfg.DestBrokers)
		if err != nil {
			return err
		}
		defer cl.Close()
		if err := createTopic(ctx, cl, spec.DestTopic, cfg.Partitions, cfg.ReplicationFactor); err != nil {
			return err
		}
		if !cfg.KeepTopics {
			defer func() { _ = deleteTopics(context.Background(), cl, spec.DestTopic) }()
		}
	}
	res, wall, err := spawnChild(ctx, cfg.Executable, spec, cfg.Log)
	if err != nil {
		return err
	}
	r.Records, r.WallSeconds, r.CopySeconds = res.Records, wall.Seconds(), time.Duration(res.CopyNanos).Seconds()
	r.CPUSeconds, r.PeakRSSMiB = res.Usage.CPUSeconds, float64(res.Usage.PeakRSSKiB)/1024
	r.UserSeconds, r.SysSeconds = res.Usage.UserSeconds, res.Usage.SysSeconds
	if r.Records != data.Records {
		return fmt.Errorf("%w: %s copied %d of %d records", ErrIncomplete, r.Contender, r.Records, data.Records)
	}
	switch r.Contender {
	case ContenderRaw:
		if res.Bytes != r.SourceBytes {
			return fmt.Errorf("%w: raw fetched %d bytes, the source holds %d", ErrIncomplete, res.Bytes, r.SourceBytes)
		}
	case ContenderKmirror:
		n, err := logFileBytes(spec.Dir)
		if err != nil {
			return err
		}
		r.DestBytes = n
	case ContenderSarama:
		n, err := destTopicBytes(ctx, cfg, spec.DestTopic)
		if err != nil {
			return err
		}
		r.DestBytes = n
	}
	return nil
}

func destTopicBytes(ctx context.Context, cfg *Config, topic string) (int64, error) {
	cl, err := newClient(cfg.DestBrokers)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	return topicBytes(ctx, cl, topic, cfg.Partitions)
}

func runMM2Result(ctx context.Context, cfg *Config, data produced, r *Result) error {
	target := mm2SourceAlias + "." + cfg.Topic
	if !cfg.KeepTopics {
		defer func() {
			cl, err := newClient(cfg.DestBrokers)
			if err == nil {
				_ = deleteTopics(context.Background(), cl, target)
				cl.Close()
			}
		}()
	}
	m, err := runMM2(ctx, cfg, data.Records)
	r.Records = m.Records
	if err != nil {
		return err
	}
	r.WallSeconds, r.CopySeconds = m.Wall.Seconds(), m.Copy.Seconds()
	r.CPUSeconds, r.StartupCPUSeconds = m.Usage.CPUSeconds, m.CPUAtFirst
	r.UserSeconds, r.SysSeconds = m.Usage.UserSeconds, m.Usage.SysSeconds
	r.PeakRSSMiB = float64(m.Usage.PeakRSSKiB) / 1024
	n, err := destTopicBytes(ctx, cfg, target)
	if err != nil {
		return err
	}
	r.DestBytes = n
	return nil
}

// logFileBytes sums the sizes of the *.log segment files under dir.
func logFileBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".log") {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	return total, nil
}

// goals evaluates the targets for kmirror against the other results.
func goals(results []Result) []Goal {
	by := make(map[string]Result)
	for _, r := range results {
		if r.Error == "" {
			by[r.Contender] = r
		}
	}
	k, ok := by[ContenderKmirror]
	if !ok {
		return nil
	}
	var gs []Goal
	ratio := func(name, target string, other string, min float64) {
		o, ok := by[other]
		if !ok || o.MBps == 0 {
			return
		}
		v := k.MBps / o.MBps
		gs = append(gs, Goal{Name: name, Target: target, Value: v, Reached: v >= min})
	}
	ratio("kmirror / raw ceiling MB/s", ">= 0.90", ContenderRaw, 0.90)
	ratio("kmirror / MirrorMaker 2 MB/s", ">= 3", ContenderMM2, 3)
	ratio("kmirror / sarama copier MB/s", ">= 3", ContenderSarama, 3)
	gs = append(gs,
		Goal{Name: "kmirror CPU s/GB", Target: "<= 0.3", Value: k.CPUSecondsPerGB, Reached: k.CPUSecondsPerGB <= 0.3},
		Goal{Name: "kmirror peak RSS MiB", Target: "<= 256", Value: k.PeakRSSMiB, Reached: k.PeakRSSMiB <= 256},
	)
	return gs
}
