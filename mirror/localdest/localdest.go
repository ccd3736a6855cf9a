// Package localdest is the Destination kmirror ships: LocalDestination, on files
// (OpenFile, the embedded default, one FileLog directory per partition under a locked
// root) or in memory (NewMemory, for tests and simulations). It implements
// dest.Destination and the optional dest.GroupOffsets, dest.ClientAdmin,
// dest.ACLStore, dest.ShareGroupOffsets, dest.ReplicaPlacement and dest.ProducerIDAllocator. Package mirror re-exports it as mirror.LocalDestination.
package localdest

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
	"sync/atomic"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/atomicfile"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

// LocalDestination is the Destination kmirror ships. Opened with OpenFile it
// is the embedded default: one FileLog directory per partition under its root
// (fetcher.PartitionDir), topic metadata in kmirror-topics.json, read-only flags in the
// journal kmirror-read-only.log (appended to, readonly.go),
// group offsets in kmirror-groups.json and the producer-id blocks handed out
// (dest.ProducerIDAllocator) in kmirror-producer-ids.json, each replaced atomically. Made with
// NewMemory it keeps everything in memory on MemoryLogs, for tests and
// simulations.
type LocalDestination struct {
	root      string   // "" for a memory destination
	rootLock  *os.File // lock of a file destination's root (lock.go)
	clusterID string
	openLog   func(topic string, partition int32) (fetcher.Log, error)

	mu   sync.Mutex
	meta fileDestMeta
	logs map[dest.TopicPartition]fetcher.Log
	// opening holds the partitions whose log is being opened outside mu (Log):
	// another caller waits for the same open, DeleteTopic and Close for all.
	opening map[dest.TopicPartition]*logOpen
	// unsettled counts, per read-only key, the SetReadOnly(false) calls whose
	// removal of the flag is not durable yet: the partition stays read-only
	// for everyone until it is (readOnlyLocked).
	unsettled map[string]int
	// readOnly holds the read-only flags, by roKey. A file destination keeps them
	// in its journal (readonly.go): roPending holds the records of changes not
	// written yet (roPendingN of them), roBroken says the next write must be a
	// snapshot (a write failed, or the flags came from kmirror-topics.json), and
	// topicsDirty that meta changed since its last write.
	readOnly    map[string]bool
	roJournal   *readOnlyJournal
	roPending   []byte
	roPendingN  int
	roBroken    bool
	topicsDirty bool
	// writeReadOnly writes records to the journal: appended, or as a snapshot
	// replacing it (tests replace it to hold or fail a write).
	writeReadOnly func(data []byte, records int, snapshot bool) error
	// gen counts the changes of meta; saved is the highest gen known durable.
	// round is the write that the changes made now will go out in (nil: none
	// asked yet); committing says a goroutine runs the writes (commitRounds),
	// holding saveMu while it does.
	gen, saved uint64
	round      *commitRound
	committing bool
	saveMu     sync.Mutex
	// writeTopics replaces topicsFile with data (atomicfile.WriteFile; tests
	// replace it to hold or fail a write).
	writeTopics func(data []byte) error
	active      map[string]bool
	closed      bool
	groupsMu    sync.Mutex
	groups      map[string]map[string]int64 // group -> "topic/partition" -> offset
	aclsOnce    sync.Once
	acls        *aclStore   // synced ACLs (acl.go)
	shares      *shareStore // share-group start offsets (share.go)
	// replicationFactor of new topics, 0 = 1 (replication.go)
	replicationFactor atomic.Int32
	pidMu             sync.Mutex  // serializes AllocateProducerIDs
	pids              producerIDs // guarded by pidMu (producerids.go)
	// discards is what the opens of the logs removed, discardFns who is told
	// (OnDiscard); both guarded by mu (discard.go).
	discards   []PartitionDiscard
	discardFns []*discardHandler
}

type fileDestMeta struct {
	Topics map[string]*fileTopic `json:"topics"`
	// ReadOnly is where the read-only flags were kept before the journal
	// (readOnlyFile): read at open, never written.
	ReadOnly map[string]bool `json:"read_only,omitempty"`
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

// maxOpening bounds the FileLogs a LocalDestination opens at once (OpenFile).
const maxOpening = 64

// OpenFile opens (creating when needed) a file destination rooted at root.
// clusterID identifies this destination cluster.
//
// The root is locked for the life of the destination (until Close): a second open of
// the same root, from this process or another, fails at once with an error matching
// ErrLocked (and fetcher.ErrLocked). A root that cannot be written fails with
// an *UnwritableRootError, which matches fs.ErrPermission.
//
// The root keeps the cluster id it was first opened with (kmirror-cluster-id): an open
// with another id is refused with a *ClusterIDMismatchError (ErrClusterIDMismatch) and
// changes nothing; an empty clusterID opens the root under its stored id.
func OpenFile(root, clusterID string, opts fetcher.FileLogOptions) (_ *LocalDestination, err error) {
	lock, err := lockRoot(root)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	if clusterID, err = checkClusterID(root, clusterID); err != nil {
		return nil, err
	}
	// The root's lock excludes every other process from the partitions'
	// directories and d.logs opens each partition once, so the logs take no
	// lock file of their own: an idle partition holds no descriptor (its
	// segment files are opened on demand through opts.Files, by default the
	// process-wide fetcher.DefaultFileCache).
	opts.DirLockedByCaller = true
	// At most maxOpening logs open at once: a restart's reconcilers open
	// every partition together, and 100,000 opens at once pin more segment
	// files than the FileCache may keep (its bound, from the descriptor
	// limit, is then exceeded: EMFILE fails partitions that would have
	// opened a moment later).
	opening := make(chan struct{}, maxOpening)
	d := newLocalDestination(clusterID, func(topic string, partition int32) (fetcher.Log, error) {
		opening <- struct{}{}
		defer func() { <-opening }()
		return fetcher.OpenFileLog(fetcher.PartitionDir(root, topic, partition), opts)
	})
	d.root, d.rootLock = root, lock
	d.writeTopics = func(data []byte) error { return atomicfile.WriteFile(root, topicsFile, data, 0o600) }
	if err := readJSON(filepath.Join(root, topicsFile), &d.meta); err != nil {
		return nil, err
	}
	if d.meta.Topics == nil {
		d.meta.Topics = map[string]*fileTopic{}
	}
	if err := d.openReadOnly(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.roJournal.close()
		}
	}()
	if err := readJSON(filepath.Join(root, groupsFile), &d.groups); err != nil {
		return nil, err
	}
	if d.groups == nil {
		d.groups = map[string]map[string]int64{}
	}
	if d.acls, err = openACLStore(root); err != nil {
		return nil, err
	}
	if d.shares, err = openShareStore(root); err != nil {
		return nil, err
	}
	if d.pids, err = openProducerIDs(root, clusterID); err != nil {
		return nil, err
	}
	return d, nil
}

// NewMemory returns a destination whose partitions are MemoryLogs made with
// opts; nothing survives the process.
func NewMemory(clusterID string, opts fetcher.MemoryLogOptions) *LocalDestination {
	return newLocalDestination(clusterID, func(string, int32) (fetcher.Log, error) {
		return fetcher.NewMemoryLog(opts), nil
	})
}

func newLocalDestination(clusterID string, open func(string, int32) (fetcher.Log, error)) *LocalDestination {
	return &LocalDestination{
		clusterID: clusterID, openLog: open,
		meta:     fileDestMeta{Topics: map[string]*fileTopic{}},
		readOnly: map[string]bool{},
		logs:     map[dest.TopicPartition]fetcher.Log{},
		active:   map[string]bool{},

		opening:   map[dest.TopicPartition]*logOpen{},
		unsettled: map[string]int{},
		groups:    map[string]map[string]int64{},
		shares:    &shareStore{groups: map[string]map[string]int64{}},
		pids:      newProducerIDs(clusterID),
	}
}

// Root is the directory the destination lives in ("" for a memory destination).
func (d *LocalDestination) Root() string { return d.root }

// ClusterID implements dest.Destination.
func (d *LocalDestination) ClusterID() string { return d.clusterID }

// CreateTopic implements dest.Destination.
func (d *LocalDestination) CreateTopic(ctx context.Context, spec dest.TopicSpec) error {
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
		return d.durableLocked() // made by a call whose save may still be under way
	}
	for name, t := range d.meta.Topics {
		if t.TopicID == spec.TopicID.String() {
			return admin.Errorf(admin.CodeTopicAlreadyExists, "topic id %s is already used by topic %q", spec.TopicID, name)
		}
	}
	if err := dest.CheckReplicationFactor(d, spec.Name); err != nil {
		return err // nothing created
	}
	d.meta.Topics[spec.Name] = &fileTopic{TopicID: spec.TopicID.String(), Partitions: spec.Partitions, Configs: dest.CloneConfigs(spec.Configs)}
	return d.saveLocked()
}

// CreatePartitions implements dest.Destination.
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
		return d.durableLocked()
	}
	t.Partitions = count
	return d.saveLocked()
}

// AlterTopicConfigs implements dest.Destination.
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

// Topic implements dest.Destination.
func (d *LocalDestination) Topic(name string) (dest.TopicSpec, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.meta.Topics[name]
	if !ok {
		return dest.TopicSpec{}, false
	}
	return d.specLocked(name, t), true
}

func (d *LocalDestination) specLocked(name string, t *fileTopic) dest.TopicSpec {
	id, _ := records.ParseUUID(t.TopicID)
	return dest.TopicSpec{Name: name, TopicID: id, Partitions: t.Partitions, Configs: dest.CloneConfigs(t.Configs)}
}

// Topics implements dest.Destination.
func (d *LocalDestination) Topics() []dest.TopicSpec {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]dest.TopicSpec, 0, len(d.meta.Topics))
	for name, t := range d.meta.Topics {
		out = append(out, d.specLocked(name, t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// logOpen is one open of a partition's log under way: done is closed once l
// or err is set.
type logOpen struct {
	done chan struct{}
	l    fetcher.Log
	err  error
}

// Log implements dest.Destination: it opens the partition's FileLog on first use.
// The open (directory, recovery, fsyncs) runs outside the destination's lock, so
// that the logs of many partitions open at once; a second caller for the same
// partition waits for the first one's open.
func (d *LocalDestination) Log(topic string, partition int32) (fetcher.Log, error) {
	tp := dest.TopicPartition{Topic: topic, Partition: partition}
	d.mu.Lock()
	for {
		if d.closed {
			d.mu.Unlock()
			return nil, fetcher.ErrClosed
		}
		t, ok := d.meta.Topics[topic]
		if !ok || partition < 0 || partition >= t.Partitions {
			d.mu.Unlock()
			return nil, admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown partition %s-%d", topic, partition)
		}
		if l, ok := d.logs[tp]; ok {
			d.mu.Unlock()
			return l, nil
		}
		o, ok := d.opening[tp]
		if !ok {
			break
		}
		d.mu.Unlock()
		<-o.done
		if o.err != nil {
			return nil, o.err
		}
		d.mu.Lock() // the log is in d.logs now, unless the topic went meanwhile
	}
	o := &logOpen{done: make(chan struct{})}
	d.opening[tp] = o
	d.mu.Unlock()
	l, err := d.openLog(topic, partition)
	d.mu.Lock()
	delete(d.opening, tp)
	if err == nil && d.closed {
		err = errors.Join(fetcher.ErrClosed, l.Close())
	}
	var report func()
	if err == nil {
		// The flag as it is now: SetReadOnly calls made during the open are in meta.
		l.SetReadOnly(d.readOnlyLocked(roKey(topic, partition)))
		d.logs[tp] = l
		report = d.recordDiscardsLocked(topic, partition, l)
	}
	o.l, o.err = l, err
	close(o.done)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if report != nil {
		report()
	}
	return l, nil
}

// OpenLog implements dest.OpenLogs: the log when it is open or being opened (then
// once that open ended; false if it failed), without opening one. Every write to a
// partition goes through Log, so one that is not open was not written since it was.
func (d *LocalDestination) OpenLog(topic string, partition int32) (fetcher.Log, bool) {
	tp := dest.TopicPartition{Topic: topic, Partition: partition}
	d.mu.Lock()
	l, open := d.logs[tp]
	o, opening := d.opening[tp]
	d.mu.Unlock()
	if open || !opening {
		return l, open
	}
	<-o.done
	return o.l, o.err == nil
}

// waitOpensLocked waits, with d.mu held on entry and on return (released while
// waiting), until no log of topic ("" any topic) is being opened.
func (d *LocalDestination) waitOpensLocked(topic string) {
	for {
		var o *logOpen
		for tp, w := range d.opening {
			if topic == "" || tp.Topic == topic {
				o = w
				break
			}
		}
		if o == nil {
			return
		}
		d.mu.Unlock()
		<-o.done
		d.mu.Lock()
	}
}

// Produce implements dest.Destination with dest.ProduceToLog.
func (d *LocalDestination) Produce(ctx context.Context, topic string, partition int32, batch []byte) (int64, error) {
	l, err := d.Log(topic, partition)
	if err != nil {
		return -1, err
	}
	return dest.ProduceToLog(ctx, l, topic, partition, batch)
}

func roKey(topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// SetReadOnly implements dest.Destination. The flag is durable (kmirror-read-only.log)
// when it returns nil; concurrent calls share the appends and fsyncs of that journal
// (commitRound). A change takes the destination's lock once: the round that writes it
// also settles it (settleLocked), so its caller wakes with nothing left to do (at a
// failover, thousands of callers taking the lock again one after the other were the
// destination's longest queue).
func (d *LocalDestination) SetReadOnly(topic string, partition int32, readOnly bool) error {
	k := roKey(topic, partition)
	tp := dest.TopicPartition{Topic: topic, Partition: partition}
	d.mu.Lock()
	if d.readOnly[k] == readOnly {
		defer d.mu.Unlock()
		// Possibly set by a call whose save is still under way: durable first.
		if err := d.durableLocked(); err != nil {
			return err
		}
		if l := d.logs[tp]; l != nil {
			l.SetReadOnly(d.readOnlyLocked(k))
		}
		return nil
	}
	if readOnly {
		// Refuse client writes before the flag is durable: a crash in between leaves
		// the partition writable on disk, and the reconciler sets it again.
		if l := d.logs[tp]; l != nil {
			l.SetReadOnly(true)
		}
		d.readOnly[k] = true
		r := d.queueReadOnlyLocked('+', k)
		d.mu.Unlock()
		return r.wait()
	}
	delete(d.readOnly, k)
	r := d.queueReadOnlyLocked('-', k)
	if r == nil { // a memory destination: durable at once
		if l := d.logs[tp]; l != nil {
			l.SetReadOnly(d.readOnlyLocked(k))
		}
		d.mu.Unlock()
		return nil
	}
	d.unsettled[k]++ // read-only for everyone until the removal is durable
	r.settle = append(r.settle, roSettle{k: k, tp: tp})
	d.mu.Unlock()
	return r.wait()
}

// roSettle is a removal of a read-only flag that its round settles once written: the
// partition is writable only when the removal is durable, and flagged again when the
// write failed.
type roSettle struct {
	k  string
	tp dest.TopicPartition
}

// settleLocked settles the removals of r's flags after r's write (d.mu held).
func (d *LocalDestination) settleLocked(r *commitRound) {
	for _, s := range r.settle {
		if d.unsettled[s.k]--; d.unsettled[s.k] == 0 {
			delete(d.unsettled, s.k)
		}
		if r.err != nil {
			d.readOnly[s.k] = true
			continue
		}
		if l := d.logs[s.tp]; l != nil {
			l.SetReadOnly(d.readOnlyLocked(s.k)) // writable only once it is durable
		}
	}
}

// readOnlyLocked reports whether the partition of key k is read-only: flagged, or
// its flag's removal not durable yet.
func (d *LocalDestination) readOnlyLocked(k string) bool {
	return d.readOnly[k] || d.unsettled[k] > 0
}

// ReadOnly implements dest.Destination.
func (d *LocalDestination) ReadOnly(topic string, partition int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.readOnlyLocked(roKey(topic, partition))
}

// CommittedOffsets implements dest.GroupOffsets.
func (d *LocalDestination) CommittedOffsets(group string) map[dest.TopicPartition]int64 {
	d.groupsMu.Lock()
	defer d.groupsMu.Unlock()
	return offsetsOf(d.groups, group)
}

// Groups lists the groups with committed offsets, sorted (metasync.GroupLister).
func (d *LocalDestination) Groups() []string {
	d.groupsMu.Lock()
	defer d.groupsMu.Unlock()
	return groupNames(d.groups)
}

// offsetsOf is the offsets of group in groups (keyed "topic/partition"), by partition;
// nil for an unknown group.
func offsetsOf(groups map[string]map[string]int64, group string) map[dest.TopicPartition]int64 {
	g, ok := groups[group]
	if !ok {
		return nil
	}
	out := make(map[dest.TopicPartition]int64, len(g))
	for k, v := range g {
		if tp, ok := parseTPKey(k); ok {
			out[tp] = v
		}
	}
	return out
}

// groupNames is the groups of groups, sorted.
func groupNames(groups map[string]map[string]int64) []string {
	out := make([]string, 0, len(groups))
	for g := range groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// parseTPKey parses a "topic/partition" key written by roKey.
func parseTPKey(k string) (dest.TopicPartition, bool) {
	i := strings.LastIndexByte(k, '/')
	if i < 0 {
		return dest.TopicPartition{}, false
	}
	p, err := strconv.ParseInt(k[i+1:], 10, 32)
	if err != nil {
		return dest.TopicPartition{}, false
	}
	return dest.TopicPartition{Topic: k[:i], Partition: int32(p)}, true
}

// HasActiveMembers implements dest.GroupOffsets; a group marked active with SetGroupActive is
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

// CommitOffsets implements dest.GroupOffsets.
func (d *LocalDestination) CommitOffsets(group string, offsets map[dest.TopicPartition]int64) error {
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

// LowerGroupOffsets implements dest.GroupOffsetLowerer: every committed offset of
// tp above end becomes end (durably for a file destination).
func (d *LocalDestination) LowerGroupOffsets(tp dest.TopicPartition, end int64) ([]dest.LoweredGroupOffset, error) {
	d.groupsMu.Lock()
	defer d.groupsMu.Unlock()
	k := roKey(tp.Topic, tp.Partition)
	var lowered []dest.LoweredGroupOffset
	for _, group := range groupNames(d.groups) {
		if off, ok := d.groups[group][k]; ok && off > end {
			d.groups[group][k] = end
			lowered = append(lowered, dest.LoweredGroupOffset{Group: group, From: off, To: end})
		}
	}
	if len(lowered) == 0 || d.root == "" {
		return lowered, nil
	}
	if err := writeJSON(d.root, groupsFile, d.groups); err != nil {
		for _, l := range lowered { // not durable: keep what is on disk, so a retry sees it
			d.groups[l.Group][k] = l.From
		}
		return nil, err
	}
	return lowered, nil
}

// DeleteGroupOffsets removes every committed offset of group (durably for a
// file destination) and reports whether it had any.
func (d *LocalDestination) DeleteGroupOffsets(group string) (bool, error) {
	d.groupsMu.Lock()
	defer d.groupsMu.Unlock()
	if _, ok := d.groups[group]; !ok {
		return false, nil
	}
	delete(d.groups, group)
	if d.root == "" {
		return true, nil
	}
	return true, writeJSON(d.root, groupsFile, d.groups)
}

// closeWorkers is how many logs Close closes at once: a log's Close may fsync its
// active segment and write its recovery point (two more fsyncs), and the disk
// overlaps those of many files, where one after another they add up at thousands of
// partitions.
const closeWorkers = 32

// Close implements dest.Destination: it closes every open log (closeWorkers at a
// time), then releases the root's lock of a file destination.
func (d *LocalDestination) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.waitOpensLocked("") // an open under way closes its log itself
	// A write of the topics file under way ends before the root's lock is released
	// (a later one sees closed and refuses).
	d.mu.Unlock()
	d.saveMu.Lock()
	//lint:ignore SA2001 waiting for the write under way is the point
	d.saveMu.Unlock()
	d.mu.Lock()
	logs := make(chan fetcher.Log, len(d.logs))
	for _, l := range d.logs {
		logs <- l
	}
	close(logs)
	var (
		wg     sync.WaitGroup
		errsMu sync.Mutex
		errs   []error
	)
	for range min(closeWorkers, len(d.logs)) {
		wg.Go(func() {
			for l := range logs {
				if err := l.Close(); err != nil {
					errsMu.Lock()
					errs = append(errs, err)
					errsMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	d.roJournal.close()
	if d.rootLock != nil {
		errs = append(errs, d.rootLock.Close())
	}
	return errors.Join(errs...)
}

// saveLocked makes the current meta durable in topicsFile (and any read-only flags
// changed meanwhile in their journal). It is called with d.mu
// held and returns with it held, but releases it while the file is written: the
// calls made meanwhile (the reconcilers of many partitions flagging them at once)
// wait for the write under way, and the next write takes all their changes (a group
// commit), so P flags cost a few writes of the file, not P.
func (d *LocalDestination) saveLocked() error {
	d.topicsDirty = true
	d.gen++
	return d.commitLocked(d.gen)
}

// queueReadOnlyLocked records the change of k's read-only flag (op '+' or '-', already
// made in d.readOnly) for the journal's next write and returns the round that will
// write it; nil for a memory destination, where it is durable at once.
func (d *LocalDestination) queueReadOnlyLocked(op byte, k string) *commitRound {
	d.gen++
	if d.root == "" {
		d.saved = d.gen
		return nil
	}
	d.roPending = appendReadOnlyRecord(d.roPending, op, k)
	d.roPendingN++
	return d.joinRoundLocked()
}

// durableLocked returns once every change made so far is durable (with d.mu held,
// released while waiting).
func (d *LocalDestination) durableLocked() error {
	if d.saved >= d.gen {
		return nil
	}
	return d.commitLocked(d.gen)
}

// commitRound is one write of the group commit: every call whose change it holds
// waits for its done and gets its err; settle are the read-only removals it settles.
type commitRound struct {
	done   chan struct{}
	err    error
	settle []roSettle
}

// wait returns r's error once r is written; a nil r is a change durable already.
func (r *commitRound) wait() error {
	if r == nil {
		return nil
	}
	<-r.done
	return r.err
}

// commitLocked returns once a write that holds generation gen succeeded (or with the
// error of the write that held it). It is called with d.mu held and returns with it
// held, releasing it while it waits. A call joins the next round, which starts once
// the one under way ends and takes every change made until then; all the calls of a
// round wake together at its end. (Each waiter used to take the write's lock in
// turn to learn that an earlier write had covered it: at a failover's thousands of
// SetReadOnly calls, that queue was the destination's slowest step.)
func (d *LocalDestination) commitLocked(gen uint64) error {
	if d.root == "" || d.saved >= gen {
		d.saved = max(d.saved, gen)
		return nil
	}
	r := d.joinRoundLocked()
	d.mu.Unlock()
	err := r.wait()
	d.mu.Lock()
	return err
}

// joinRoundLocked returns the round that takes the changes made so far, starting the
// goroutine that writes rounds when none runs.
func (d *LocalDestination) joinRoundLocked() *commitRound {
	r := d.round
	if r == nil {
		r = &commitRound{done: make(chan struct{})}
		d.round = r
	}
	if !d.committing {
		d.committing = true
		go d.commitRounds()
	}
	return r
}

// commitRounds writes rounds until none is asked for.
func (d *LocalDestination) commitRounds() {
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.round != nil {
		r := d.round
		d.round = nil
		r.err = d.writeMetaLocked()
		d.settleLocked(r)
		close(r.done)
	}
	d.committing = false
}

// writeMetaLocked writes what changed since the last write: the read-only journal's
// records, then topicsFile when meta changed. It releases d.mu while it writes.
func (d *LocalDestination) writeMetaLocked() error {
	if d.closed {
		return fetcher.ErrClosed // the root's lock may be released: never written after Close
	}
	g := d.gen
	// The journal first: a flag is never dropped by a topics file written without
	// the flags it used to hold (openReadOnly).
	var ro []byte
	roN, snapshot := 0, false
	if d.roPendingN > 0 || d.roBroken {
		if d.roBroken || d.roJournal.needsSnapshot(len(d.readOnly)) {
			ro, roN, snapshot = encodeReadOnlySnapshot(d.readOnly), len(d.readOnly)+1, true
		} else {
			ro, roN = d.roPending, d.roPendingN
		}
		d.roPending, d.roPendingN = nil, 0
	}
	var topics []byte
	if d.topicsDirty {
		var err error
		if topics, err = json.MarshalIndent(&fileDestMeta{Topics: d.meta.Topics}, "", "  "); err != nil {
			return err
		}
		d.topicsDirty = false
	}
	d.mu.Unlock()
	var roErr, topicsErr error
	if roN > 0 {
		roErr = d.writeReadOnly(ro, roN, snapshot)
	}
	if roErr == nil && topics != nil {
		topicsErr = d.writeTopics(topics)
	}
	d.mu.Lock()
	if roErr != nil {
		d.roBroken = true // what the failed write held, and anything it left behind
		d.topicsDirty = d.topicsDirty || topics != nil
		return fmt.Errorf("mirror: write %s: %w", readOnlyFile, roErr)
	}
	d.roBroken = false
	if topicsErr != nil {
		d.topicsDirty = true
		return fmt.Errorf("mirror: write %s: %w", topicsFile, topicsErr)
	}
	d.saved = max(d.saved, g)
	return nil
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

// writeJSON replaces dir/name atomically (atomicfile.WriteFile).
func writeJSON(dir, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(dir, name, data, 0o600); err != nil {
		return fmt.Errorf("mirror: write %s: %w", name, err)
	}
	return nil
}

var (
	_ dest.Destination  = (*LocalDestination)(nil)
	_ dest.GroupOffsets = (*LocalDestination)(nil)
)
