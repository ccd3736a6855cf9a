package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// TopicSpec describes a destination topic: a mirror topic carries its source's topic id
// and partition count, so offsets and ids are identical on both sides.
type TopicSpec struct {
	Name       string
	TopicID    records.UUID
	Partitions int32
	Configs    map[string]string
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Destination is what the host owns on the destination side: topics, their partition
// logs, the read-only flag of mirror partitions and committed consumer-group offsets.
// kmirror never writes a destination partition except through the Log the Destination
// returns. Implementations must be safe for concurrent use.
type Destination interface {
	// ClusterID is the destination cluster's id (used to find, on the other cluster, the
	// mirror that mirrors back from this one during failback).
	ClusterID() string
	// CreateTopic creates a topic. Creating an existing topic with the same id returns
	// nil and changes nothing; a name taken with another id, or an id used by another
	// name, returns an *admin.Error with TOPIC_ALREADY_EXISTS.
	CreateTopic(ctx context.Context, spec TopicSpec) error
	// CreatePartitions grows topic to count partitions; shrinking is an error.
	CreatePartitions(ctx context.Context, topic string, count int32) error
	// AlterTopicConfigs replaces the given topic configs (others are left alone).
	AlterTopicConfigs(ctx context.Context, topic string, configs map[string]string) error
	// Topic describes one topic.
	Topic(name string) (TopicSpec, bool)
	// Topics lists every topic, sorted by name.
	Topics() []TopicSpec
	// Log returns the log of one partition. The Destination owns it: callers never
	// Close it, and the same Log is returned on every call. Its read-only flag
	// (fetcher.Log.SetReadOnly) must always agree with ReadOnly, so that a client write
	// through any handle to it is refused while the partition is read-only.
	Log(topic string, partition int32) (fetcher.Log, error)
	// Produce is the client write path (what a broker's Produce handler or a service
	// calls): one v2 data batch appended as leader, its base offset returned. A
	// read-only partition refuses it with an error errors.Is matches to
	// admin.CodeReadOnlyTopic.Err(); ProduceToLog implements the checks.
	Produce(ctx context.Context, topic string, partition int32, batch []byte) (int64, error)
	// SetReadOnly sets whether producers may write the partition (mirror partitions are
	// read-only in every state but STOPPED), durably, and on its Log when open.
	SetReadOnly(topic string, partition int32, readOnly bool) error
	// ReadOnly reports the read-only flag of a partition.
	ReadOnly(topic string, partition int32) bool
	// Close releases every log.
	Close() error
}

// ReplicaWaiter is optionally implemented by a Destination whose partitions have
// follower replicas. PREPARING and ULE_LOG_TRUNCATION call it after truncating the
// leader's log and before the fetcher starts, so no replica keeps a stale tail while new
// data arrives (spec §6.3 step 6, §7.4). A Destination without it (LocalDestination: one
// replica) counts as converged at once.
type ReplicaWaiter interface {
	// WaitReplicas returns once the replicas of the partition have caught up with the
	// leader at offset (-1: the leader's current log end), with no entry beyond it: the
	// ISR, or every assigned replica when all is true (the partition or its mirror sets
	// mirror.support.unclean.leader.election). It returns ctx.Err() when ctx ends first.
	WaitReplicas(ctx context.Context, topic string, partition int32, offset int64, all bool) error
}

// GroupOffsets is optionally implemented by a Destination that stores consumer-group
// offsets, for the offset sync of spec §17.
type GroupOffsets interface {
	// CommittedOffsets returns the committed offsets of group (nil when it has none).
	CommittedOffsets(group string) map[TopicPartition]int64
	// HasActiveMembers reports whether group has members on the destination; such groups
	// are never synced.
	HasActiveMembers(group string) bool
	// CommitOffsets stores offsets for group.
	CommitOffsets(group string, offsets map[TopicPartition]int64) error
}

// LocalDestination is the Destination kmirror ships. Opened with OpenFileDestination it
// is the embedded default: one FileLog directory per partition under its root
// (fetcher.PartitionDir), topic metadata and read-only flags in kmirror-topics.json and
// group offsets in kmirror-groups.json, both replaced atomically. Made with
// NewMemoryDestination it keeps everything in memory on MemoryLogs, for tests and
// simulations.
type LocalDestination struct {
	root      string   // "" for a memory destination
	rootLock  *os.File // lock of a file destination's root (destination_lock.go)
	clusterID string
	openLog   func(topic string, partition int32) (fetcher.Log, error)

	mu       sync.Mutex
	meta     fileDestMeta
	logs     map[TopicPartition]fetcher.Log
	active   map[string]bool
	closed   bool
	groupsMu sync.Mutex
	groups   map[string]map[string]int64 // group -> "topic/partition" -> offset
	aclsOnce sync.Once
	acls     *aclStore // synced ACLs (acl.go)
}

type fileDestMeta struct {
	Topics   map[string]*fileTopic `json:"topics"`
	ReadOnly map[string]bool       `json:"read_only"`
}

type fileTopic struct {
	TopicID    string            `json:"topic_id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

const (
	topicsFile = "kmirror-topics.json"
	groupsFile = "kmirror-groups.json"
)

// OpenFileDestination opens (creating when needed) a file destination rooted at root.
// clusterID identifies this destination cluster.
//
// The root is locked for the life of the destination (until Close): a second open of
// the same root, from this process or another, fails at once with an error matching
// ErrDestinationLocked (and fetcher.ErrLocked). A root that cannot be written fails with
// an *UnwritableRootError, which matches fs.ErrPermission.
func OpenFileDestination(root, clusterID string, opts fetcher.FileLogOptions) (_ *LocalDestination, err error) {
	lock, err := lockRoot(root)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	d := newLocalDestination(clusterID, func(topic string, partition int32) (fetcher.Log, error) {
		return fetcher.OpenFileLog(fetcher.PartitionDir(root, topic, partition), opts)
	})
	d.root, d.rootLock = root, lock
	if err := readJSON(filepath.Join(root, topicsFile), &d.meta); err != nil {
		return nil, err
	}
	if d.meta.Topics == nil {
		d.meta.Topics = map[string]*fileTopic{}
	}
	if d.meta.ReadOnly == nil {
		d.meta.ReadOnly = map[string]bool{}
	}
	if err := readJSON(filepath.Join(root, groupsFile), &d.groups); err != nil {
		return nil, err
	}
	if d.groups == nil {
		d.groups = map[string]map[string]int64{}
	}
	if d.acls, err = openACLStore(root); err != nil {
		return nil, err
	}
	return d, nil
}

// NewMemoryDestination returns a destination whose partitions are MemoryLogs made with
// opts; nothing survives the process.
func NewMemoryDestination(clusterID string, opts fetcher.MemoryLogOptions) *LocalDestination {
	return newLocalDestination(clusterID, func(string, int32) (fetcher.Log, error) {
		return fetcher.NewMemoryLog(opts), nil
	})
}

func newLocalDestination(clusterID string, open func(string, int32) (fetcher.Log, error)) *LocalDestination {
	return &LocalDestination{
		clusterID: clusterID, openLog: open,
		meta:   fileDestMeta{Topics: map[string]*fileTopic{}, ReadOnly: map[string]bool{}},
		logs:   map[TopicPartition]fetcher.Log{},
		active: map[string]bool{},
		groups: map[string]map[string]int64{},
	}
}

// Root is the directory the destination lives in ("" for a memory destination).
func (d *LocalDestination) Root() string { return d.root }

// ClusterID implements Destination.
func (d *LocalDestination) ClusterID() string { return d.clusterID }

// CreateTopic implements Destination.
func (d *LocalDestination) CreateTopic(ctx context.Context, spec TopicSpec) error {
	if spec.Name == "" || spec.Partitions <= 0 {
		return admin.Errorf(admin.CodeInvalidRequest, "invalid topic %q with %d partitions", spec.Name, spec.Partitions)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fetcher.ErrClosed
	}
	if t, ok := d.meta.Topics[spec.Name]; ok {
		if t.TopicID != spec.TopicID.String() {
			return admin.Errorf(admin.CodeTopicAlreadyExists, "topic %q exists with topic id %s, not %s", spec.Name, t.TopicID, spec.TopicID)
		}
		return nil
	}
	for name, t := range d.meta.Topics {
		if t.TopicID == spec.TopicID.String() {
			return admin.Errorf(admin.CodeTopicAlreadyExists, "topic id %s is already used by topic %q", spec.TopicID, name)
		}
	}
	d.meta.Topics[spec.Name] = &fileTopic{TopicID: spec.TopicID.String(), Partitions: spec.Partitions, Configs: cloneConfigs(spec.Configs)}
	return d.saveLocked()
}

// CreatePartitions implements Destination.
func (d *LocalDestination) CreatePartitions(ctx context.Context, topic string, count int32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.meta.Topics[topic]
	if !ok {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown topic %q", topic)
	}
	if count < t.Partitions {
		return admin.Errorf(admin.CodeInvalidRequest, "topic %q has %d partitions; cannot shrink to %d", topic, t.Partitions, count)
	}
	if count == t.Partitions {
		return nil
	}
	t.Partitions = count
	return d.saveLocked()
}

// AlterTopicConfigs implements Destination.
func (d *LocalDestination) AlterTopicConfigs(ctx context.Context, topic string, configs map[string]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.meta.Topics[topic]
	if !ok {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown topic %q", topic)
	}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	for k, v := range configs {
		t.Configs[k] = v
	}
	return d.saveLocked()
}

// Topic implements Destination.
func (d *LocalDestination) Topic(name string) (TopicSpec, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.meta.Topics[name]
	if !ok {
		return TopicSpec{}, false
	}
	return d.specLocked(name, t), true
}

func (d *LocalDestination) specLocked(name string, t *fileTopic) TopicSpec {
	id, _ := records.ParseUUID(t.TopicID)
	return TopicSpec{Name: name, TopicID: id, Partitions: t.Partitions, Configs: cloneConfigs(t.Configs)}
}

// Topics implements Destination.
func (d *LocalDestination) Topics() []TopicSpec {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]TopicSpec, 0, len(d.meta.Topics))
	for name, t := range d.meta.Topics {
		out = append(out, d.specLocked(name, t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Log implements Destination: it opens the partition's FileLog on first use.
func (d *LocalDestination) Log(topic string, partition int32) (fetcher.Log, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fetcher.ErrClosed
	}
	t, ok := d.meta.Topics[topic]
	if !ok || partition < 0 || partition >= t.Partitions {
		return nil, admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown partition %s-%d", topic, partition)
	}
	tp := TopicPartition{topic, partition}
	if l, ok := d.logs[tp]; ok {
		return l, nil
	}
	l, err := d.openLog(topic, partition)
	if err != nil {
		return nil, err
	}
	l.SetReadOnly(d.meta.ReadOnly[roKey(topic, partition)])
	d.logs[tp] = l
	return l, nil
}

// Produce implements Destination with ProduceToLog.
func (d *LocalDestination) Produce(ctx context.Context, topic string, partition int32, batch []byte) (int64, error) {
	l, err := d.Log(topic, partition)
	if err != nil {
		return -1, err
	}
	return ProduceToLog(ctx, l, topic, partition, batch)
}

func roKey(topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// SetReadOnly implements Destination.
func (d *LocalDestination) SetReadOnly(topic string, partition int32, readOnly bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := roKey(topic, partition)
	l := d.logs[TopicPartition{topic, partition}]
	if d.meta.ReadOnly[k] == readOnly {
		if l != nil {
			l.SetReadOnly(readOnly)
		}
		return nil
	}
	if readOnly {
		// Refuse client writes before the flag is durable: a crash in between leaves
		// the partition writable on disk, and the reconciler sets it again.
		if l != nil {
			l.SetReadOnly(true)
		}
		d.meta.ReadOnly[k] = true
		return d.saveLocked()
	}
	delete(d.meta.ReadOnly, k)
	if err := d.saveLocked(); err != nil {
		d.meta.ReadOnly[k] = true
		return err
	}
	if l != nil {
		l.SetReadOnly(false) // writable only once it is durable
	}
	return nil
}

// ReadOnly implements Destination.
func (d *LocalDestination) ReadOnly(topic string, partition int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.meta.ReadOnly[roKey(topic, partition)]
}

// CommittedOffsets implements GroupOffsets.
func (d *LocalDestination) CommittedOffsets(group string) map[TopicPartition]int64 {
	d.groupsMu.Lock()
	defer d.groupsMu.Unlock()
	g, ok := d.groups[group]
	if !ok {
		return nil
	}
	out := make(map[TopicPartition]int64, len(g))
	for k, v := range g {
		if tp, ok := parseTPKey(k); ok {
			out[tp] = v
		}
	}
	return out
}

// Groups lists the groups with committed offsets, sorted (mirror.GroupLister).
func (d *LocalDestination) Groups() []string {
	d.groupsMu.Lock()
	defer d.groupsMu.Unlock()
	out := make([]string, 0, len(d.groups))
	for g := range d.groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// parseTPKey parses a "topic/partition" key written by roKey.
func parseTPKey(k string) (TopicPartition, bool) {
	i := strings.LastIndexByte(k, '/')
	if i < 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(k[i+1:], 10, 32)
	if err != nil {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: k[:i], Partition: int32(p)}, true
}

// HasActiveMembers implements GroupOffsets; a group marked active with SetGroupActive is
// never synced.
func (d *LocalDestination) HasActiveMembers(group string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active[group]
}

// SetGroupActive marks group as having (or not) active members on the destination.
func (d *LocalDestination) SetGroupActive(group string, active bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.active[group] = active
}

// CommitOffsets implements GroupOffsets.
func (d *LocalDestination) CommitOffsets(group string, offsets map[TopicPartition]int64) error {
	d.groupsMu.Lock()
	defer d.groupsMu.Unlock()
	g := d.groups[group]
	if g == nil {
		g = map[string]int64{}
		d.groups[group] = g
	}
	for tp, off := range offsets {
		g[roKey(tp.Topic, tp.Partition)] = off
	}
	if d.root == "" {
		return nil
	}
	return writeJSON(d.root, groupsFile, d.groups)
}

// Close implements Destination: it closes every open log, then releases the root's
// lock of a file destination.
func (d *LocalDestination) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for _, l := range d.logs {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.rootLock != nil {
		errs = append(errs, d.rootLock.Close())
	}
	return errors.Join(errs...)
}

func (d *LocalDestination) saveLocked() error {
	if d.root == "" {
		return nil
	}
	return writeJSON(d.root, topicsFile, d.meta)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mirror: read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("mirror: corrupt %s: %w", path, err)
	}
	return nil
}

// writeJSON replaces dir/name atomically: temp file, fsync, rename, fsync of dir.
func writeJSON(dir, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("mirror: write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("mirror: write %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("mirror: sync %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("mirror: rename %s: %w", name, err)
	}
	df, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer df.Close()
	return df.Sync()
}
