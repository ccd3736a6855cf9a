// Package kmprom exports the measurements of a mirror.Mirror as Prometheus series, in the
// manner of franz-go's plugin/kprom: build one Metrics with New, pass it to mirror.New
// with mirror.WithMetrics, and serve Handler (or gather Registry) for scraping.
//
//	metrics := kmprom.New("kmirror")
//	m, err := mirror.New(cfg, mirror.WithMetrics(metrics))
//	http.Handle("/metrics", metrics.Handler())
//
// The core packages never import this one, so the Prometheus client is a dependency of
// the hosts that want it only. docs/METRICS.md lists every series.
package kmprom

import (
	"hash/maphash"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// DefaultNamespace prefixes every series when New is given "".
const DefaultNamespace = "kmirror"

// Opt configures New.
type Opt func(*config)

type config struct {
	reg     *prometheus.Registry
	buckets []float64
}

// Registry registers the series in reg instead of a new registry of their own.
func Registry(reg *prometheus.Registry) Opt { return func(c *config) { c.reg = reg } }

// Buckets sets the histogram buckets, in seconds (default prometheus.DefBuckets with
// 1 ms and 2.5 ms added in front, for fetch and coordinator latencies).
func Buckets(b []float64) Opt { return func(c *config) { c.buckets = append([]float64(nil), b...) } }

// Metrics implements mirror.Metrics with Prometheus collectors. Safe for concurrent use.
type Metrics struct {
	mirror.NopMetrics // methods added to mirror.Metrics later are ignored until exported here

	reg *prometheus.Registry

	// state exports the actual state of every partition, kept in shards by
	// partition and read at scrape time: a failover changes the state of
	// every partition at once, and a GaugeVec's delete and set of each
	// partition's series (under the vector's one lock) was a convoy of
	// thousands of reconcilers.
	state *stateCollector

	lagOffsets   *prometheus.GaugeVec
	lagSeconds   *lagCollector
	bytes        *prometheus.CounterVec
	records      *prometheus.CounterVec
	fetchLatency *prometheus.HistogramVec
	fetchReqErrs *prometheus.CounterVec
	fetchErrs    *prometheus.CounterVec
	truncations  *prometheus.CounterVec
	gapOffsets   *prometheus.CounterVec
	localLost    *prometheus.CounterVec
	refused      *prometheus.CounterVec
	bumps        *prometheus.CounterVec
	transitions  *prometheus.CounterVec
	stopping     *prometheus.HistogramVec
	coordLatency *prometheus.HistogramVec
	coordErrs    *prometheus.CounterVec
	adminReqs    *prometheus.CounterVec
	adminLatency *prometheus.HistogramVec
	condActive   *prometheus.GaugeVec
	condCycles   *prometheus.CounterVec
	verified     *prometheus.GaugeVec
	mismatches   *prometheus.CounterVec
	discards     *prometheus.CounterVec
	discardBytes *prometheus.CounterVec
	discardOffs  *prometheus.CounterVec
}

var _ mirror.Metrics = (*Metrics)(nil)

// New builds the collectors under namespace (DefaultNamespace when "") and registers
// them. It panics, as prometheus.MustRegister does, when a series of the same name is
// already registered in the Registry passed.
func New(namespace string, opts ...Opt) *Metrics {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	c := config{buckets: append([]float64{0.001, 0.0025}, prometheus.DefBuckets...)}
	for _, o := range opts {
		o(&c)
	}
	if c.reg == nil {
		c.reg = prometheus.NewRegistry()
	}
	part := []string{"mirror", "topic", "partition"}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: c.buckets}, labels)
	}
	m := &Metrics{
		reg: c.reg,
		state: &stateCollector{seed: maphash.MakeSeed(), desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "partition_state"),
			"1 for the actual state of each mirror partition owned by this instance.", append(part, "state"), nil)},
		lagOffsets: gauge("partition_lag_offsets", "Source high watermark minus destination log end offset, after the last fetch response; absent when unknown.", part...),
		lagSeconds: newLagCollector(prometheus.BuildFQName(namespace, "", "partition_lag_seconds"),
			"Age of the oldest source record not yet mirrored, from batch timestamps, computed at scrape time; 0 when caught up; absent when unknown.", part),
		bytes:        counter("mirrored_bytes_total", "Record-batch bytes appended to destination logs.", "mirror", "topic"),
		records:      counter("mirrored_records_total", "Records appended to destination logs (control records included).", "mirror", "topic"),
		fetchLatency: histogram("fetch_latency_seconds", "Fetch round trips to each source broker, long-poll wait included.", "mirror", "broker"),
		fetchReqErrs: counter("fetch_request_errors_total", "Fetch requests to a source broker that failed as a whole.", "mirror", "broker"),
		fetchErrs:    counter("fetch_partition_errors_total", "Partition error codes in Fetch answers of a source broker.", "mirror", "broker", "code"),
		truncations:  counter("truncations_total", "Truncations of destination logs, by cause (divergence, out_of_range: the fetcher; start: an allowed removal by PREPARING).", "mirror", "topic", "cause"),
		localLost:    counter("removed_local_records_total", "Records written on this site that PREPARING removed because their start allowed it (AllowTruncation).", "mirror", "topic"),
		refused:      counter("truncation_refusals_total", "Removals of records written on this site that PREPARING refused because no start approved them (the partition goes FAILED and keeps them; recover with AllowTruncation).", "mirror", "topic"),
		gapOffsets:   counter("gap_offsets_total", "Source offsets that will never be mirrored: the fetch offset was below the source log start.", "mirror", "topic"),
		bumps:        counter("leader_epoch_bumps_total", "Raises of the destination leader epoch, by cause (ahead, state).", "mirror", "topic", "cause"),
		transitions:  counter("state_transitions_total", "Durable actual-state changes of mirror partitions.", "mirror", "from", "to"),
		stopping:     histogram("stopping_duration_seconds", "Time from STOPPING to STOPPED of a partition (failover).", "mirror"),
		coordLatency: histogram("coordinator_write_latency_seconds", "WriteMirrorStates calls of the group commit.", "mirror"),
		coordErrs:    counter("coordinator_write_errors_total", "WriteMirrorStates calls that failed as a whole.", "mirror"),
		adminReqs:    counter("admin_requests_total", "Mirror RPCs served, by API and top-level error code.", "api", "code"),
		adminLatency: histogram("admin_request_latency_seconds", "Mirror RPCs served, by API.", "api"),
		condActive:   gauge("sync_condition_active", "1 while a repeating condition of a mirror's metadata sync holds (acls-security-disabled), else 0.", "mirror", "condition"),
		condCycles:   counter("sync_condition_cycles_total", "Sync cycles in which a repeating condition held.", "mirror", "condition"),
		verified:     gauge("partition_verified_offset", "The fidelity check found every mirrored batch below this offset identical to the source's (batch header and CRC-32C).", part...),
		mismatches:   counter("fidelity_mismatches_total", "Mirrored batches found different from the source's by the fidelity check (the partition goes FAILED).", "mirror", "topic"),
		discards:     counter("log_recovery_discards_total", "Removals of data by the open of a destination log, by kind (torn_tail: past the flush point; repaired: a RepairCorruption cut).", "topic", "kind"),
		discardBytes: counter("log_recovery_discarded_bytes_total", "Bytes those removals took out of destination logs.", "topic", "kind"),
		discardOffs:  counter("log_recovery_discarded_offsets_total", "Offsets those removals took out, where the batch headers tell (a torn tail's are not known).", "topic", "kind"),
	}
	c.reg.MustRegister(m.state, m.lagOffsets, m.lagSeconds, m.bytes, m.records, m.fetchLatency, m.fetchReqErrs,
		m.fetchErrs, m.truncations, m.gapOffsets, m.localLost, m.refused, m.bumps, m.transitions, m.stopping, m.coordLatency, m.coordErrs,
		m.adminReqs, m.adminLatency, m.condActive, m.condCycles, m.verified, m.mismatches, m.discards, m.discardBytes, m.discardOffs)
	return m
}

// Registry returns the registry the series are in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func partLabels(p mirror.PartitionRef) prometheus.Labels {
	return prometheus.Labels{"mirror": p.Mirror, "topic": p.Topic, "partition": strconv.Itoa(int(p.Partition))}
}

// PartitionState implements mirror.Metrics: the partition's partition_state series
// names s from now on.
func (m *Metrics) PartitionState(p mirror.PartitionRef, s statemachine.State) {
	sh := m.state.shard(p)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = map[mirror.PartitionRef]statemachine.State{}
	}
	sh.m[p] = s
	sh.mu.Unlock()
}

// PartitionGone implements mirror.Metrics.
func (m *Metrics) PartitionGone(p mirror.PartitionRef) {
	sh := m.state.shard(p)
	sh.mu.Lock()
	delete(sh.m, p)
	sh.mu.Unlock()
	l := partLabels(p)
	m.lagOffsets.Delete(l)
	m.lagSeconds.delete(p)
	m.verified.Delete(l)
}

// stateShards is the number of shards of stateCollector.
const stateShards = 64

// stateCollector exports partition_state: one series per partition, naming its
// state, built at scrape time from the states reported.
type stateCollector struct {
	desc   *prometheus.Desc
	seed   maphash.Seed
	shards [stateShards]stateShard
}

// stateShard holds the states of some partitions.
type stateShard struct {
	mu sync.Mutex
	m  map[mirror.PartitionRef]statemachine.State
}

// shard returns the shard of p's state.
func (c *stateCollector) shard(p mirror.PartitionRef) *stateShard {
	return &c.shards[maphash.Comparable(c.seed, p)%stateShards]
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. A shard's lock is held while its series
// are built, never while they are sent: a slow scrape holds up no state change.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	var out []prometheus.Metric
	for i := range c.shards {
		sh := &c.shards[i]
		out = out[:0]
		sh.mu.Lock()
		for p, s := range sh.m {
			out = append(out, prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1,
				p.Mirror, p.Topic, strconv.Itoa(int(p.Partition)), s.String()))
		}
		sh.mu.Unlock()
		for _, m := range out {
			ch <- m
		}
	}
}

// StateTransition implements mirror.Metrics.
func (m *Metrics) StateTransition(p mirror.PartitionRef, from, to statemachine.State) {
	m.transitions.WithLabelValues(p.Mirror, from.String(), to.String()).Inc()
}

// Lag implements mirror.Metrics. The seconds series is computed at scrape time from
// the last report (mirror.LagSeconds), so it grows while the mirror stalls.
func (m *Metrics) Lag(p mirror.PartitionRef, offsets int64, mirroredUpTo time.Time) {
	l := partLabels(p)
	if offsets < 0 {
		m.lagOffsets.Delete(l)
		m.lagSeconds.delete(p)
		return
	}
	m.lagOffsets.With(l).Set(float64(offsets))
	m.lagSeconds.set(p, offsets, mirroredUpTo)
}

// lagCollector exports the lag in seconds of every partition, computed when scraped.
type lagCollector struct {
	desc *prometheus.Desc
	now  func() time.Time

	mu    sync.Mutex // guards parts
	parts map[mirror.PartitionRef]lagPoint
}

// lagPoint is the last Lag report of a partition.
type lagPoint struct {
	offsets int64
	upTo    time.Time
}

func newLagCollector(name, help string, labels []string) *lagCollector {
	return &lagCollector{desc: prometheus.NewDesc(name, help, labels, nil), now: time.Now, parts: map[mirror.PartitionRef]lagPoint{}}
}

func (c *lagCollector) set(p mirror.PartitionRef, offsets int64, upTo time.Time) {
	c.mu.Lock()
	c.parts[p] = lagPoint{offsets: offsets, upTo: upTo}
	c.mu.Unlock()
}

func (c *lagCollector) delete(p mirror.PartitionRef) {
	c.mu.Lock()
	delete(c.parts, p)
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, v := range c.parts {
		if s, ok := mirror.LagSeconds(v.offsets, v.upTo, now); ok {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, s, p.Mirror, p.Topic, strconv.Itoa(int(p.Partition)))
		}
	}
}

// Mirrored implements mirror.Metrics.
func (m *Metrics) Mirrored(p mirror.PartitionRef, bytes, records int64) {
	m.bytes.WithLabelValues(p.Mirror, p.Topic).Add(float64(bytes))
	m.records.WithLabelValues(p.Mirror, p.Topic).Add(float64(records))
}

// Fetch implements mirror.Metrics.
func (m *Metrics) Fetch(name string, broker int32, latency time.Duration, err error, codes []int16) {
	b := strconv.Itoa(int(broker))
	m.fetchLatency.WithLabelValues(name, b).Observe(latency.Seconds())
	if err != nil {
		m.fetchReqErrs.WithLabelValues(name, b).Inc()
	}
	for _, c := range codes {
		m.fetchErrs.WithLabelValues(name, b, admin.Code(c).String()).Inc()
	}
}

// Truncation implements mirror.Metrics.
func (m *Metrics) Truncation(p mirror.PartitionRef, cause mirror.TruncationCause, lost int64) {
	m.truncations.WithLabelValues(p.Mirror, p.Topic, string(cause)).Inc()
	if cause == mirror.TruncationStart {
		m.localLost.WithLabelValues(p.Mirror, p.Topic).Add(float64(lost))
		return
	}
	if lost > 0 {
		m.gapOffsets.WithLabelValues(p.Mirror, p.Topic).Add(float64(lost))
	}
}

// LeaderEpochBump implements mirror.Metrics.
func (m *Metrics) LeaderEpochBump(p mirror.PartitionRef, cause mirror.EpochBumpCause, _, _ int32) {
	m.bumps.WithLabelValues(p.Mirror, p.Topic, string(cause)).Inc()
}

// StoppingDuration implements mirror.Metrics.
func (m *Metrics) StoppingDuration(p mirror.PartitionRef, d time.Duration) {
	m.stopping.WithLabelValues(p.Mirror).Observe(d.Seconds())
}

// CoordinatorWrite implements mirror.Metrics.
func (m *Metrics) CoordinatorWrite(name string, _ int, latency time.Duration, err error) {
	m.coordLatency.WithLabelValues(name).Observe(latency.Seconds())
	if err != nil {
		m.coordErrs.WithLabelValues(name).Inc()
	}
}

// SyncCondition implements metasync.ConditionObserver: the condition's gauge, and one
// more cycle while it holds.
func (m *Metrics) SyncCondition(mirrorName, condition string, active bool, _ int64) {
	if !active {
		m.condActive.WithLabelValues(mirrorName, condition).Set(0)
		return
	}
	m.condActive.WithLabelValues(mirrorName, condition).Set(1)
	m.condCycles.WithLabelValues(mirrorName, condition).Inc()
}

// AdminRequest implements mirror.Metrics.
func (m *Metrics) AdminRequest(o admin.RequestObservation) {
	api := o.API
	if api == "" {
		api = strconv.Itoa(int(o.Key))
	}
	m.adminReqs.WithLabelValues(api, o.Code.String()).Inc()
	m.adminLatency.WithLabelValues(api).Observe(o.Latency.Seconds())
}

// FidelityVerified implements mirror.Metrics.
func (m *Metrics) FidelityVerified(p mirror.PartitionRef, upTo int64) {
	m.verified.With(partLabels(p)).Set(float64(upTo))
}

// TruncationRefused implements mirror.Metrics.
func (m *Metrics) TruncationRefused(p mirror.PartitionRef, _ int64) {
	m.refused.WithLabelValues(p.Mirror, p.Topic).Inc()
}

// FidelityMismatch implements mirror.Metrics.
func (m *Metrics) FidelityMismatch(p mirror.PartitionRef, _ int64) {
	m.mismatches.WithLabelValues(p.Mirror, p.Topic).Inc()
}

// LogRecoveryDiscard implements mirror.Metrics.
func (m *Metrics) LogRecoveryDiscard(topic string, _ int32, from, to, bytes int64, repaired bool) {
	kind := "torn_tail"
	if repaired {
		kind = "repaired"
	}
	m.discards.WithLabelValues(topic, kind).Inc()
	m.discardBytes.WithLabelValues(topic, kind).Add(float64(bytes))
	if to > from {
		m.discardOffs.WithLabelValues(topic, kind).Add(float64(to - from))
	}
}
