package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/internal/bench"
)

func main() {
	bench.MaybeChild()
	os.Exit(run())
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run() (code int) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./internal/bench/cmd/bench [flags]\n\n"+
			"Copies one lz4 topic from cluster A with each contender in turn (raw fetch ceiling, kmirror,\n"+
			"sarama copier, MirrorMaker 2) and reports MB/s, CPU s/GB and peak RSS of each.\n"+
			"Start the clusters first: bash scripts/kafka/kafka.sh start && source /tmp/kmirror-kafka/env\n\nflags:\n")
		fs.PrintDefaults()
	}
	a := fs.String("a", os.Getenv("KMIRROR_KAFKA_A"), "source cluster A seed brokers, comma-separated (default $KMIRROR_KAFKA_A)")
	b := fs.String("b", os.Getenv("KMIRROR_KAFKA_B"), "destination cluster B seed brokers (default $KMIRROR_KAFKA_B)")
	mb := fs.Int64("mb", 512, "MiB of record values to produce (lz4 halves them on disk)")
	recordBytes := fs.Int("record-bytes", 1024, "bytes per record value")
	partitions := fs.Int("partitions", 6, "partitions of the benchmark topic")
	rf := fs.Int("rf", 1, "replication factor of the benchmark topics")
	contenders := fs.String("contenders", strings.Join(bench.AllContenders, ","), "contenders to run, in order")
	mm2Script := fs.String("mm2-script", "scripts/bench/mm2.sh", "script that resolves MirrorMaker 2's classpath")
	repeat := fs.Int("repeat", 3, "rounds of each Go contender (interleaved); the median is reported. MM2 runs once")
	mm2Tasks := fs.Int("mm2-tasks", 3, "MirrorMaker 2 tasks.max")
	kafkaVersion := fs.String("kafka-version", os.Getenv("KMIRROR_KAFKA_VERSION"), "Kafka version to record (default $KMIRROR_KAFKA_VERSION)")
	outJSON := fs.String("json", "docs/bench/results.json", "results JSON file (empty: none)")
	md := fs.String("md", "docs/BENCHMARKS.md", "markdown file whose generated section is replaced (empty: none)")
	chart := fs.String("chart", "docs/bench/throughput.png", "PNG bar chart (empty: none)")
	workDir := fs.String("workdir", "", "directory for kmirror's FileLogs and MM2's files (default: a temp dir, removed)")
	timeout := fs.Duration("timeout", 30*time.Minute, "time limit of each contender")
	profile := fs.String("cpuprofile-dir", "", "write a CPU profile of every Go contender round into this directory")
	keep := fs.Bool("keep-topics", false, "keep the benchmark topics after the run")
	noFsync := fs.Bool("kmirror-no-fsync", false, "diagnostic: kmirror's FileLogs use FsyncNever instead of FsyncOnFlush")
	render := fs.String("render", "", "do not run: regenerate -md and -chart from this results JSON")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	latency := fs.Bool("latency", false, "run the replication-latency benchmark (kmirror and mm2 at steady rates) instead")
	rates := fs.String("rates", "10,50", "latency: produce rates in MB/s, comma-separated")
	warmup := fs.Duration("warmup", 5*time.Second, "latency: warm-up at each rate")
	measure := fs.Duration("measure", 20*time.Second, "latency: measured time at each rate")
	latJSON := fs.String("latency-json", "docs/bench/latency.json", "latency: results JSON file (empty: none)")
	latChart := fs.String("latency-chart", "docs/bench/latency.png", "latency: PNG chart (empty: none)")
	appenders := fs.Int("kmirror-appenders", 0, "latency: fetcher Appenders of kmirror (0: GOMAXPROCS)")
	scale := fs.Bool("scale", false, "run the scale benchmark (a kmirrord site mirroring many partitions from another) instead")
	scaleParts := fs.String("scale-partitions", "1000,10000,50000,100000", "scale: partition counts measured, comma-separated")
	scaleFlapAt := fs.String("scale-flap-partitions", "50000", "scale: partition counts whose run also freezes the source for -scale-flap-freeze (a link flap), comma-separated (empty: none)")
	scaleFlapFreeze := fs.Duration("scale-flap-freeze", time.Minute, "scale: how long the link flap freezes the source (SIGSTOP)")
	scaleTopicParts := fs.Int("scale-topic-partitions", 500, "scale: partitions per source topic")
	scaleMiB := fs.Int("scale-throughput-mb", 2048, "scale: MiB of values copied through 6 and through 1,000 partitions (negative: skip)")
	scaleIdle := fs.Duration("scale-idle", 20*time.Second, "scale: window of the idle CPU measurement")
	scaleJSON := fs.String("scale-json", "docs/bench/scale.json", "scale: results JSON file (empty: none)")
	scaleChart := fs.String("scale-chart", "docs/bench/scale.png", "scale: PNG chart (empty: none)")
	scaleBin := fs.String("kmirrord", "", "scale: kmirrord binary (default: go build ./examples/kmirrord into the work dir)")
	scalePhase := fs.Duration("scale-phase-timeout", 15*time.Minute, "scale: time limit of each measured phase")
	scaleActive := fs.Int("scale-active-reconcilers", 0, "scale: the destination kmirrord's -active-reconcilers (0: its default)")
	scaleDest := fs.String("scale-destination", "", "scale: how the destination stores partitions, recorded in the report")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	// Every run or render that succeeds renews the summary that opens the document,
	// from the results files of both benchmarks.
	defer func() {
		if code == 0 && *md != "" {
			if err := bench.WriteSummary(*md, *outJSON, *latJSON); err != nil {
				fmt.Fprintln(os.Stderr, "bench: summary:", err)
				code = 1
			}
		}
	}()
	cfg := bench.Config{
		SourceBrokers: splitList(*a), DestBrokers: splitList(*b),
		DataBytes: *mb << 20, RecordBytes: *recordBytes, Partitions: int32(*partitions), ReplicationFactor: int16(*rf),
		Contenders: splitList(*contenders), MM2Tasks: *mm2Tasks, Repeat: *repeat, KafkaVersion: *kafkaVersion,
		ResultsJSON: *outJSON, Markdown: *md, Chart: *chart, WorkDir: *workDir, Timeout: *timeout, KeepTopics: *keep, ProfileDir: *profile, KmirrorNoFsync: *noFsync,
		Command: strings.TrimSpace("go run ./internal/bench/cmd/bench " + strings.Join(os.Args[1:], " ")),
		Log:     os.Stderr,
	}
	if *quiet {
		cfg.Log = nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *scale {
		parts, ok := positiveCounts("-scale-partitions", *scaleParts)
		flapAt, ok2 := positiveCounts("-scale-flap-partitions", *scaleFlapAt)
		if !ok || !ok2 {
			return 2
		}
		sc := bench.ScaleConfig{Kmirrord: *scaleBin, Partitions: parts, TopicPartitions: *scaleTopicParts, ThroughputMiB: *scaleMiB,
			IdleWindow: *scaleIdle, PhaseTimeout: *scalePhase, ActiveReconcilers: *scaleActive, FlapAt: flapAt, FlapFreeze: *scaleFlapFreeze, WorkDir: *workDir, ProfileDir: *profile, Destination: *scaleDest,
			ResultsJSON: *scaleJSON, Markdown: *md, Chart: *scaleChart, Command: cfg.Command, Log: cfg.Log}
		return runScale(ctx, sc, *render)
	}
	if *latency {
		lc := bench.LatencyConfig{SourceBrokers: cfg.SourceBrokers, DestBrokers: cfg.DestBrokers,
			RecordBytes: *recordBytes, Partitions: int32(*partitions), Warmup: *warmup, Measure: *measure,
			MM2Tasks: *mm2Tasks, WorkDir: *workDir, ResultsJSON: *latJSON, Markdown: *md, Chart: *latChart,
			KafkaVersion: *kafkaVersion, Command: cfg.Command, Log: cfg.Log, KmirrorNoFsync: *noFsync, KmirrorAppenders: *appenders}
		return runLatency(ctx, lc, *rates, *contenders, *render, *mm2Script)
	}
	if *render != "" {
		data, err := os.ReadFile(*render)
		if err == nil {
			var rep bench.Report
			if err = json.Unmarshal(data, &rep); err == nil {
				err = bench.Render(cfg, &rep)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: render:", err)
			return 1
		}
		return 0
	}
	for _, c := range cfg.Contenders {
		if c == bench.ContenderMM2 {
			cp, err := bench.MM2Classpath(ctx, *mm2Script, os.Stderr)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			cfg.MM2Classpath = cp
		}
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(bench.MarkdownSection(rep))
	for _, r := range rep.Results {
		if r.Error != "" {
			return 1
		}
	}
	return 0
}

// runLatency runs (or, with render, re-renders) the latency benchmark.
func runLatency(ctx context.Context, lc bench.LatencyConfig, rates, contenders, render, mm2Script string) int {
	if render != "" {
		data, err := os.ReadFile(render)
		if err == nil {
			var rep bench.LatencyReport
			if err = json.Unmarshal(data, &rep); err == nil {
				err = bench.RenderLatency(lc, &rep)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: render:", err)
			return 1
		}
		return 0
	}
	for _, r := range splitList(rates) {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -rates: %v\n", err)
			return 2
		}
		lc.RatesMBps = append(lc.RatesMBps, v)
	}
	for _, c := range splitList(contenders) {
		if c == bench.ContenderKmirror || c == bench.ContenderMM2 {
			lc.Contenders = append(lc.Contenders, c)
		}
	}
	for _, c := range lc.Contenders {
		if c == bench.ContenderMM2 {
			cp, err := bench.MM2Classpath(ctx, mm2Script, os.Stderr)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			lc.MM2Classpath = cp
		}
	}
	rep, err := bench.RunLatency(ctx, lc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(bench.LatencyMarkdownSection(rep))
	for _, r := range rep.Results {
		if r.Error != "" {
			return 1
		}
	}
	return 0
}

// positiveCounts parses a comma-separated list of positive counts (flag
// name for the error printed); empty is an empty, non-nil list.
func positiveCounts(name, list string) ([]int, bool) {
	out := []int{}
	for _, f := range splitList(list) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: %s: %q is not a positive count\n", name, f)
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// runScale runs (or, with render, re-renders) the scale benchmark.
func runScale(ctx context.Context, sc bench.ScaleConfig, render string) int {
	if render != "" {
		data, err := os.ReadFile(render)
		if err == nil {
			var rep bench.ScaleReport
			if err = json.Unmarshal(data, &rep); err == nil {
				err = bench.RenderScale(sc, &rep)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: render:", err)
			return 1
		}
		return 0
	}
	rep, err := bench.RunScale(ctx, sc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(bench.ScaleMarkdownSection(rep))
	for _, r := range rep.Runs {
		if r.Error != "" {
			return 1
		}
	}
	return 0
}
