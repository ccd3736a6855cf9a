package mirrorsim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// dest is the mirror.Destination of one site: topics in memory, partition logs made
// by the LogFactory and wrapped in watchedLogs. It survives the site's Mirror
// restarts (it is the host's storage).
type dest struct {
	site, clusterID string
	seed            uint64
	factory         LogFactory
	n               *notifier

	// wmu orders client writes (Produce) with read-only changes: a write that passed
	// the read-only check lands before SetReadOnly(true) returns.
	wmu sync.Mutex

	mu     sync.Mutex
	topics map[string]mirror.TopicSpec
	logs   map[mirror.TopicPartition]*watchedLog
	ro     map[mirror.TopicPartition]bool
	clears map[mirror.TopicPartition]int // SetReadOnly(false) calls
}

var _ mirror.Destination = (*dest)(nil)

func newDest(seed uint64, site, clusterID string, f LogFactory, n *notifier) *dest {
	return &dest{site: site, clusterID: clusterID, seed: seed, factory: f, n: n,
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
	spec := LogSpec{Seed: d.seed, Site: d.site, Topic: topic, Partition: partition}
	inner, err := d.factory(spec)
	if err == nil && inner == nil {
		err = errors.New("mirrorsim: log factory returned nil")
	}
	if err != nil {
		return nil, fmt.Errorf("mirrorsim: make log %s %s-%d: %w", d.site, topic, partition, err)
	}
	if inner.LeaderEpoch() < 0 {
		if _, err := inner.BumpLeaderEpoch(-1); err != nil {
			return nil, fmt.Errorf("mirrorsim: initial leader epoch of %s %s-%d: %w", d.site, topic, partition, err)
		}
	}
	inner.SetReadOnly(d.ro[tp])
	l := &watchedLog{l: inner, n: d.n, spec: spec}
	d.logs[tp] = l
	return l, nil
}

func (d *dest) SetReadOnly(topic string, partition int32, readOnly bool) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.mu.Lock()
	tp := mirror.TopicPartition{Topic: topic, Partition: partition}
	d.ro[tp] = readOnly
	if !readOnly {
		d.clears[tp]++
	}
	l := d.logs[tp]
	d.mu.Unlock()
	if l != nil {
		l.setReadOnly(readOnly)
	}
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

// crashLogs crashes every log (watchedLog.crash) and returns the first error.
func (d *dest) crashLogs() error {
	d.mu.Lock()
	tps := make([]mirror.TopicPartition, 0, len(d.logs))
	for tp := range d.logs {
		tps = append(tps, tp)
	}
	d.mu.Unlock()
	sort.Slice(tps, func(i, j int) bool { return tps[i].Partition < tps[j].Partition })
	for _, tp := range tps {
		d.mu.Lock()
		l, ro := d.logs[tp], d.ro[tp]
		d.mu.Unlock()
		if err := l.crash(d.factory, ro); err != nil {
			return err
		}
	}
	return nil
}

// closeLogs closes the underlying logs at the end of a run and returns the first error.
func (d *dest) closeLogs() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, l := range d.logs {
		errs = append(errs, l.discard())
	}
	return errors.Join(errs...)
}

// clearCount returns how many times the read-only flag of a partition was cleared.
func (d *dest) clearCount(topic string, partition int32) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.clears[mirror.TopicPartition{Topic: topic, Partition: partition}]
}

// Produce is the client write path of the simulated destination (what a broker's
// Produce handler calls): every batch (one or more whole batches) goes through
// mirror.ProduceToLog, the library's client write path, so the log's own read-only guard
// (fetcher.Log.SetReadOnly) decides the refusal, and the batches are flushed. It returns
// the first base offset.
func (d *dest) Produce(ctx context.Context, topic string, partition int32, batches []byte) (int64, error) {
	l, err := d.log(topic, partition)
	if err != nil {
		return -1, err
	}
	parts, err := splitBatches(batches)
	if err != nil {
		return -1, err
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	first := int64(-1)
	for _, b := range parts {
		off, err := mirror.ProduceToLog(ctx, l, topic, partition, b)
		if err != nil {
			return -1, err
		}
		if first < 0 {
			first = off
		}
	}
	return first, l.Flush()
}

// splitBatches splits concatenated whole batches.
func splitBatches(buf []byte) ([][]byte, error) {
	var out [][]byte
	it := records.NewIterator(buf)
	for it.Next() {
		out = append(out, it.Batch())
	}
	if it.Err() != nil || it.Partial() || len(out) == 0 {
		return nil, admin.Errorf(admin.CodeInvalidRequest, "produce: not whole record batches (err %v, partial %v, %d batches)", it.Err(), it.Partial(), len(out))
	}
	return out, nil
}
