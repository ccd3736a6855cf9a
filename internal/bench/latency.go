package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// LatencyConfig configures the replication-latency benchmark (RunLatency):
// records are produced to a fresh topic on A at steady rates while one
// contender at a time mirrors them, and the time from the producer's send to
// the record being durable on the destination is measured per record. Zero
// fields take the documented defaults.
type LatencyConfig struct {
	// SourceBrokers and DestBrokers are clusters A and B. Both required (B
	// for MirrorMaker 2).
	SourceBrokers, DestBrokers []string
	// RatesMBps are the steady produce rates, in 10^6 bytes of record values
	// per second (default 10 and 50), run in order.
	RatesMBps []float64
	// RecordBytes is the value size of one record (default 1024, at least 16).
	RecordBytes int
	// Partitions of the topic (default 6); replication factor 1.
	Partitions int32
	// Warmup is produced at each rate before its measurement (default 5 s);
	// Measure is the measured time at each rate (default 20 s).
	Warmup, Measure time.Duration
	// Contenders: a subset of kmirror and mm2 (default both), in run order.
	Contenders []string
	// MM2Classpath, MM2Tasks and MM2HeapOpts as in Config.
	MM2Classpath string
	MM2Tasks     int
	MM2HeapOpts  []string
	// WorkDir holds kmirror's FileLogs and MM2's files (default a temp dir).
	WorkDir string
	// KmirrorNoFsync is a diagnostic: kmirror's FileLogs use FsyncNever, so
	// "durable" becomes "appended" (as MM2's target acknowledges).
	KmirrorNoFsync bool
	// KmirrorAppenders is fetcher.Config.Appenders of the kmirror contender
	// (0: the fetcher's default, GOMAXPROCS).
	KmirrorAppenders int
	// ResultsJSON, Markdown and Chart are the output files; empty skips one.
	ResultsJSON, Markdown, Chart string
	// KafkaVersion and Command are recorded in the report.
	KafkaVersion, Command string
	// Log receives progress lines (default io.Discard).
	Log io.Writer
}

func (c *LatencyConfig) defaults() {
	if len(c.RatesMBps) == 0 {
		c.RatesMBps = []float64{10, 50}
	}
	if c.RecordBytes == 0 {
		c.RecordBytes = 1024
	}
	if c.Partitions == 0 {
		c.Partitions = 6
	}
	if c.Warmup == 0 {
		c.Warmup = 5 * time.Second
	}
	if c.Measure == 0 {
		c.Measure = 20 * time.Second
	}
	if len(c.Contenders) == 0 {
		c.Contenders = []string{ContenderKmirror, ContenderMM2}
	}
	if c.MM2Tasks == 0 {
		c.MM2Tasks = 3
	}
	if len(c.MM2HeapOpts) == 0 {
		c.MM2HeapOpts = []string{"-Xms256m", "-Xmx2g"}
	}
	if c.KafkaVersion == "" {
		c.KafkaVersion = "unknown"
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Validate checks the configuration (after the defaults).
func (c LatencyConfig) Validate() error {
	switch {
	case len(c.SourceBrokers) == 0:
		return fmt.Errorf("%w: no source brokers", ErrConfig)
	case c.RecordBytes < latencyHeader+7:
		return fmt.Errorf("%w: RecordBytes %d < %d", ErrConfig, c.RecordBytes, latencyHeader+7)
	case c.Partitions < 1 || c.Warmup < 0 || c.Measure <= 0 || c.MM2Tasks < 0 || c.KmirrorAppenders < 0:
		return fmt.Errorf("%w: partitions, warmup or measure out of range", ErrConfig)
	}
	for _, r := range c.RatesMBps {
		if r <= 0 {
			return fmt.Errorf("%w: rate %.1f MB/s", ErrConfig, r)
		}
	}
	for _, name := range c.Contenders {
		switch {
		case name != ContenderKmirror && name != ContenderMM2:
			return fmt.Errorf("%w: contender %q has no latency mode (kmirror, mm2)", ErrConfig, name)
		case name == ContenderMM2 && (len(c.DestBrokers) == 0 || c.MM2Classpath == ""):
			return fmt.Errorf("%w: mm2 needs destination brokers and MM2Classpath", ErrConfig)
		}
	}
	return nil
}

// LatencyResult is one contender at one rate.
type LatencyResult struct {
	Contender string  `json:"contender"`
	RateMBps  float64 `json:"rate_mb_per_s"`
	// AchievedMBps is what the producer reached in the measured window.
	AchievedMBps float64 `json:"achieved_mb_per_s"`
	// Sent records in the measured window; Seen of them reached the
	// destination before the drain timeout.
	Sent int64 `json:"sent"`
	Seen int64 `json:"seen"`
	// ProduceErrors are sends the source refused in the window (not in Sent).
	ProduceErrors int64 `json:"produce_errors,omitempty"`
	// End-to-end latency (producer send to destination durable), ms.
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	// From the source's acknowledgement (as the producer received it) to
	// destination durable, ms; a record durable on the destination before
	// its producer saw the acknowledgement counts 0.
	FromAckP50Ms float64 `json:"from_ack_p50_ms"`
	FromAckP99Ms float64 `json:"from_ack_p99_ms"`
	// Producer send-to-acknowledgement latency in the same window, ms: the
	// part of the end-to-end figures spent before the source acknowledged.
	AckP50Ms float64 `json:"ack_p50_ms"`
	AckP99Ms float64 `json:"ack_p99_ms"`
	Error    string  `json:"error,omitempty"`
}

// LatencyReport is everything one latency run measured.
type LatencyReport struct {
	Started       time.Time `json:"started"`
	Command       string    `json:"command"`
	KafkaVersion  string    `json:"kafka_version"`
	SourceBrokers []string  `json:"source_brokers"`
	DestBrokers   []string  `json:"dest_brokers"`
	Machine       Machine   `json:"machine"`
	Partitions    int32     `json:"partitions"`
	RecordBytes   int       `json:"record_bytes"`
	WarmupSeconds float64   `json:"warmup_seconds"`
	MeasureSecs   float64   `json:"measure_seconds"`
	MM2Tasks      int       `json:"mm2_tasks"`
	// KmirrorNoFsync: a diagnostic run whose kmirror FileLogs never fsync.
	KmirrorNoFsync bool `json:"kmirror_no_fsync,omitempty"`
	// KmirrorAppenders is the kmirror contender's Appenders (0: default).
	KmirrorAppenders int             `json:"kmirror_appenders,omitempty"`
	LoadBefore       float64         `json:"load_before"`
	LoadAfter        float64         `json:"load_after"`
	Results          []LatencyResult `json:"results"`
	Goals            []Goal          `json:"goals"`
}

// latencyHeader is the prefix of every record value: the send time (Unix
// nanoseconds, big endian) and the phase (0 warm-up, i+1 the i-th rate).
const latencyHeader = 9

// drainTimeout bounds the wait for the last measured records.
const drainTimeout = 60 * time.Second

// recorder collects the latency of every record a destination reports.
type recorder struct {
	mu      sync.Mutex
	samples map[byte][]sample
	first   chan struct{} // closed at the first record seen
	once    sync.Once
}

func newRecorder() *recorder {
	return &recorder{samples: map[byte][]sample{}, first: make(chan struct{})}
}

// observe records value, seen durable on the destination at at.
func (r *recorder) observe(value []byte, at time.Time) {
	if len(value) < latencyHeader {
		return
	}
	sent := int64(binary.BigEndian.Uint64(value))
	r.mu.Lock()
	r.samples[value[8]] = append(r.samples[value[8]], sample{sent: sent, at: at.UnixNano()})
	r.mu.Unlock()
	r.once.Do(func() { close(r.first) })
}

// seen is the number of records of phase seen so far.
func (r *recorder) seen(phase byte) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.samples[phase]))
}

// sample is one record: its send time and when it was durable on the
// destination (Unix nanoseconds).
type sample struct{ sent, at int64 }

// take returns the latencies of phase: from the send, and from the source's
// acknowledgement (acks maps send times to acknowledgement times; a missing
// one is left out).
func (r *recorder) take(phase byte, acks map[int64]int64) (fromSend, fromAck []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples[phase] {
		fromSend = append(fromSend, time.Duration(s.at-s.sent))
		if a, ok := acks[s.sent]; ok {
			fromAck = append(fromAck, time.Duration(max(s.at-a, 0)))
		}
	}
	return fromSend, fromAck
}

// contender is a running mirror whose destination reports to a recorder.
type contender interface {
	// Close stops the contender and returns its first failure, if any.
	Close() error
	// Err returns a failure that ends the measurement early, or nil.
	Err() error
}

// RunLatency runs the latency benchmark: for every contender a fresh topic
// on A, the contender started on it, then for every rate a warm-up and a
// measured window of steady production, and a drain until every measured
// record is durable on the destination (or drainTimeout). A contender that
// fails is reported in its results' Error and the run goes on.
func RunLatency(ctx context.Context, cfg LatencyConfig) (*LatencyReport, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "kmirror-latency-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.WorkDir = dir
	}
	rep := &LatencyReport{Started: time.Now().UTC(), Command: cfg.Command, KafkaVersion: cfg.KafkaVersion,
		SourceBrokers: cfg.SourceBrokers, DestBrokers: cfg.DestBrokers, Machine: machineInfo(),
		Partitions: cfg.Partitions, RecordBytes: cfg.RecordBytes, WarmupSeconds: cfg.Warmup.Seconds(),
		MeasureSecs: cfg.Measure.Seconds(), MM2Tasks: cfg.MM2Tasks, KmirrorNoFsync: cfg.KmirrorNoFsync,
		KmirrorAppenders: cfg.KmirrorAppenders, LoadBefore: loadAvg()}
	for _, name := range cfg.Contenders {
		rep.Results = append(rep.Results, runLatencyContender(ctx, &cfg, name)...)
	}
	rep.LoadAfter = loadAvg()
	rep.Goals = latencyGoals(rep.Results)
	return rep, writeLatencyOutputs(&cfg, rep)
}

// runLatencyContender measures one contender at every rate on its own topic.
func runLatencyContender(ctx context.Context, cfg *LatencyConfig, name string) []LatencyResult {
	topic := fmt.Sprintf("kmirror-latency-%s-%d", name, time.Now().Unix())
	fail := func(err error) []LatencyResult {
		latencyLogf(cfg, "%s: %v", name, err)
		out := make([]LatencyResult, len(cfg.RatesMBps))
		for i, r := range cfg.RatesMBps {
			out[i] = LatencyResult{Contender: name, RateMBps: r, Error: err.Error()}
		}
		return out
	}
	src, err := newClient(cfg.SourceBrokers)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	if err := createTopic(ctx, src, topic, cfg.Partitions, 1); err != nil {
		return fail(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = deleteTopics(cctx, src, topic)
		if name == ContenderMM2 && len(cfg.DestBrokers) > 0 {
			if dst, err := newClient(cfg.DestBrokers); err == nil {
				_ = deleteTopics(cctx, dst, mm2SourceAlias+"."+topic)
				dst.Close()
			}
		}
	}()
	rec := newRecorder()
	var c contender
	switch name {
	case ContenderKmirror:
		c, err = startKmirrorLatency(ctx, cfg, topic, rec)
	default:
		c, err = startMM2Latency(ctx, cfg, topic, rec)
	}
	if err != nil {
		return fail(err)
	}
	results, err := measureRates(ctx, cfg, name, topic, rec, c)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil && len(results) == 0 {
		return fail(err)
	}
	return results
}

func latencyLogf(cfg *LatencyConfig, format string, args ...any) {
	fmt.Fprintf(cfg.Log, "bench: "+format+"\n", args...)
}

// measureRates waits for the contender's first record, then runs every rate.
func measureRates(ctx context.Context, cfg *LatencyConfig, name, topic string, rec *recorder, c contender) ([]LatencyResult, error) {
	p, err := newRateProducer(cfg, topic)
	if err != nil {
		return nil, err
	}
	defer p.close()
	// Until the contender mirrors its first record (MM2 takes seconds to
	// start), trickle warm-up records at a tenth of the first rate, then let
	// it catch up with them, so that no start-up backlog is measured.
	st := p.run(ctx, rec.first, cfg.RatesMBps[0]/10, 3*time.Minute, 0)
	if rec.seen(0) == 0 {
		return nil, fmt.Errorf("bench: %s mirrored no record within 3 minutes: %w", name, errors.Join(c.Err(), ctx.Err()))
	}
	if err := drain(ctx, rec, 0, st.sent, c); err != nil {
		return nil, err
	}
	latencyLogf(cfg, "%s: mirroring, caught up", name)
	var out []LatencyResult
	for i, rate := range cfg.RatesMBps {
		phase := byte(i + 1)
		p.run(ctx, nil, rate, cfg.Warmup, 0)
		st := p.run(ctx, nil, rate, cfg.Measure, phase)
		r := LatencyResult{Contender: name, RateMBps: rate, Sent: st.sent, ProduceErrors: st.errs,
			AchievedMBps: float64(st.sent) * float64(cfg.RecordBytes) / 1e6 / st.elapsed.Seconds()}
		r.AckP50Ms, r.AckP99Ms = quantileMs(st.acks, 0.50), quantileMs(st.acks, 0.99)
		if err := drain(ctx, rec, phase, st.sent, c); err != nil {
			r.Error = err.Error()
		}
		lat, fromAck := rec.take(phase, st.ackAt)
		r.FromAckP50Ms, r.FromAckP99Ms = quantileMs(fromAck, 0.50), quantileMs(fromAck, 0.99)
		r.Seen = int64(len(lat))
		r.P50Ms, r.P99Ms, r.P999Ms = quantileMs(lat, 0.50), quantileMs(lat, 0.99), quantileMs(lat, 0.999)
		r.MaxMs = quantileMs(lat, 1)
		latencyLogf(cfg, "%s at %.0f MB/s: achieved %.1f MB/s, %d/%d records, p50 %.1f ms, p99 %.1f ms, max %.1f ms; from ack p50 %.1f ms, p99 %.1f ms (ack p99 %.1f ms)",
			name, rate, r.AchievedMBps, r.Seen, r.Sent, r.P50Ms, r.P99Ms, r.MaxMs, r.FromAckP50Ms, r.FromAckP99Ms, r.AckP99Ms)
		out = append(out, r)
	}
	return out, nil
}

// drain waits until want records of phase were seen, the contender fails, or
// drainTimeout passes (polling: the recorder has no notification).
func drain(ctx context.Context, rec *recorder, phase byte, want int64, c contender) error {
	deadline := time.Now().Add(drainTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for rec.seen(phase) < want {
		if err := c.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d of %d measured records reached the destination within %v", ErrIncomplete, rec.seen(phase), want, drainTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// quantileMs is the q-quantile of ds in milliseconds (nearest rank), 0 when
// empty; it sorts ds.
func quantileMs(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(q*float64(len(ds))+0.5) - 1
	i = min(max(i, 0), len(ds)-1)
	return float64(ds[i]) / float64(time.Millisecond)
}

// rateProducer produces to the topic at a steady rate.
type rateProducer struct {
	cl        *kgo.Client
	templates [][]byte
	recBytes  int
	mu        sync.Mutex
	acks      []time.Duration // of the phase being measured
	ackAt     map[int64]int64 // send time to acknowledgement time, same phase
	ok, errs  int64           // records acknowledged and failed in this run
}

func newRateProducer(cfg *LatencyConfig, topic string) (*rateProducer, error) {
	cl, err := newClient(cfg.SourceBrokers, kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.MaxBufferedRecords(1<<16))
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(3, 4))
	p := &rateProducer{cl: cl, recBytes: cfg.RecordBytes}
	for range 256 {
		v := make([]byte, cfg.RecordBytes)
		fillValue(rng, v)
		p.templates = append(p.templates, v)
	}
	return p, nil
}

func (p *rateProducer) close() { p.cl.Close() }

// phaseStats is what one run of the producer did.
type phaseStats struct {
	// sent counts the records the source acknowledged (failed sends are
	// counted in the producer's errs and never reach a destination).
	sent    int64
	errs    int64
	elapsed time.Duration
	acks    []time.Duration
	ackAt   map[int64]int64
}

// run produces at rate MB/s for d (or until ctx ends or until closes),
// tagging the records with phase, then waits for their acknowledgements.
func (p *rateProducer) run(ctx context.Context, until <-chan struct{}, rate float64, d time.Duration, phase byte) phaseStats {
	perSec := rate * 1e6 / float64(p.recBytes)
	start := time.Now()
	tick := time.NewTicker(time.Millisecond) // pacing, not a wait for a condition
	defer tick.Stop()
	var sent int64
	p.mu.Lock()
	p.acks, p.ackAt, p.ok, p.errs = nil, map[int64]int64{}, 0, 0
	p.mu.Unlock()
	for el := time.Duration(0); el < d; el = time.Since(start) {
		for due := int64(perSec * el.Seconds()); sent < due; sent++ {
			v := append([]byte(nil), p.templates[sent&255]...)
			binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
			v[8] = phase
			p.cl.Produce(ctx, &kgo.Record{Value: v}, p.promise)
		}
		select {
		case <-ctx.Done():
			return phaseStats{elapsed: time.Since(start)}
		case <-until:
			d = 0
		case <-tick.C:
		}
	}
	elapsed := time.Since(start)
	_ = p.cl.Flush(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	return phaseStats{sent: p.ok, errs: p.errs, elapsed: elapsed, acks: p.acks, ackAt: p.ackAt}
}

func (p *rateProducer) promise(r *kgo.Record, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.errs++
		return
	}
	p.ok++
	if r.Value[8] != 0 {
		now, sent := time.Now().UnixNano(), int64(binary.BigEndian.Uint64(r.Value))
		p.acks = append(p.acks, time.Duration(now-sent))
		p.ackAt[sent] = now
	}
}

// latencyGoals: kmirror's p99 at most a tenth of MirrorMaker 2's at every
// rate, from the source's acknowledgement (the definition) and from
// the producer's send.
func latencyGoals(results []LatencyResult) []Goal {
	var goals []Goal
	for _, k := range results {
		if k.Contender != ContenderKmirror || k.Error != "" {
			continue
		}
		for _, m := range results {
			if m.Contender != ContenderMM2 || m.RateMBps != k.RateMBps || m.Error != "" {
				continue
			}
			for _, g := range []struct {
				what   string
				kv, mv float64
			}{{"from ack", k.FromAckP99Ms, m.FromAckP99Ms}, {"from send", k.P99Ms, m.P99Ms}} {
				if g.mv <= 0 {
					continue
				}
				ratio := g.kv / g.mv
				goals = append(goals, Goal{Name: fmt.Sprintf("kmirror p99 / MM2 p99 (%s) at %.0f MB/s", g.what, k.RateMBps),
					Target: "<= 0.10", Value: ratio, Reached: ratio <= 0.10})
			}
		}
	}
	return goals
}

// latencyLabel names a result in the chart.
func latencyLabel(r LatencyResult) string {
	return strings.ToUpper(fmt.Sprintf("%s %.0f", r.Contender, r.RateMBps))
}
