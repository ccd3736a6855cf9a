package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// ControllerLog is the durable, ordered log behind the Controller: mirror definitions and
// the desired state of every mirror topic (KIP-1279 keeps them in the KRaft metadata log).
//
// Append must make the records durable, in order and atomically (all or none), before it
// returns, and returns the offset of the first; offsets grow by one per record. Load calls
// fn for every record in offset order; a compacted log may have gaps. A ControllerLog has
// one writer: the Controller that opened it.
type ControllerLog interface {
	Load(ctx context.Context, fn func(offset int64, r records.ControllerRecord) error) error
	Append(ctx context.Context, recs []records.ControllerRecord) (firstOffset int64, err error)
	Close() error
}

// TopicState is the desired state of one mirror topic as the controller holds it.
type TopicState struct {
	Topic   string
	TopicID records.UUID
	Mirror  string // "" once dissociated from a deleted mirror
	Desired statemachine.Desired
	// StateOffset is the controller-log offset of the topic's last state record; lifecycle
	// requests carrying an older offset are refused (per-topic StateOffset fencing).
	StateOffset int64
	// Approvals are the removals of this site's records that the start (or recover)
	// which wrote the topic's record allowed, by partition, sorted; PREPARING uses one
	// and clears it (ClearApproval). Every other desired-state change drops them.
	Approvals []Approval
}

// Approval allows PREPARING of one partition to remove records written on this site
// within the offsets [From, To): the removed range of the plan the operator approved
// (StartOptions.AllowTruncation). A removal outside it (the log grew, or another LME
// cuts lower) is not covered and is refused.
type Approval struct {
	Partition int32
	From, To  int64
}

// Covers reports whether removing the offsets of r lies within the approval.
func (a Approval) Covers(r OffsetRange) bool { return r.From >= a.From && r.To <= a.To }

// ApprovalsOf is the approval of every partition of plan that removes records written
// on this site (PartitionPlan.RemovesRecords): what a start allowed to remove them
// records with the topic.
func ApprovalsOf(plan []PartitionPlan) []Approval {
	var out []Approval
	for _, p := range plan {
		if p.RemovesRecords() {
			out = append(out, Approval{Partition: p.Partition, From: p.Removed.From, To: p.Removed.To})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// Approval returns the approval of partition p, if any.
func (t TopicState) Approval(p int32) (Approval, bool) {
	for _, a := range t.Approvals {
		if a.Partition == p {
			return a, true
		}
	}
	return Approval{}, false
}

// MirrorInfo is one mirror definition.
type MirrorInfo struct {
	Name    string
	Configs map[string]string
	Config  MirrorConfig
}

// TopicMeta describes a topic to start: its source topic id and partition count, so the
// destination topic can be created identical to the source.
type TopicMeta struct {
	Name          string
	TopicID       records.UUID
	NumPartitions int32
	// Approvals (StartTopics) are recorded with the topic's MIRRORING state: the
	// removals of this site's records the start allowed (see Approval).
	Approvals []Approval
}

// TopicResult is the outcome of a lifecycle operation for one topic; Err is nil or an
// *admin.Error.
type TopicResult struct {
	Topic string
	Err   error
	// Truncations (StartMirrorTopics only) lists, before it happens, every partition
	// whose destination log PREPARING will truncate fully (spec §6.3 step 5: no last
	// mirrored epoch is known, as with a plain Kafka source), and how many of its
	// offsets the source no longer has (FullTruncation.Lost).
	Truncations []FullTruncation
	// Plan (start, stop, pause, resume, recover) is, per partition, what the operation
	// does or, with ValidateOnly, would do; set for a start refused with
	// ErrTruncationRefused too.
	Plan []PartitionPlan
}

// Controller validates and records desired state: mirror definitions and per-topic
// desired states (spec §10, §14). It checks desired states only; the actual partition
// states are checked by the caller through the coordinator before it asks the controller
// (spec §9.7). Safe for concurrent use; operations are serialized.
type Controller struct {
	mu       sync.Mutex
	log      ControllerLog
	mirrors  map[string]*MirrorInfo
	topics   map[string]*TopicState
	byID     map[records.UUID]string
	last     int64 // offset of the last applied record, -1 when none
	watchers []func(TopicState)
}

// OpenController loads the controller state by replaying log.
func OpenController(ctx context.Context, log ControllerLog) (*Controller, error) {
	c := &Controller{
		log:     log,
		mirrors: map[string]*MirrorInfo{},
		topics:  map[string]*TopicState{},
		byID:    map[records.UUID]string{},
		last:    -1,
	}
	err := log.Load(ctx, func(off int64, r records.ControllerRecord) error { return c.replay(off, r) })
	if err != nil {
		return nil, fmt.Errorf("mirror: load controller log: %w", err)
	}
	return c, nil
}

// Watch registers fn to be called, after every durable change, with the new desired state
// of each topic the change touched, in change order.
//
// fn runs synchronously inside the mutating call (CreateMirror, StartTopics, StopTopics,
// PauseTopics, ResumeTopics, DeleteMirror) with the controller's lock held, after the
// records are durable and applied and before that call returns: a caller that gets a
// result back knows every watcher has seen the change. Consequences: fn must not call
// any method of the Controller (or of its View) — the lock is not reentrant, so that
// deadlocks — nor wait for a goroutine that does; and while fn runs every other
// Controller call waits, so fn must not block for long. A watcher registered during a
// change first sees the next one.
func (c *Controller) Watch(fn func(TopicState)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchers = append(c.watchers, fn)
}

// Offset returns the offset of the last applied controller record (-1 when none): the
// StateOffset a caller passes after validating actual states against this view.
func (c *Controller) Offset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Mirror returns the definition of mirror name.
func (c *Controller) Mirror(name string) (MirrorInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.mirrors[name]
	if !ok {
		return MirrorInfo{}, false
	}
	return *m, true
}

// Mirrors returns every mirror definition, sorted by name.
func (c *Controller) Mirrors() []MirrorInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]MirrorInfo, 0, len(c.mirrors))
	for _, m := range c.mirrors {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic returns the desired state of topic.
func (c *Controller) Topic(topic string) (TopicState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[topic]
	if !ok {
		return TopicState{}, false
	}
	return *t, true
}

// Topics returns the topics associated with mirror (all topics when mirror is ""),
// sorted by name.
func (c *Controller) Topics(mirror string) []TopicState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []TopicState
	for _, t := range c.topics {
		if mirror == "" || t.Mirror == mirror {
			out = append(out, *t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// CreateMirror defines a new mirror with raw configs (spec §14.1). The configs are stored
// with their keys in the canonical spelling (CanonicalMirrorConfigs).
func (c *Controller) CreateMirror(ctx context.Context, name string, configs map[string]string) error {
	if err := ValidMirrorName(name); err != nil {
		return err
	}
	if _, err := ParseMirrorConfig(configs); err != nil {
		return err
	}
	configs, err := CanonicalMirrorConfigs(configs)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mirrors[name]; ok {
		return admin.Errorf(admin.CodeClusterMirrorAlreadyExists, "cluster mirror %q already exists", name)
	}
	return c.commitLocked(ctx, []records.ControllerRecord{mirrorRecord(name, configs)})
}

// RecordSourceClusterID stores id, the cluster id the source of mirror name answered,
// with the mirror (KeySourceClusterID), so that it is known after a restart. The same
// id again is a no-op; another replaces it. Unknown mirror: UNKNOWN_CLUSTER_MIRROR; an
// invalid id: INVALID_CONFIG.
func (c *Controller) RecordSourceClusterID(ctx context.Context, name, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.mirrors[name]
	if !ok {
		return UnknownMirror(name)
	}
	if m.Configs[KeySourceClusterID] == id {
		return nil
	}
	raw := dest.CloneConfigs(m.Configs)
	raw[KeySourceClusterID] = id
	if _, err := ParseMirrorConfig(raw); err != nil {
		return err
	}
	return c.commitLocked(ctx, []records.ControllerRecord{mirrorRecord(name, raw)})
}

// StartTopics associates topics with mirror name and sets their desired state to
// MIRRORING (spec §14.2). include and exclude patterns are added to the mirror's
// auto-discovery configs (an added include is removed from exclude and vice versa);
// topics of the mirror that now match exclude are stopped. Per topic: an explicit topic
// matching exclude is INVALID_REQUEST; a topic name or id already used with another id or
// name is TOPIC_ALREADY_EXISTS; a topic active in another mirror, or PAUSED here, is
// INVALID_CLUSTER_MIRROR_STATES; a topic already MIRRORING here succeeds with no change.
func (c *Controller) StartTopics(ctx context.Context, name string, topics []TopicMeta, include, exclude []string) ([]TopicResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg, raw, err := c.patternsLocked(name, include, exclude)
	if err != nil {
		return nil, err
	}
	var recs []records.ControllerRecord
	if raw != nil {
		recs = append(recs, mirrorRecord(name, raw))
		for _, t := range c.topics {
			if t.Mirror == name && t.Desired != statemachine.DesiredStopped && cfg.ExcludesTopic(t.Topic) {
				recs = append(recs, topicRecord(t.Topic, t.TopicID, name, statemachine.DesiredStopped))
			}
		}
	}
	results := make([]TopicResult, 0, len(topics))
	for _, tm := range topics {
		err := c.checkStartLocked(name, cfg, tm)
		if err == nil && !c.alreadyMirroringLocked(name, tm.Name) {
			recs = append(recs, topicRecordWith(tm.Name, tm.TopicID, name, statemachine.DesiredMirroring, tm.Approvals))
		}
		results = append(results, TopicResult{Topic: tm.Name, Err: err})
	}
	if err := c.commitLocked(ctx, recs); err != nil {
		return nil, err
	}
	return results, nil
}

// CheckStart runs the per-topic checks of StartTopics(name, topics, include, exclude)
// without changing anything, so that a caller can refuse a topic before it creates its
// destination topic. It returns one error (nil = would start) per topic, in order, or
// an error for the whole request (unknown mirror, bad patterns).
func (c *Controller) CheckStart(name string, topics []TopicMeta, include, exclude []string) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg, _, err := c.patternsLocked(name, include, exclude)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(topics))
	for i, tm := range topics {
		errs[i] = c.checkStartLocked(name, cfg, tm)
	}
	return errs, nil
}

func (c *Controller) checkStartLocked(name string, cfg MirrorConfig, tm TopicMeta) error {
	if NeverMirrored(tm.Name) {
		return admin.Errorf(admin.CodeInvalidRequest, "topic %q is an internal topic: a topic whose name starts with \"__\" is never mirrored", tm.Name)
	}
	if cfg.ExcludesTopic(tm.Name) {
		return admin.Errorf(admin.CodeInvalidRequest, "topic %q matches the exclude patterns of mirror %q", tm.Name, name)
	}
	if other, ok := c.byID[tm.TopicID]; ok && other != tm.Name {
		return admin.Errorf(admin.CodeTopicAlreadyExists, "topic id %s is already used by topic %q", tm.TopicID, other)
	}
	t, ok := c.topics[tm.Name]
	if !ok {
		return nil
	}
	if t.TopicID != tm.TopicID {
		return admin.Errorf(admin.CodeTopicAlreadyExists, "topic %q exists with topic id %s, not %s", tm.Name, t.TopicID, tm.TopicID)
	}
	if t.Mirror != name && t.Mirror != "" && t.Desired != statemachine.DesiredStopped {
		return admin.Errorf(admin.CodeInvalidClusterMirrorStates, "topic %q is %s in mirror %q", tm.Name, t.Desired, t.Mirror)
	}
	if t.Mirror == name && t.Desired == statemachine.DesiredPaused {
		return admin.Errorf(admin.CodeInvalidClusterMirrorStates, "topic %q is PAUSED in mirror %q: resume it instead", tm.Name, name)
	}
	return nil
}

func (c *Controller) alreadyMirroringLocked(name, topic string) bool {
	t, ok := c.topics[topic]
	return ok && t.Mirror == name && t.Desired == statemachine.DesiredMirroring
}

// StopTopics sets the desired state of topics of mirror name to STOPPED (failover, spec
// §14.3). patterns are removed from the mirror's include patterns and added to its
// exclude patterns, and every topic of the mirror they match is stopped too. stateOffset
// (-1 = no check) fences against a concurrent change: a topic whose last state record is
// newer is refused with INVALID_CLUSTER_MIRROR_STATES. A topic already STOPPED succeeds
// with no change.
func (c *Controller) StopTopics(ctx context.Context, name string, topics, patterns []string, stateOffset int64) ([]TopicResult, error) {
	match, err := NewTopicMatcher(patterns, nil)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, raw, err := c.patternsLocked(name, nil, patterns)
	if err != nil {
		return nil, err
	}
	var recs []records.ControllerRecord
	names := append([]string(nil), topics...)
	if raw != nil {
		recs = append(recs, mirrorRecord(name, raw))
		asked := setOf(names)
		for _, t := range c.topics {
			if t.Mirror == name && match.Includes(t.Topic) && !asked[t.Topic] {
				names = append(names, t.Topic)
			}
		}
		sort.Strings(names[len(topics):])
	}
	results := make([]TopicResult, 0, len(names))
	for _, topic := range names {
		t, err := c.mirrorTopicLocked(name, topic, stateOffset)
		if err == nil {
			switch t.Desired {
			case statemachine.DesiredStopped:
			case statemachine.DesiredMirroring, statemachine.DesiredPaused:
				recs = append(recs, topicRecord(topic, t.TopicID, name, statemachine.DesiredStopped))
			default:
				err = admin.Errorf(admin.CodeInvalidClusterMirrorStates, "topic %q is %s, not MIRRORING or PAUSED", topic, t.Desired)
			}
		}
		results = append(results, TopicResult{Topic: topic, Err: err})
	}
	if err := c.commitLocked(ctx, recs); err != nil {
		return nil, err
	}
	return results, nil
}

// PauseTopics sets the desired state of MIRRORING topics of mirror name to PAUSED
// (spec §14.4); any other desired state is INVALID_CLUSTER_MIRROR_STATES.
func (c *Controller) PauseTopics(ctx context.Context, name string, topics []string, stateOffset int64) ([]TopicResult, error) {
	return c.flip(ctx, name, topics, stateOffset, statemachine.DesiredMirroring, statemachine.DesiredPaused)
}

// ResumeTopics sets the desired state of PAUSED topics of mirror name back to MIRRORING
// (spec §14.5); any other desired state is INVALID_CLUSTER_MIRROR_STATES.
func (c *Controller) ResumeTopics(ctx context.Context, name string, topics []string, stateOffset int64) ([]TopicResult, error) {
	return c.flip(ctx, name, topics, stateOffset, statemachine.DesiredPaused, statemachine.DesiredMirroring)
}

func (c *Controller) flip(ctx context.Context, name string, topics []string, stateOffset int64, from, to statemachine.Desired) ([]TopicResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mirrors[name]; !ok {
		return nil, UnknownMirror(name)
	}
	var recs []records.ControllerRecord
	results := make([]TopicResult, 0, len(topics))
	for _, topic := range topics {
		t, err := c.mirrorTopicLocked(name, topic, stateOffset)
		if err == nil && t.Desired != from {
			err = admin.Errorf(admin.CodeInvalidClusterMirrorStates, "topic %q is %s, not %s", topic, t.Desired, from)
		}
		if err == nil {
			recs = append(recs, topicRecord(topic, t.TopicID, name, to))
		}
		results = append(results, TopicResult{Topic: topic, Err: err})
	}
	if err := c.commitLocked(ctx, recs); err != nil {
		return nil, err
	}
	return results, nil
}

// DeleteMirror removes mirror name (spec §14.6): every topic of it must be desired
// STOPPED, else INVALID_CLUSTER_MIRROR_STATES; the stopped topics are dissociated and the
// definition removed, in one atomic append.
func (c *Controller) DeleteMirror(ctx context.Context, name string, stateOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mirrors[name]; !ok {
		return UnknownMirror(name)
	}
	var recs []records.ControllerRecord
	var busy []string
	for _, t := range c.sortedTopicsLocked() {
		if t.Mirror != name {
			continue
		}
		if stateOffset >= 0 && t.StateOffset > stateOffset {
			return admin.Errorf(admin.CodeInvalidClusterMirrorStates, "topic %q changed at offset %d after the validated offset %d", t.Topic, t.StateOffset, stateOffset)
		}
		if t.Desired != statemachine.DesiredStopped {
			busy = append(busy, fmt.Sprintf("%s (%s)", t.Topic, t.Desired))
			continue
		}
		recs = append(recs, topicRecord(t.Topic, t.TopicID, "", statemachine.DesiredUnknown))
	}
	if len(busy) > 0 {
		return admin.Errorf(admin.CodeInvalidClusterMirrorStates, "cluster mirror %q still has topics that are not STOPPED: %s", name, strings.Join(busy, ", "))
	}
	recs = append(recs, records.ControllerRecord{MirrorTombstone: name})
	return c.commitLocked(ctx, recs)
}

func (c *Controller) mirrorTopicLocked(name, topic string, stateOffset int64) (*TopicState, error) {
	t, ok := c.topics[topic]
	if !ok || t.Mirror != name {
		return nil, admin.Errorf(admin.CodeUnknownTopicOrPartition, "topic %q is not a topic of mirror %q", topic, name)
	}
	if stateOffset >= 0 && t.StateOffset > stateOffset {
		return nil, admin.Errorf(admin.CodeInvalidClusterMirrorStates, "topic %q changed at offset %d after the validated offset %d", topic, t.StateOffset, stateOffset)
	}
	return t, nil
}

func (c *Controller) sortedTopicsLocked() []*TopicState {
	out := make([]*TopicState, 0, len(c.topics))
	for _, t := range c.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// commitLocked appends recs durably, then applies them and tells the watchers (with
// c.mu held, see Watch).
func (c *Controller) commitLocked(ctx context.Context, recs []records.ControllerRecord) error {
	if len(recs) == 0 {
		return nil
	}
	first, err := c.log.Append(ctx, recs)
	if err != nil {
		return admin.Errorf(admin.CodeNotController, "controller log append failed: %v", err)
	}
	var changed []TopicState
	for i, r := range recs {
		if err := c.replay(first+int64(i), r); err != nil {
			return err
		}
		if r.TopicState != nil {
			changed = append(changed, *c.topics[r.TopicState.TopicName])
		}
	}
	watchers := append(([]func(TopicState))(nil), c.watchers...)
	for _, ts := range changed {
		for _, w := range watchers {
			w(ts)
		}
	}
	return nil
}

// replay applies one record; it is the only mutation of the controller's state.
func (c *Controller) replay(off int64, r records.ControllerRecord) error {
	switch {
	case r.Mirror != nil:
		raw := map[string]string{}
		for _, e := range r.Mirror.Configs {
			if e.Value != nil {
				raw[e.Name] = *e.Value
			}
		}
		cfg, err := ParseMirrorConfig(raw)
		if err == nil {
			raw, err = CanonicalMirrorConfigs(raw) // records written before the aliases
		}
		if err != nil {
			return fmt.Errorf("mirror: controller record at offset %d: %w", off, err)
		}
		c.mirrors[r.Mirror.MirrorName] = &MirrorInfo{Name: r.Mirror.MirrorName, Configs: raw, Config: cfg}
	case r.MirrorTombstone != "":
		delete(c.mirrors, r.MirrorTombstone)
	case r.TopicState != nil:
		ts := r.TopicState
		if old, ok := c.topics[ts.TopicName]; ok && old.TopicID != ts.TopicID {
			delete(c.byID, old.TopicID)
		}
		var approvals []Approval
		for _, a := range ts.Approvals {
			approvals = append(approvals, Approval{Partition: a.Partition, From: a.RemovedFrom, To: a.RemovedTo})
		}
		c.topics[ts.TopicName] = &TopicState{
			Topic: ts.TopicName, TopicID: ts.TopicID, Mirror: ts.MirrorName,
			Desired: statemachine.Desired(ts.DesiredState), StateOffset: off, Approvals: approvals,
		}
		c.byID[ts.TopicID] = ts.TopicName
	default:
		return fmt.Errorf("mirror: empty controller record at offset %d", off)
	}
	if off > c.last {
		c.last = off
	}
	return nil
}

func mirrorRecord(name string, raw map[string]string) records.ControllerRecord {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	entries := make([]records.ConfigEntry, 0, len(keys))
	for _, k := range keys {
		v := raw[k]
		entries = append(entries, records.ConfigEntry{Name: k, Value: &v})
	}
	return records.ControllerRecord{Mirror: &records.ClusterMirrorRecord{MirrorName: name, Configs: entries}}
}

func topicRecord(topic string, id records.UUID, mirror string, d statemachine.Desired) records.ControllerRecord {
	return topicRecordWith(topic, id, mirror, d, nil)
}

// topicRecordWith is topicRecord with the approvals of a start (Approval).
func topicRecordWith(topic string, id records.UUID, mirror string, d statemachine.Desired, approvals []Approval) records.ControllerRecord {
	var ra []records.RemovalApproval
	for _, a := range approvals {
		ra = append(ra, records.RemovalApproval{Partition: a.Partition, RemovedFrom: a.From, RemovedTo: a.To})
	}
	return records.ControllerRecord{TopicState: &records.MirrorTopicStateChangeRecord{
		TopicID: id, TopicName: topic, MirrorName: mirror, DesiredState: int8(d), Approvals: ra,
	}}
}

// ApproveRemovals records approvals with topic of mirror name, desired MIRRORING
// (a recover allowed to remove this site's records, RecoverOptions.AllowTruncation):
// each replaces the partition's earlier one; the desired state does not change.
// stateOffset (-1 = no check) fences as in StopTopics. A topic of another mirror is
// UNKNOWN_TOPIC_OR_PARTITION, one not desired MIRRORING INVALID_CLUSTER_MIRROR_STATES.
func (c *Controller) ApproveRemovals(ctx context.Context, name, topic string, approvals []Approval, stateOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.mirrorTopicLocked(name, topic, stateOffset)
	if err != nil {
		return err
	}
	if t.Desired != statemachine.DesiredMirroring {
		return admin.Errorf(admin.CodeInvalidClusterMirrorStates, "topic %q is %s, not MIRRORING", topic, t.Desired)
	}
	if len(approvals) == 0 {
		return nil
	}
	by := map[int32]Approval{}
	for _, a := range t.Approvals {
		by[a.Partition] = a
	}
	for _, a := range approvals {
		by[a.Partition] = a
	}
	merged := make([]Approval, 0, len(by))
	for _, a := range by {
		merged = append(merged, a)
	}
	sort.Slice(merged, func(i, j int) bool { return merged[i].Partition < merged[j].Partition })
	return c.commitLocked(ctx, []records.ControllerRecord{topicRecordWith(topic, t.TopicID, name, t.Desired, merged)})
}

// ClearApproval removes the approval of one partition of topic (mirror name) once its
// PREPARING used it (or found nothing to remove): an approval licenses one removal. No
// approval, or a topic no longer of the mirror, is no change.
func (c *Controller) ClearApproval(ctx context.Context, name, topic string, partition int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[topic]
	if !ok || t.Mirror != name {
		return nil
	}
	if _, ok := t.Approval(partition); !ok {
		return nil
	}
	var kept []Approval
	for _, a := range t.Approvals {
		if a.Partition != partition {
			kept = append(kept, a)
		}
	}
	return c.commitLocked(ctx, []records.ControllerRecord{topicRecordWith(topic, t.TopicID, name, t.Desired, kept)})
}

// UnknownMirror is the UNKNOWN_CLUSTER_MIRROR error of a mirror name that is not
// defined.
func UnknownMirror(name string) error {
	return admin.Errorf(admin.CodeUnknownClusterMirror, "cluster mirror %q does not exist", name)
}

// ValidatePatterns checks topic patterns of a lifecycle operation: each a valid regular
// expression without a comma, else an INVALID_REQUEST error naming it.
func ValidatePatterns(a, b []string) error {
	for _, p := range append(append([]string(nil), a...), b...) {
		if err := validateRegexList(p); err != nil || strings.Contains(p, ",") {
			return admin.Errorf(admin.CodeInvalidRequest, "invalid topic pattern %q", p)
		}
	}
	return nil
}

// patternsLocked returns the config of mirror name with include and exclude patterns
// added (withPatterns) and its raw configs, nil when there are no patterns (the config
// is then the mirror's own). Unknown mirror: UNKNOWN_CLUSTER_MIRROR; a bad pattern:
// INVALID_REQUEST (ValidatePatterns).
func (c *Controller) patternsLocked(name string, include, exclude []string) (MirrorConfig, map[string]string, error) {
	if err := ValidatePatterns(include, exclude); err != nil {
		return MirrorConfig{}, nil, err
	}
	m, ok := c.mirrors[name]
	if !ok {
		return MirrorConfig{}, nil, UnknownMirror(name)
	}
	if len(include) == 0 && len(exclude) == 0 {
		return m.Config, nil, nil
	}
	raw := withPatterns(m, include, exclude)
	cfg, err := ParseMirrorConfig(raw)
	if err != nil {
		return MirrorConfig{}, nil, err
	}
	return cfg, raw, nil
}

// withPatterns returns m's raw configs with include patterns added to its topic includes
// and exclude patterns added to its excludes; a pattern added to one list leaves the other.
func withPatterns(m *MirrorInfo, include, exclude []string) map[string]string {
	raw := dest.CloneConfigs(m.Configs)
	raw[KeyTopicsInclude] = joinList(removeAll(addAll(m.Config.TopicsInclude, include), exclude))
	raw[KeyTopicsExclude] = joinList(removeAll(addAll(m.Config.TopicsExclude, exclude), include))
	return raw
}

func addAll(list, add []string) []string {
	out := append([]string(nil), list...)
	for _, a := range add {
		if !contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

func removeAll(list, rm []string) []string {
	var out []string
	for _, a := range list {
		if !contains(rm, a) {
			out = append(out, a)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, a := range list {
		if a == s {
			return true
		}
	}
	return false
}

func joinList(l []string) string { return strings.Join(l, ",") }

// MemoryControllerLog is an in-memory ControllerLog for tests and single-process hosts
// that do not need the desired state to survive a restart. Safe for concurrent use.
type MemoryControllerLog struct {
	mu   sync.Mutex
	recs []records.ControllerRecord
	// FailAppends makes the next appends fail while it is > 0 (fault injection).
	FailAppends int
}

// Load replays every appended record.
func (l *MemoryControllerLog) Load(ctx context.Context, fn func(int64, records.ControllerRecord) error) error {
	l.mu.Lock()
	recs := append([]records.ControllerRecord(nil), l.recs...)
	l.mu.Unlock()
	for i, r := range recs {
		if err := fn(int64(i), r); err != nil {
			return err
		}
	}
	return nil
}

// Append stores recs and returns the offset of the first.
func (l *MemoryControllerLog) Append(ctx context.Context, recs []records.ControllerRecord) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.FailAppends > 0 {
		l.FailAppends--
		return 0, fmt.Errorf("mirror: injected controller log failure")
	}
	first := int64(len(l.recs))
	l.recs = append(l.recs, recs...)
	return first, nil
}

// Close does nothing.
func (l *MemoryControllerLog) Close() error { return nil }

// FullTruncation reports, for one partition, a full truncation of its destination log
// by PREPARING (spec §6.3 step 5) before it happens: the log [LogStart, LogEnd) is
// emptied and mirrored again from the source's log start. The offsets below
// SourceLogStart are gone from the source (its retention removed them), so the
// truncation discards [LostFrom, LostTo) for good.
type FullTruncation struct {
	Partition int32
	// LogStart and LogEnd bound the destination log that is truncated.
	LogStart, LogEnd int64
	// SourceLogStart is the source partition's log start offset (-1 when the source
	// could not be asked).
	SourceLogStart int64
	// LostFrom and LostTo bound the offsets discarded for good:
	// [LogStart, min(LogEnd, SourceLogStart)), empty when the source still has them all,
	// the whole [LogStart, LogEnd) when SourceLogStart is unknown.
	LostFrom, LostTo int64
}

// Lost is the number of offsets the truncation discards for good.
func (f FullTruncation) Lost() int64 { return max(0, f.LostTo-f.LostFrom) }

// setOf is the set of list's strings.
func setOf(list []string) map[string]bool {
	set := make(map[string]bool, len(list))
	for _, s := range list {
		set[s] = true
	}
	return set
}
