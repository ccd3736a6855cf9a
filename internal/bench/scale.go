package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// ScaleConfig configures the scale benchmark: one kmirrord site (B) mirroring
// many partitions from another kmirrord (A) on loopback.
type ScaleConfig struct {
	// Kmirrord is the kmirrord binary; empty builds ./examples/kmirrord into
	// WorkDir with `go build` (run from the module root).
	Kmirrord string
	// Partitions are the partition counts measured, one after the other,
	// each with a fresh pair of sites (default 1000, 10000, 100000).
	Partitions []int
	// TopicPartitions is the partition count of each source topic (default
	// 500): P partitions are P/TopicPartitions topics.
	TopicPartitions int
	// ThroughputMiB is how many MiB of record values the throughput
	// comparison copies through 6 and through 1,000 partitions (default 2048;
	// 0 after defaults: skipped when negative).
	ThroughputMiB int
	// Poll is the describe interval of every wait (default 250 ms); the
	// figures are rounded up to it.
	Poll time.Duration
	// IdleWindow is how long the source's CPU is sampled once everything is
	// mirrored (default 20 s); reported per minute.
	IdleWindow time.Duration
	// PhaseTimeout bounds each measured phase (default 15 min).
	PhaseTimeout time.Duration
	// ActiveReconcilers is the destination's -active-reconcilers (0: kmirrord's
	// default).
	ActiveReconcilers int
	// FlapAt are the partition counts whose run also measures a link flap
	// (runFlap) after the restart (default 50000); FlapFreeze is how long
	// the source is frozen (default 60 s).
	FlapAt     []int
	FlapFreeze time.Duration
	// WorkDir holds the sites' data directories and logs (default: a temp
	// directory, removed).
	WorkDir string
	// ProfileDir, when set, receives the CPU profile of every kmirrord run
	// (-cpuprofile): dest-P<n>-start.pprof, dest-P<n>-restart.pprof and
	// source-P<n>.pprof.
	ProfileDir string
	// Destination names the storage the destination site used, recorded in
	// the report (kmirrord's data directory: FileLog per partition).
	Destination string
	// ResultsJSON, Markdown and Chart are the outputs (empty: not written).
	ResultsJSON, Markdown, Chart string
	Command                      string
	Log                          io.Writer
}

func (c *ScaleConfig) defaults() {
	if len(c.Partitions) == 0 {
		c.Partitions = []int{1000, 10000, 50000, 100000}
	}
	if c.FlapAt == nil {
		c.FlapAt = []int{50000}
	}
	if c.FlapFreeze <= 0 {
		c.FlapFreeze = time.Minute
	}
	if c.TopicPartitions <= 0 {
		c.TopicPartitions = 500
	}
	if c.ThroughputMiB == 0 {
		c.ThroughputMiB = 2048
	}
	if c.Poll <= 0 {
		c.Poll = 250 * time.Millisecond
	}
	if c.IdleWindow <= 0 {
		c.IdleWindow = 20 * time.Second
	}
	if c.PhaseTimeout <= 0 {
		c.PhaseTimeout = 15 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Destination == "" {
		c.Destination = "kmirrord -data directory (one FileLog per partition)"
	}
}

// ScaleRun is what one partition count measured. Durations are seconds; a
// phase that failed leaves its figure 0 and Error set.
type ScaleRun struct {
	Partitions int `json:"partitions"`
	Topics     int `json:"topics"`
	// StartAnswerSeconds is the StartMirrorTopics round trip for every topic.
	StartAnswerSeconds float64 `json:"start_answer_seconds"`
	// StartLagZeroSeconds runs from sending StartMirrorTopics to the describe
	// that showed every partition MIRRORING with lag 0 (each partition holds
	// one record on the source).
	StartLagZeroSeconds float64 `json:"start_lag_zero_seconds"`
	// RestartListenSeconds runs from exec of the restarted destination to its
	// "kmirrord listening" log line (SIGTERM of the previous run not included);
	// RestartLagZeroSeconds from the same exec to every partition MIRRORING
	// with lag 0 again.
	RestartListenSeconds  float64 `json:"restart_listen_seconds"`
	RestartLagZeroSeconds float64 `json:"restart_lag_zero_seconds"`
	// ShutdownSeconds is SIGTERM to exit of the destination before the restart.
	ShutdownSeconds float64 `json:"shutdown_seconds"`
	// StopAnswerSeconds is the StopMirrorTopics round trip; StopSeconds runs
	// from sending it to every partition STOPPED (the failover).
	StopAnswerSeconds float64 `json:"stop_answer_seconds"`
	StopSeconds       float64 `json:"stop_seconds"`
	// Peak RSS (VmHWM, MiB) of the source and the destination (the larger of
	// the destination's two runs), and their open descriptors once every
	// partition was mirrored after the start.
	SourcePeakRSSMiB float64 `json:"source_peak_rss_mib"`
	DestPeakRSSMiB   float64 `json:"dest_peak_rss_mib"`
	SourceFDs        int     `json:"source_fds"`
	DestFDs          int     `json:"dest_fds"`
	// SourceIdleCPUPerMinute is the source's CPU seconds (user+sys) per
	// minute while every partition is mirrored and nothing is produced
	// (the destination's fetches only); DestIdleCPUPerMinute the same of
	// the destination.
	SourceIdleCPUPerMinute float64 `json:"source_idle_cpu_s_per_min"`
	DestIdleCPUPerMinute   float64 `json:"dest_idle_cpu_s_per_min"`
	// Flap is the link flap of this partition count (ScaleConfig.FlapAt).
	Flap *ScaleFlap `json:"flap,omitempty"`
	// Profiles are the CPU profiles written (paths as given).
	Profiles []string `json:"profiles,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// ScaleThroughput compares the copy rate through few and many partitions.
type ScaleThroughput struct {
	ValueBytes int64 `json:"value_bytes"`
	// MBps6 and MBps1000 are value bytes / 10^6 / copy seconds, the copy
	// running from the first describe that showed destination data to the
	// one that showed every partition at lag 0.
	MBps6           float64 `json:"mb_per_s_6"`
	MBps1000        float64 `json:"mb_per_s_1000"`
	CopySeconds6    float64 `json:"copy_seconds_6"`
	CopySeconds1000 float64 `json:"copy_seconds_1000"`
	// StartToLagZero6 and StartToLagZero1000 run from sending
	// StartMirrorTopics to every partition at lag 0.
	StartToLagZero6    float64 `json:"start_to_lag_zero_seconds_6"`
	StartToLagZero1000 float64 `json:"start_to_lag_zero_seconds_1000"`
	ProducedInSeconds  float64 `json:"produced_in_seconds"`
	// Profile is the destination's CPU profile over both copies.
	Profile string `json:"profile,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ScaleReport is everything one scale run measured.
type ScaleReport struct {
	Started         time.Time        `json:"started"`
	Command         string           `json:"command"`
	Machine         Machine          `json:"machine"`
	Destination     string           `json:"destination"`
	TopicPartitions int              `json:"topic_partitions"`
	PollSeconds     float64          `json:"poll_seconds"`
	IdleSeconds     float64          `json:"idle_window_seconds"`
	NoFileLimit     uint64           `json:"nofile_limit"`
	LoadBefore      float64          `json:"load_before"`
	LoadAfter       float64          `json:"load_after"`
	Throughput      *ScaleThroughput `json:"throughput,omitempty"`
	Runs            []ScaleRun       `json:"runs"`
	Goals           []ScaleGoal      `json:"goals"`
}

// ScaleGoal is one scale target and what was reached; Measured is false when
// the run did not include the goal's partition count.
type ScaleGoal struct {
	Name     string  `json:"name"`
	Target   string  `json:"target"`
	Limit    float64 `json:"limit"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Measured bool    `json:"measured"`
	Reached  bool    `json:"reached"`
	// AtLeast: the goal is Value >= Limit (else Value <= Limit).
	AtLeast bool `json:"at_least,omitempty"`
	// Profile is the CPU profile that shows where the time of a missed goal went.
	Profile string `json:"profile,omitempty"`
}

func scaleLogf(cfg *ScaleConfig, format string, args ...any) {
	fmt.Fprintf(cfg.Log, "bench scale: "+format+"\n", args...)
}

// RunScale runs the scale benchmark for every configured partition count and
// writes the outputs. A partition count whose run fails is reported in its
// ScaleRun.Error and the next one runs.
func RunScale(ctx context.Context, cfg ScaleConfig) (*ScaleReport, error) {
	cfg.defaults()
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "kmirror-scale-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.WorkDir = dir
	}
	if cfg.Kmirrord == "" {
		bin := filepath.Join(cfg.WorkDir, "kmirrord")
		scaleLogf(&cfg, "building kmirrord into %s", bin)
		out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./examples/kmirrord").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("bench: go build ./examples/kmirrord: %w: %s", err, out)
		}
		cfg.Kmirrord = bin
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	rep := &ScaleReport{Started: time.Now().UTC(), Command: cfg.Command, Machine: machineInfo(), Destination: cfg.Destination,
		TopicPartitions: cfg.TopicPartitions, PollSeconds: cfg.Poll.Seconds(), IdleSeconds: cfg.IdleWindow.Seconds(),
		NoFileLimit: noFileLimit(), LoadBefore: loadAvg()}
	if cfg.ThroughputMiB > 0 {
		tp := runScaleThroughput(ctx, &cfg)
		rep.Throughput = &tp
	}
	for _, p := range cfg.Partitions {
		run := runScaleOnce(ctx, &cfg, p)
		rep.Runs = append(rep.Runs, run)
		// The outputs after every partition count: a run cut short keeps what it measured.
		rep.LoadAfter, rep.Goals = loadAvg(), scaleGoals(rep)
		if err := writeScaleOutputs(&cfg, rep); err != nil {
			return rep, err
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep.LoadAfter = loadAvg()
	rep.Goals = scaleGoals(rep)
	if err := writeScaleOutputs(&cfg, rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// noFileLimit is the soft RLIMIT_NOFILE the sites inherit.
func noFileLimit() uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil {
		return l.Cur
	}
	return 0
}

// createTopics creates topics of parts partitions each (replication factor 1)
// in one request; a topic that exists is accepted.
func createTopics(ctx context.Context, cl *kgo.Client, topics []string, parts int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60_000
	for _, name := range topics {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, parts, 1
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("bench: create topics: %w", err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("bench: create topic %s: %w", rt.Topic, err)
		}
	}
	return nil
}

// scalePair is a source and a destination site with clients to both.
type scalePair struct {
	src, dst_      *scaleSite
	srcCl, dstKgo  *kgo.Client
	dst            *admin.Client // the destination's mirror RPCs
	sampler        *syncSample
	mirror         string
	cancelSampling context.CancelFunc
}

func (p *scalePair) close() {
	if p.cancelSampling != nil {
		p.cancelSampling()
	}
	if p.srcCl != nil {
		p.srcCl.Close()
	}
	if p.dstKgo != nil {
		p.dstKgo.Close()
	}
	p.dst_.stop(2 * time.Minute)
	p.src.stop(2 * time.Minute)
}

// startPair starts the source and destination sites under dir and creates
// mirror "scale" on the destination.
func startPair(ctx context.Context, cfg *ScaleConfig, dir, srcProfile, dstProfile string) (*scalePair, error) {
	p := &scalePair{mirror: "scale",
		src: &scaleSite{name: "source", bin: cfg.Kmirrord, dir: filepath.Join(dir, "source")}}
	p.dst_ = &scaleSite{name: "dest", bin: cfg.Kmirrord, dir: filepath.Join(dir, "dest")}
	if cfg.ActiveReconcilers > 0 {
		p.dst_.extra = []string{"-active-reconcilers", strconv.Itoa(cfg.ActiveReconcilers)}
	}
	p.sampler = &syncSample{sites: []*scaleSite{p.src, p.dst_}}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := p.src.start(sctx, "0", srcProfile); err != nil {
		return p, err
	}
	if _, err := p.dst_.start(sctx, "0", dstProfile); err != nil {
		return p, err
	}
	var err error
	// Uncompressed batches: the bytes the mirror moves are the value bytes the
	// throughput comparison counts (kgo's default snappy made its patterned
	// values a few MB on the wire).
	if p.srcCl, err = p.src.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<20), kgo.RequestTimeoutOverhead(5*time.Minute)); err != nil {
		return p, err
	}
	if err := p.connectDest(); err != nil {
		return p, err
	}
	req := admin.NewPtrCreateClusterMirrorRequest()
	req.MirrorName = p.mirror
	bootstrap := p.src.addr
	req.Configs = []admin.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: &bootstrap}}
	if _, err := p.dst.CreateClusterMirror(sctx, req); err != nil {
		return p, fmt.Errorf("bench: create mirror: %w", err)
	}
	samp, stop := context.WithCancel(ctx)
	p.cancelSampling = stop
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-samp.Done():
				return
			case <-t.C:
				p.sampler.sample()
			}
		}
	}()
	return p, nil
}

func (p *scalePair) connectDest() error {
	if p.dstKgo != nil {
		p.dstKgo.Close()
	}
	cl, err := p.dst_.client(kgo.RequestTimeoutOverhead(15 * time.Minute))
	if err != nil {
		return err
	}
	p.dstKgo, p.dst = cl, admin.NewClient(cl)
	return nil
}

// createSourceTopics creates topics of parts partitions each on the source
// (many per request) and returns their names.
func createSourceTopics(ctx context.Context, cl *kgo.Client, prefix string, n, parts int) ([]string, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	for chunk := range slices.Chunk(names, 4) {
		if err := createTopics(ctx, cl, chunk, int32(parts)); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// produceOnePerPartition writes one small record into every partition.
func produceOnePerPartition(ctx context.Context, cl *kgo.Client, topics []string, parts int) error {
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for _, t := range topics {
		for p := range int32(parts) {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: t, Partition: p, Value: []byte("scale")}, func(_ *kgo.Record, err error) {
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
				wg.Done()
			})
		}
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("bench: produce: %w", err)
	}
	return nil
}

// startTopics sends one StartMirrorTopics for topics.
func startTopics(ctx context.Context, cl *admin.Client, mirror string, topics []string) error {
	req := admin.NewPtrStartMirrorTopicsRequest()
	req.MirrorName = mirror
	req.TimeoutMs = int32((15 * time.Minute).Milliseconds())
	for _, name := range topics {
		t := admin.NewStartMirrorTopicsRequestTopic()
		t.Name = name
		req.Topics = append(req.Topics, t)
	}
	resp, err := cl.StartMirrorTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("bench: StartMirrorTopics: %w", err)
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("bench: StartMirrorTopics %s: %w", t.Name, admin.ErrorFromResponse(t.ErrorCode, t.ErrorMessage))
		}
	}
	return nil
}

// stopTopics sends one StopMirrorTopics for topics.
func stopTopics(ctx context.Context, cl *admin.Client, mirror string, topics []string) error {
	req := admin.NewPtrStopMirrorTopicsRequest()
	req.MirrorName = mirror
	req.TimeoutMs = int32((15 * time.Minute).Milliseconds())
	for _, name := range topics {
		req.Topics = append(req.Topics, admin.StopMirrorTopicsRequestTopic{TopicName: name})
	}
	resp, err := cl.StopMirrorTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("bench: StopMirrorTopics: %w", err)
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("bench: StopMirrorTopics %s: %w", t.TopicName, admin.ErrorFromResponse(t.ErrorCode, t.ErrorMessage))
		}
	}
	return nil
}

func allLagZero(n int) func(partitionCounts) bool {
	return func(c partitionCounts) bool { return c.total == n && c.lagZero == n }
}

func allIn(n int) func(partitionCounts) bool {
	return func(c partitionCounts) bool { return c.total == n && c.inState == n }
}

// runScaleOnce measures one partition count with a fresh pair of sites.
func runScaleOnce(ctx context.Context, cfg *ScaleConfig, partitions int) (run ScaleRun) {
	per := min(cfg.TopicPartitions, partitions)
	run = ScaleRun{Partitions: partitions, Topics: (partitions + per - 1) / per}
	partitions = run.Topics * per
	run.Partitions = partitions
	dir := filepath.Join(cfg.WorkDir, fmt.Sprintf("p%d", partitions))
	defer os.RemoveAll(dir)
	prof := func(name string) string {
		if cfg.ProfileDir == "" {
			return ""
		}
		path := filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-P%d.pprof", name, partitions))
		run.Profiles = append(run.Profiles, path)
		return path
	}
	fail := func(err error) ScaleRun {
		run.Error = err.Error()
		scaleLogf(cfg, "P=%d failed: %v", partitions, err)
		return run
	}
	scaleLogf(cfg, "P=%d: %d topics of %d partitions", partitions, run.Topics, per)
	progress := func(format string, args ...any) { scaleLogf(cfg, fmt.Sprintf("P=%d: ", partitions)+format, args...) }
	p, err := startPair(ctx, cfg, dir, prof("source"), prof("dest-start"))
	defer func() {
		p.close()
		run.SourcePeakRSSMiB, run.DestPeakRSSMiB = float64(p.src.peakKiB)/1024, float64(p.dst_.peakKiB)/1024
	}()
	if err != nil {
		return fail(err)
	}
	// Each phase (the source's setup, the start, the idle window, the
	// restart, the failover) has its own PhaseTimeout.
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	phase := func() context.Context {
		c, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
		cancels = append(cancels, cancel)
		return c
	}
	pctx := phase()
	topics, err := createSourceTopics(pctx, p.srcCl, "scale", run.Topics, per)
	if err != nil {
		return fail(err)
	}
	if err := produceOnePerPartition(pctx, p.srcCl, topics, per); err != nil {
		return fail(err)
	}
	scaleLogf(cfg, "P=%d: source ready; StartMirrorTopics", partitions)

	// Start.
	pctx = phase()
	t0 := time.Now()
	if err := startTopics(pctx, p.dst, p.mirror, topics); err != nil {
		return fail(err)
	}
	run.StartAnswerSeconds = time.Since(t0).Seconds()
	scaleLogf(cfg, "P=%d: StartMirrorTopics answered in %.2fs", partitions, run.StartAnswerSeconds)
	d, _, err := waitCounts(pctx, p.dst, p.mirror, statemachine.Mirroring, nil, cfg.Poll, t0, p.sampler.sample, progress, allLagZero(partitions))
	if err != nil {
		return fail(err)
	}
	run.StartLagZeroSeconds = d.Seconds()
	run.SourceFDs, run.DestFDs = p.src.fds(), p.dst_.fds()
	scaleLogf(cfg, "P=%d: all MIRRORING lag 0 %.2fs after the start; fds source %d dest %d", partitions, run.StartLagZeroSeconds, run.SourceFDs, run.DestFDs)

	// Idle CPU.
	pctx = phase()
	su0, err1 := p.src.usage()
	du0, err2 := p.dst_.usage()
	select {
	case <-pctx.Done():
		return fail(pctx.Err())
	case <-time.After(cfg.IdleWindow):
	}
	su1, err3 := p.src.usage()
	du1, err4 := p.dst_.usage()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fail(err)
	}
	perMin := 60 / cfg.IdleWindow.Seconds()
	run.SourceIdleCPUPerMinute = (su1.CPUSeconds - su0.CPUSeconds) * perMin
	run.DestIdleCPUPerMinute = (du1.CPUSeconds - du0.CPUSeconds) * perMin
	scaleLogf(cfg, "P=%d: idle CPU s/min source %.2f dest %.2f", partitions, run.SourceIdleCPUPerMinute, run.DestIdleCPUPerMinute)

	// Restart of the destination.
	pctx = phase()
	port := portOf(p.dst_.addr)
	t1 := time.Now()
	p.dstKgo.Close()
	p.dstKgo = nil
	p.dst_.stop(cfg.PhaseTimeout)
	run.ShutdownSeconds = time.Since(t1).Seconds()
	listen, err := p.dst_.start(pctx, port, prof("dest-restart"))
	if err != nil {
		return fail(err)
	}
	run.RestartListenSeconds = listen.Seconds()
	if err := p.connectDest(); err != nil {
		return fail(err)
	}
	d, _, err = waitCounts(pctx, p.dst, p.mirror, statemachine.Mirroring, nil, cfg.Poll, p.dst_.started, p.sampler.sample, progress, allLagZero(partitions))
	if err != nil {
		return fail(err)
	}
	run.RestartLagZeroSeconds = d.Seconds()
	scaleLogf(cfg, "P=%d: restart: shutdown %.2fs, listening %.2fs, all MIRRORING lag 0 %.2fs", partitions,
		run.ShutdownSeconds, run.RestartListenSeconds, run.RestartLagZeroSeconds)

	// Link flap.
	if slices.Contains(cfg.FlapAt, partitions) {
		flap := runFlap(phase(), cfg, p, topics, per, progress)
		run.Flap = &flap
	}

	// Failover.
	pctx = phase()
	t2 := time.Now()
	if err := stopTopics(pctx, p.dst, p.mirror, topics); err != nil {
		return fail(err)
	}
	run.StopAnswerSeconds = time.Since(t2).Seconds()
	d, _, err = waitCounts(pctx, p.dst, p.mirror, statemachine.Stopped, nil, cfg.Poll, t2, p.sampler.sample, progress, allIn(partitions))
	if err != nil {
		return fail(err)
	}
	run.StopSeconds = d.Seconds()
	scaleLogf(cfg, "P=%d: StopMirrorTopics answered in %.2fs, all STOPPED in %.2fs", partitions, run.StopAnswerSeconds, run.StopSeconds)
	return run
}

// runScaleThroughput copies ThroughputMiB of values through a 6-partition
// and a 1,000-partition topic, one after the other, with one pair of sites.
func runScaleThroughput(ctx context.Context, cfg *ScaleConfig) (tp ScaleThroughput) {
	dir := filepath.Join(cfg.WorkDir, "throughput")
	defer os.RemoveAll(dir)
	fail := func(err error) ScaleThroughput {
		tp.Error = err.Error()
		scaleLogf(cfg, "throughput failed: %v", err)
		return tp
	}
	srcProf, prof := "", ""
	if cfg.ProfileDir != "" {
		srcProf = filepath.Join(cfg.ProfileDir, "source-throughput.pprof")
		prof = filepath.Join(cfg.ProfileDir, "dest-throughput.pprof")
		tp.Profile = prof
	}
	p, err := startPair(ctx, cfg, dir, srcProf, prof)
	defer p.close()
	if err != nil {
		return fail(err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	const recordBytes = 1024
	records := int64(cfg.ThroughputMiB) << 20 / recordBytes
	tp.ValueBytes = records * recordBytes
	value := make([]byte, recordBytes)
	for i := range value {
		value[i] = byte(i*7 + i/13)
	}
	t0 := time.Now()
	for _, parts := range []int{6, 1000} {
		topic := fmt.Sprintf("tp%d", parts)
		if err := createTopics(pctx, p.srcCl, []string{topic}, int32(parts)); err != nil {
			return fail(err)
		}
		var wg sync.WaitGroup
		var firstErr atomic.Value
		for i := range records {
			wg.Add(1)
			p.srcCl.Produce(pctx, &kgo.Record{Topic: topic, Partition: int32(i % int64(parts)), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return fail(fmt.Errorf("bench: produce %s: %w", topic, err))
		}
	}
	tp.ProducedInSeconds = time.Since(t0).Seconds()
	scaleLogf(cfg, "throughput: %d MiB produced into tp6 and tp1000 in %.1fs", cfg.ThroughputMiB, tp.ProducedInSeconds)
	for _, parts := range []int{6, 1000} {
		topic := fmt.Sprintf("tp%d", parts)
		only := map[string]bool{topic: true}
		// Each copy starts with nothing dirty on the machine: otherwise the
		// second one (1,000 partitions) shares the disk with the writeback of
		// what the produce and the first copy wrote.
		tsync := time.Now()
		syscall.Sync()
		scaleLogf(cfg, "throughput: sync before the %d-partition copy took %.1fs", parts, time.Since(tsync).Seconds())
		ts := time.Now()
		if err := startTopics(pctx, p.dst, p.mirror, []string{topic}); err != nil {
			return fail(err)
		}
		var first time.Time
		d, _, err := waitCounts(pctx, p.dst, p.mirror, statemachine.Mirroring, only, 50*time.Millisecond, ts, nil, nil,
			func(c partitionCounts) bool {
				if first.IsZero() && c.withData > 0 {
					first = time.Now()
				}
				return c.total == parts && c.lagZero == parts
			})
		if err != nil {
			return fail(err)
		}
		copySecs := time.Since(first).Seconds()
		mbps := float64(tp.ValueBytes) / 1e6 / copySecs
		if parts == 6 {
			tp.CopySeconds6, tp.MBps6, tp.StartToLagZero6 = copySecs, mbps, d.Seconds()
		} else {
			tp.CopySeconds1000, tp.MBps1000, tp.StartToLagZero1000 = copySecs, mbps, d.Seconds()
		}
		scaleLogf(cfg, "throughput: %d partitions: %.1f MB/s (copy %.2fs, start to lag 0 %.2fs)", parts, mbps, copySecs, d.Seconds())
	}
	return tp
}
