package metasync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/statemachine"
)

// DefaultSyncInterval is the default period of the metadata sync
// (mirror.metadata.refresh.interval.ms, spec §17).
const DefaultSyncInterval = 30 * time.Second

// keyRemoteStorageEnable is the topic config of tiered storage, never synced.
const keyRemoteStorageEnable = "remote.storage.enable"

// Sync errors; each per-topic or per-group failure is a *SyncError wrapping one of these
// or the failing call's error.
var (
	// ErrSourceTopicRecreated: the source topic's id differs from the mirror topic's (it
	// was deleted and recreated at the source). It is never recreated silently; the
	// operator must stop the mirror topic.
	ErrSourceTopicRecreated = errors.New("mirror: source topic recreated with another topic id")
	// ErrSourceTopicMissing: a MIRRORING topic no longer exists at the source (deletion
	// is not propagated, spec §1.4).
	ErrSourceTopicMissing = errors.New("mirror: source topic missing")
	// ErrDestinationTopicMismatch: the destination topic has another topic id than the
	// mirror topic.
	ErrDestinationTopicMismatch = errors.New("mirror: destination topic id mismatch")
)

// SyncError is one failure of a sync cycle, about one topic or one group.
type SyncError struct {
	Mirror string
	Op     string // "discover", "topic", "create", "partitions", "configs", "group", "share-group", "acls"
	Topic  string // "" for a group error
	Group  string // "" for a topic error
	Err    error
}

// Error implements error.
func (e *SyncError) Error() string {
	subject := "topic " + e.Topic
	if e.Group != "" {
		subject = "group " + e.Group
	}
	return fmt.Sprintf("mirror: sync %s of mirror %q, %s: %v", e.Op, e.Mirror, subject, e.Err)
}

// Unwrap returns the cause.
func (e *SyncError) Unwrap() error { return e.Err }

// SyncStats reports one sync cycle.
type SyncStats struct {
	TopicsDiscovered int // topics started by auto-discovery
	// InternalTopicsStopped are topics the mirror had started that are never mirrored
	// (controller.NeverMirrored), stopped by the cycle.
	InternalTopicsStopped int
	TopicsCreated         int // destination topics created
	PartitionsGrown       int // partitions added to destination topics
	ConfigsChanged        int // topic config values altered on the destination
	GroupsSynced          int // groups with at least one offset committed
	OffsetsSynced         int // partition offsets committed
	GroupsSkipped         int // groups skipped because they have active members on the destination
	ACLsSynced            int // ACLs of the mirror on the destination after the cycle (acls.include)
	// ShareGroupsSynced, ShareOffsetsSynced and ShareGroupsSkipped are the share-group
	// counterparts of the three group counters (sharegroups.go).
	ShareGroupsSynced  int
	ShareOffsetsSynced int
	ShareGroupsSkipped int
	// Errors are the per-topic and per-group failures (*SyncError); they do not stop
	// the cycle.
	Errors []error
	// Conditions are the repeating conditions that held in the cycle
	// (ConditionACLsSecurityDisabled); they are not Errors.
	Conditions []string
}

// SyncConfig configures a Syncer.
type SyncConfig struct {
	// Mirror is the name of the mirror to sync (required).
	Mirror string
	// Controller holds the mirror's definition and topics (required).
	Controller *controller.Controller
	// Source is the mirror's source cluster (required).
	Source SourceAdmin
	// Destination is the local cluster (required). Group offsets are synced only when it
	// implements GroupOffsets.
	Destination dest.Destination
	// Logger receives per-topic and per-group events; default: discard.
	Logger *slog.Logger
	// Mirroring optionally reports whether a partition is actually MIRRORING; the
	// share-group sync skips the others (sharegroups.go). Nil: every partition of a
	// healthy MIRRORING topic counts.
	Mirroring func(topic string, partition int32) bool
	// Observer, when set, is told when a repeating condition starts, holds and ends.
	Observer ConditionObserver
	// ConditionRecheck is how often the source is asked again while a condition holds;
	// 0 = DefaultConditionRecheck.
	ConditionRecheck time.Duration
	// Clock; nil = time.Now.
	Clock func() time.Time
	// Groups, when set, is what serves the destination's groups to clients
	// (a dataplane.DataPlane): a group it reports active is not synced, and
	// a group's offsets are committed only while it has no member. The
	// Destination's own HasActiveMembers is asked too.
	Groups GroupGuard
}

// GroupGuard is implemented by what holds the membership of the
// destination's consumer groups (dataplane.DataPlane). The offset sync never
// writes the offsets of a group that has members on the destination (any
// state other than Empty and Dead): they are the members' own. It resumes
// once the group empties.
type GroupGuard interface {
	// GroupActive reports whether group has members.
	GroupActive(group string) bool
	// CommitIfInactive runs commit unless group has members, keeping
	// members from joining until commit returns; it reports whether commit
	// ran, and its error.
	CommitIfInactive(group string, commit func() error) (bool, error)
}

// Validate checks cfg; it never changes it (zero values stand for the defaults).
func (cfg SyncConfig) Validate() error {
	var problems []string
	if cfg.Mirror == "" {
		problems = append(problems, "Mirror is required")
	}
	if cfg.Controller == nil {
		problems = append(problems, "Controller is required")
	}
	if cfg.Source == nil {
		problems = append(problems, "Source is required")
	}
	if cfg.Destination == nil {
		problems = append(problems, "Destination is required")
	}
	if len(problems) > 0 {
		return fmt.Errorf("mirror: sync config: %s", strings.Join(problems, "; "))
	}
	return nil
}

// withDefaults returns cfg with every unset field at its default.
func (cfg SyncConfig) withDefaults() SyncConfig {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConditionRecheck <= 0 {
		cfg.ConditionRecheck = DefaultConditionRecheck
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return cfg
}

// Syncer runs the source synchronisation of one mirror (spec §17): discovery of new
// source topics, creation and partition growth of destination topics, topic config sync
// and consumer-group offset sync. SyncOnce runs one cycle; the Mirror's engine
// (internal/reconcile) schedules them, so there is one sync loop. Cycles are serialized;
// a Syncer is safe for concurrent use.
type Syncer struct {
	cfg SyncConfig
	mu  sync.Mutex // serializes cycles; guards the conditions below
	// aclsOff is ConditionACLsSecurityDisabled.
	aclsOff condition
	// failing are the failures of the last cycles, by op, topic, group and text;
	// errorsCond is ConditionSyncErrors.
	failing    map[string]*failure
	errorsCond condition
}

// NewSyncer validates cfg and returns a Syncer.
func NewSyncer(cfg SyncConfig) (*Syncer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Syncer{cfg: cfg.withDefaults(), failing: map[string]*failure{}}, nil
}

// cycle is the state of one SyncOnce.
type cycle struct {
	s     *Syncer
	cfg   controller.MirrorConfig
	stats SyncStats
	log   *slog.Logger
	// source topics by name
	src map[string]SourceTopic
	// healthy MIRRORING topics (source id = mirror id, destination topic present)
	healthy map[string]bool
	// seen are the failures of this cycle (keys of Syncer.failing)
	seen map[string]bool
}

// fail records a failure of the cycle in its stats. The log has it once, when it starts:
// the same failure (op, topic, group and text) in the next cycles is counted, not
// logged again, and its end is logged with the number of cycles it lasted (settle).
func (c *cycle) fail(op, topic, group string, err error) {
	e := &SyncError{Mirror: c.s.cfg.Mirror, Op: op, Topic: topic, Group: group, Err: err}
	c.stats.Errors = append(c.stats.Errors, e)
	key := op + "\x00" + topic + "\x00" + group + "\x00" + err.Error()
	c.seen[key] = true
	if f, ok := c.s.failing[key]; ok {
		f.cycles++
		return
	}
	c.s.failing[key] = &failure{err: e, cycles: 1}
	c.log.Warn("mirror sync error", "op", op, "topic", topic, "group", group, "err", err)
}

// failure is a sync failure that held in consecutive cycles.
type failure struct {
	err    *SyncError
	cycles int64
}

// settle ends, at the end of a complete cycle, the failures it did not see again, and
// reports ConditionSyncErrors to the Observer.
func (c *cycle) settle() {
	for key, f := range c.s.failing {
		if c.seen[key] {
			continue
		}
		delete(c.s.failing, key)
		c.log.Info("mirror sync error resolved", "op", f.err.Op, "topic", f.err.Topic, "group", f.err.Group,
			"cycles", f.cycles, "err", f.err.Err)
	}
	cond := &c.s.errorsCond
	switch {
	case len(c.s.failing) > 0:
		cond.active = true
		cond.cycles++
		c.observe(ConditionSyncErrors, true, cond.cycles)
	case cond.active:
		cond.active = false
		c.observe(ConditionSyncErrors, false, cond.cycles)
		cond.cycles = 0
	}
}

// SyncOnce runs one sync cycle. The returned error is a failure of the whole cycle (the
// mirror is unknown, the source cannot be listed); per-topic and per-group failures are
// in SyncStats.Errors.
func (s *Syncer) SyncOnce(ctx context.Context) (SyncStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.cfg.Controller.Mirror(s.cfg.Mirror)
	if !ok {
		return SyncStats{}, controller.UnknownMirror(s.cfg.Mirror)
	}
	c := &cycle{s: s, cfg: m.Config, log: s.cfg.Logger.With("mirror", s.cfg.Mirror), healthy: map[string]bool{}, seen: map[string]bool{}}
	topics, err := s.cfg.Source.ListTopics(ctx)
	if err != nil {
		return c.stats, fmt.Errorf("mirror: sync of mirror %q: list source topics: %w", s.cfg.Mirror, err)
	}
	c.src = make(map[string]SourceTopic, len(topics))
	for _, t := range topics {
		c.src[t.Name] = t
	}
	if err := c.stopNeverMirrored(ctx); err != nil {
		return c.stats, err
	}
	if err := c.discover(ctx, topics); err != nil {
		return c.stats, err
	}
	if err := ctx.Err(); err != nil {
		return c.stats, err
	}
	c.syncTopics(ctx)
	if err := ctx.Err(); err != nil {
		return c.stats, err
	}
	c.syncGroups(ctx)
	if err := ctx.Err(); err != nil {
		return c.stats, err
	}
	c.syncShareGroups(ctx)
	if err := ctx.Err(); err != nil {
		return c.stats, err
	}
	c.syncACLs(ctx)
	if err := ctx.Err(); err != nil {
		return c.stats, err
	}
	c.settle()
	return c.stats, nil
}

// discover starts, in one controller append, every source topic that matches the
// mirror's include/exclude patterns (internal topics never) and that the controller does
// not know yet. Topics the controller already knows (in this mirror in any state, in
// another mirror, or dissociated after a failover) are left alone: restarting them is an
// operator decision.
func (c *cycle) discover(ctx context.Context, topics []SourceTopic) error {
	var metas []controller.TopicMeta
	for _, t := range topics {
		if t.Internal || !c.cfg.IncludesTopic(t.Name) {
			continue
		}
		if _, known := c.s.cfg.Controller.Topic(t.Name); known {
			continue
		}
		metas = append(metas, controller.TopicMeta{Name: t.Name, TopicID: t.TopicID, NumPartitions: t.Partitions})
	}
	if len(metas) == 0 {
		return nil
	}
	results, err := c.s.cfg.Controller.StartTopics(ctx, c.s.cfg.Mirror, metas, nil, nil)
	if err != nil {
		return fmt.Errorf("mirror: sync of mirror %q: start discovered topics: %w", c.s.cfg.Mirror, err)
	}
	for _, r := range results {
		if r.Err != nil {
			c.fail("discover", r.Topic, "", r.Err)
			continue
		}
		c.stats.TopicsDiscovered++
		c.log.Info("mirror topic discovered", "topic", r.Topic)
	}
	return nil
}

// stopNeverMirrored stops, in one controller change, the topics of the mirror that no
// mirror may mirror (controller.NeverMirrored: an internal topic an earlier version
// discovered when topics.exclude replaced the built-in exclusion), so that they are
// fetched no longer.
func (c *cycle) stopNeverMirrored(ctx context.Context) error {
	var names []string
	for _, ts := range c.s.cfg.Controller.Topics(c.s.cfg.Mirror) {
		if controller.NeverMirrored(ts.Topic) && ts.Desired != statemachine.DesiredStopped {
			names = append(names, ts.Topic)
		}
	}
	if len(names) == 0 {
		return nil
	}
	results, err := c.s.cfg.Controller.StopTopics(ctx, c.s.cfg.Mirror, names, nil, -1)
	if err != nil {
		return fmt.Errorf("mirror: sync of mirror %q: stop internal topics: %w", c.s.cfg.Mirror, err)
	}
	for _, r := range results {
		if r.Err != nil {
			c.fail("discover", r.Topic, "", r.Err)
			continue
		}
		c.stats.InternalTopicsStopped++
		c.log.Warn("internal topic mirrored by an earlier version stopped: a topic whose name starts with \"__\" is never mirrored", "topic", r.Topic)
	}
	return nil
}

// syncTopics creates, grows and configures the destination topic of every MIRRORING
// topic of the mirror.
func (c *cycle) syncTopics(ctx context.Context) {
	d := c.s.cfg.Destination
	mirroring := c.mirroringTopics()
	var names []string
	for _, ts := range mirroring {
		st, ok := c.src[ts.Topic]
		if !ok {
			c.fail("topic", ts.Topic, "", ErrSourceTopicMissing)
			continue
		}
		if st.TopicID != ts.TopicID {
			c.fail("topic", ts.Topic, "", fmt.Errorf("%w: mirror topic id %s, source topic id %s", ErrSourceTopicRecreated, ts.TopicID, st.TopicID))
			continue
		}
		names = append(names, ts.Topic)
	}
	srcConfigs, cfgErr := c.s.cfg.Source.TopicConfigs(ctx, names)
	for _, name := range names {
		st := c.src[name]
		cfgs, haveCfgs := srcConfigs[name]
		if !haveCfgs {
			err := topicErr(cfgErr, name)
			if err == nil {
				err = fmt.Errorf("%w: no configs returned for the topic", ErrSourceAdmin)
			}
			c.fail("configs", name, "", err)
		}
		synced := filterTopicConfigs(cfgs, c.cfg)
		dt, ok := d.Topic(name)
		if !ok {
			if !haveCfgs {
				continue // created with its configs (KAFKA-12254) once they can be read
			}
			spec := dest.TopicSpec{Name: name, TopicID: st.TopicID, Partitions: st.Partitions, Configs: synced}
			if err := dest.CheckReplicationFactor(d, name); err != nil {
				c.fail("create", name, "", err)
				continue
			}
			if err := d.CreateTopic(ctx, spec); err != nil {
				c.fail("create", name, "", err)
				continue
			}
			c.stats.TopicsCreated++
			c.log.Info("destination topic created", "topic", name, "partitions", st.Partitions, "configs", len(synced))
			c.healthy[name] = true
			continue
		}
		if dt.TopicID != st.TopicID {
			c.fail("create", name, "", fmt.Errorf("%w: destination topic id %s, source topic id %s", ErrDestinationTopicMismatch, dt.TopicID, st.TopicID))
			continue
		}
		c.healthy[name] = true
		switch {
		case st.Partitions > dt.Partitions:
			if err := d.CreatePartitions(ctx, name, st.Partitions); err != nil {
				c.fail("partitions", name, "", err)
			} else {
				c.stats.PartitionsGrown += int(st.Partitions - dt.Partitions)
				c.log.Info("destination partitions grown", "topic", name, "from", dt.Partitions, "to", st.Partitions)
			}
		case st.Partitions < dt.Partitions:
			c.log.Warn("source topic has fewer partitions than the destination", "topic", name, "source", st.Partitions, "destination", dt.Partitions)
		}
		if haveCfgs {
			changed := map[string]string{}
			for k, v := range synced {
				if cur, ok := dt.Configs[k]; !ok || cur != v {
					changed[k] = v
				}
			}
			if dt.Configs[keyRemoteStorageEnable] == "true" && cfgs[keyRemoteStorageEnable] == "true" {
				// Copied from the tiered source before the config was never synced: a mirror
				// topic's log stays local, so it is turned off (and a partition FAILED for it
				// can be recovered).
				changed[keyRemoteStorageEnable] = "false"
				c.log.Warn("tiered storage copied from the source turned off on the mirror topic", "topic", name, "config", keyRemoteStorageEnable)
			}
			if len(changed) == 0 {
				continue
			}
			if err := d.AlterTopicConfigs(ctx, name, changed); err != nil {
				c.fail("configs", name, "", err)
				continue
			}
			c.stats.ConfigsChanged += len(changed)
			c.log.Info("destination topic configs synced", "topic", name, "changed", sortedKeys(changed))
		}
	}
}

// mirroringTopics returns the topics of the mirror whose desired state is MIRRORING.
func (c *cycle) mirroringTopics() []controller.TopicState {
	var out []controller.TopicState
	for _, ts := range c.s.cfg.Controller.Topics(c.s.cfg.Mirror) {
		if ts.Desired == statemachine.DesiredMirroring {
			out = append(out, ts)
		}
	}
	return out
}

// syncGroups copies committed offsets of the mirror's groups for partitions of healthy
// MIRRORING topics: synced = max(destLogStart, min(sourceCommitted, destLEO)), never
// lower than what the destination group has committed, and never for groups with
// active members on the destination.
func (c *cycle) syncGroups(ctx context.Context) {
	g, ok := c.s.cfg.Destination.(dest.GroupOffsets)
	if !ok || len(c.healthy) == 0 {
		return
	}
	groups, err := c.s.cfg.Source.ListGroups(ctx)
	if err != nil {
		c.fail("group", "", "*", err)
		return
	}
	shareGroups := c.shareGroupNames(ctx) // synced by syncShareGroups
	for _, group := range groups {
		if ctx.Err() != nil {
			return
		}
		if !c.cfg.IncludesGroup(group) || shareGroups[group] {
			continue
		}
		if g.HasActiveMembers(group) || (c.s.cfg.Groups != nil && c.s.cfg.Groups.GroupActive(group)) {
			c.stats.GroupsSkipped++
			c.log.Info("group offset sync skipped: the group has active members on the destination", "group", group)
			continue
		}
		src, err := c.s.cfg.Source.GroupOffsets(ctx, group)
		if err != nil {
			c.fail("group", "", group, err)
			continue
		}
		have := g.CommittedOffsets(group)
		commit := map[dest.TopicPartition]int64{}
		for tp, committed := range src {
			if !c.healthy[tp.Topic] {
				continue
			}
			l, err := c.s.cfg.Destination.Log(tp.Topic, tp.Partition)
			if err != nil {
				continue // partition not created yet on the destination
			}
			synced := ClampGroupOffset(committed, l.LogStartOffset(), l.LogEndOffset())
			if cur, ok := have[tp]; ok && cur >= synced {
				continue // never rewind, and nothing to do when equal
			}
			commit[tp] = synced
		}
		if len(commit) == 0 {
			continue
		}
		ran, err := true, error(nil)
		if c.s.cfg.Groups != nil {
			ran, err = c.s.cfg.Groups.CommitIfInactive(group, func() error { return g.CommitOffsets(group, commit) })
		} else {
			err = g.CommitOffsets(group, commit)
		}
		if err != nil {
			c.fail("group", "", group, err)
			continue
		}
		if !ran {
			c.stats.GroupsSkipped++
			c.log.Info("group offset sync skipped: the group has active members on the destination", "group", group)
			continue
		}
		c.stats.GroupsSynced++
		c.stats.OffsetsSynced += len(commit)
		c.log.Debug("group offsets synced", "group", group, "partitions", len(commit))
	}
}

// ClampGroupOffset is the offset-sync clamp of spec §17:
// max(logStart, min(committed, logEnd)). A group is never placed beyond the mirrored
// data, nor before the destination's log start.
func ClampGroupOffset(committed, logStart, logEnd int64) int64 {
	return max(logStart, min(committed, logEnd))
}

// filterTopicConfigs returns cfgs minus the keys the mirror never syncs
// (MirrorConfig.SyncsTopicProperty: the built-in list and topic.properties.exclude).
func filterTopicConfigs(cfgs map[string]string, mc controller.MirrorConfig) map[string]string {
	out := make(map[string]string, len(cfgs))
	for k, v := range cfgs {
		if mc.SyncsTopicProperty(k) {
			out[k] = v
		}
	}
	return out
}

// topicErr returns the *SourceTopicError of topic within err (a join), else err.
func topicErr(err error, topic string) error {
	if err == nil {
		return nil
	}
	var te *SourceTopicError
	for _, e := range unwrapAll(err) {
		if errors.As(e, &te) && te.Topic == topic {
			return te
		}
	}
	return err
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
