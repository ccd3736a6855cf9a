package mirrorsim

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// notifier wakes condition waits: its channel is closed and replaced on every change.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

// changed returns a channel closed at the next notify.
func (n *notifier) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

// watchedLog is a fetcher.Log that notifies after every mutation, so the simulation
// can wait for log conditions without polling.
type watchedLog struct {
	fetcher.Log
	n *notifier
}

func (w *watchedLog) Append(b []byte) error {
	defer w.n.notify()
	return w.Log.Append(b)
}

func (w *watchedLog) AppendAsLeader(b []byte) (int64, error) {
	defer w.n.notify()
	return w.Log.AppendAsLeader(b)
}

func (w *watchedLog) Truncate(off int64) error {
	defer w.n.notify()
	return w.Log.Truncate(off)
}

func (w *watchedLog) TruncateFullyAndStartAt(off int64) error {
	defer w.n.notify()
	return w.Log.TruncateFullyAndStartAt(off)
}

func (w *watchedLog) BumpLeaderEpoch(min int32) (int32, error) {
	defer w.n.notify()
	return w.Log.BumpLeaderEpoch(min)
}

// Close is a no-op: the simulation owns the logs for the whole run (a site's
// destination outlives its Mirror across crashes).
func (w *watchedLog) Close() error { return nil }

// crash simulates a process crash of the log when the implementation supports it.
func (w *watchedLog) crash() bool {
	c, ok := w.Log.(interface{ Crash() })
	if ok {
		c.Crash()
		w.n.notify()
	}
	return ok
}

// gatedLog is the view of a source log that one destination site fetches from: its
// high watermark and last stable offset are capped at the gate, so the simulation
// decides how far mirroring may progress.
type gatedLog struct {
	fetcher.Log
	gate func() int64
}

func (g *gatedLog) HighWatermark() int64 { return min(g.Log.HighWatermark(), g.gate()) }

func (g *gatedLog) LastStableOffset() int64 { return min(g.Log.LastStableOffset(), g.gate()) }

// dest is the mirror.Destination of one site: topics in memory, partition logs made
// by the LogFactory and wrapped in watchedLogs. It survives the site's Mirror
// restarts (it is the host's storage).
type dest struct {
	site, clusterID string
	factory         LogFactory
	n               *notifier

	mu     sync.Mutex
	topics map[string]mirror.TopicSpec
	logs   map[mirror.TopicPartition]*watchedLog
	ro     map[mirror.TopicPartition]bool
	clears map[mirror.TopicPartition]int // SetReadOnly(false) calls
}

var _ mirror.Destination = (*dest)(nil)

func newDest(site, clusterID string, f LogFactory, n *notifier) *dest {
	return &dest{site: site, clusterID: clusterID, factory: f, n: n,
		topics: map[string]mirror.TopicSpec{}, logs: map[mirror.TopicPartition]*watchedLog{},
		ro: map[mirror.TopicPartition]bool{}, clears: map[mirror.TopicPartition]int{}}
}

func (d *dest) ClusterID() string { return d.clusterID }

func (d *dest) CreateTopic(ctx context.Context, spec mirror.TopicSpec) error {
	if spec.Name == "" || spec.Partitions <= 0 {
		return admin.Errorf(admin.CodeInvalidRequest, "invalid topic %q with %d partitions", spec.Name, spec.Partitions)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.topics[spec.Name]; ok {
		if t.TopicID != spec.TopicID {
			return admin.Errorf(admin.CodeTopicAlreadyExists, "topic %q exists with another id", spec.Name)
		}
		return nil
	}
	for name, t := range d.topics {
		if t.TopicID == spec.TopicID {
			return admin.Errorf(admin.CodeTopicAlreadyExists, "topic id %s is used by %q", spec.TopicID, name)
		}
	}
	spec.Configs = maps.Clone(spec.Configs)
	d.topics[spec.Name] = spec
	return nil
}

func (d *dest) CreatePartitions(ctx context.Context, topic string, count int32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.topics[topic]
	if !ok {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown topic %q", topic)
	}
	if count < t.Partitions {
		return admin.Errorf(admin.CodeInvalidRequest, "cannot shrink %q", topic)
	}
	t.Partitions = count
	d.topics[topic] = t
	return nil
}

func (d *dest) AlterTopicConfigs(ctx context.Context, topic string, configs map[string]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.topics[topic]
	if !ok {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown topic %q", topic)
	}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	maps.Copy(t.Configs, configs)
	d.topics[topic] = t
	return nil
}

func (d *dest) Topic(name string) (mirror.TopicSpec, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.topics[name]
	t.Configs = maps.Clone(t.Configs)
	return t, ok
}

func (d *dest) Topics() []mirror.TopicSpec {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]mirror.TopicSpec, 0, len(d.topics))
	for _, t := range d.topics {
		t.Configs = maps.Clone(t.Configs)
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Log returns the partition's log, making it on first use with the factory. A new log
// whose leader epoch is undefined gets epoch 0, as a freshly created Kafka partition.
func (d *dest) Log(topic string, partition int32) (fetcher.Log, error) {
	return d.log(topic, partition)
}

func (d *dest) log(topic string, partition int32) (*watchedLog, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.topics[topic]
	if !ok || partition < 0 || partition >= t.Partitions {
		return nil, admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown partition %s-%d", topic, partition)
	}
	tp := mirror.TopicPartition{Topic: topic, Partition: partition}
	if l, ok := d.logs[tp]; ok {
		return l, nil
	}
	inner := d.factory(d.site, topic, partition)
	if inner == nil {
		return nil, fmt.Errorf("mirrorsim: log factory returned nil for %s %s-%d", d.site, topic, partition)
	}
	if inner.LeaderEpoch() < 0 {
		if _, err := inner.BumpLeaderEpoch(-1); err != nil {
			return nil, fmt.Errorf("mirrorsim: initial leader epoch of %s %s-%d: %w", d.site, topic, partition, err)
		}
	}
	inner.SetReadOnly(d.ro[tp])
	l := &watchedLog{Log: inner, n: d.n}
	d.logs[tp] = l
	return l, nil
}

// Produce is a client write: mirror.ProduceToLog on the partition's log.
func (d *dest) Produce(ctx context.Context, topic string, partition int32, batch []byte) (int64, error) {
	l, err := d.log(topic, partition)
	if err != nil {
		return -1, err
	}
	return mirror.ProduceToLog(ctx, l, topic, partition, batch)
}

func (d *dest) SetReadOnly(topic string, partition int32, readOnly bool) error {
	d.mu.Lock()
	tp := mirror.TopicPartition{Topic: topic, Partition: partition}
	d.ro[tp] = readOnly
	if !readOnly {
		d.clears[tp]++
	}
	if l, ok := d.logs[tp]; ok {
		l.SetReadOnly(readOnly)
	}
	d.mu.Unlock()
	d.n.notify()
	return nil
}

func (d *dest) ReadOnly(topic string, partition int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ro[mirror.TopicPartition{Topic: topic, Partition: partition}]
}

// Close does nothing: the simulation owns the destination for the whole run.
func (d *dest) Close() error { return nil }

// crashLogs crashes every log that supports it.
func (d *dest) crashLogs() {
	d.mu.Lock()
	logs := make([]*watchedLog, 0, len(d.logs))
	for _, l := range d.logs {
		logs = append(logs, l)
	}
	d.mu.Unlock()
	for _, l := range logs {
		l.crash()
	}
}

// closeLogs closes the underlying logs at the end of a run.
func (d *dest) closeLogs() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.logs {
		_ = l.Log.Close()
	}
}

// clearCount returns how many times the read-only flag of a partition was cleared.
func (d *dest) clearCount(topic string, partition int32) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.clears[mirror.TopicPartition{Topic: topic, Partition: partition}]
}
