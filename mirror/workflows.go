package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/reconcile"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/statemachine"
)

// CreateClusterMirror defines mirror name with the CLUSTER_MIRROR configs (spec §14.1).
// Errors: INVALID_CONFIG, an invalid name, CLUSTER_MIRROR_ALREADY_EXISTS (*admin.Error).
// When mirror.topics.include is set, the next sync cycle starts the matching topics.
func (m *Mirror) CreateClusterMirror(ctx context.Context, name string, configs map[string]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.isClosed() {
		return ErrClosed
	}
	if err := m.checkConnection(name, configs); err != nil {
		return err
	}
	if err := m.ctrl.CreateMirror(ctx, name, configs); err != nil {
		return err
	}
	m.ensureMirror(name)
	return nil
}

// StartMirrorTopics starts mirroring topics (and the source topics matching
// o.IncludePatterns and not o.ExcludePatterns) from mirror name's source (spec §14.2).
// It reads the topics' ids and partition counts from the source, checks the actual
// partition states of topics it already knows (start is allowed from UNKNOWN and STOPPED,
// a no-op on MIRRORING), creates the destination topics with the source topic ids and
// partition counts, and sets the desired state to MIRRORING. The reconcilers then run
// PREPARING (LME lookup and truncation) and MIRRORING.
//
// The error is for the whole request (UNKNOWN_CLUSTER_MIRROR, the source cannot be
// listed, invalid patterns); per-topic outcomes are in the results, one per topic, with
// Err nil or an *admin.Error (UNKNOWN_TOPIC_OR_PARTITION: not on the source;
// INVALID_CLUSTER_MIRROR_STATES naming the partition and its state; TOPIC_ALREADY_EXISTS;
// INVALID_REQUEST: excluded).
func (m *Mirror) StartMirrorTopics(ctx context.Context, name string, topics []string, o StartOptions) ([]TopicResult, error) {
	if err := m.checkRequest(ctx, name); err != nil {
		return nil, err
	}
	if err := controller.ValidatePatterns(o.IncludePatterns, o.ExcludePatterns); err != nil {
		return nil, err
	}
	mr := m.ensureMirror(name)
	if mr == nil {
		return nil, ErrClosed
	}
	_, sadmin, err := mr.Sources()
	if err != nil {
		return nil, err
	}
	src, err := sadmin.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("mirror: start topics of mirror %q: list source topics: %w", name, err)
	}
	mr.ResolveClusterID(ctx)
	names, err := startNames(topics, src, o)
	if err != nil {
		return nil, err
	}
	results, metas, plans, err := m.prepareStartTopics(ctx, mr, name, names, src, o)
	if err != nil {
		return nil, err
	}
	if o.ValidateOnly {
		return sortResults(results, names), nil
	}
	res, err := m.commitStartTopics(ctx, mr, name, metas, plans, o)
	if err != nil {
		return nil, err
	}
	results = append(results, res...)
	m.refresh()
	return sortResults(results, names), nil
}

// startNames is the topics a start asks for: topics, deduplicated, then every
// non-internal source topic the include patterns (and no exclude pattern) select.
func startNames(topics []string, src []metasync.SourceTopic, o StartOptions) ([]string, error) {
	names := dedupe(topics)
	if len(o.IncludePatterns) == 0 {
		return names, nil
	}
	asked := setOf(names)
	match, err := controller.NewTopicMatcher(o.IncludePatterns, o.ExcludePatterns)
	if err != nil {
		return nil, err
	}
	for _, t := range src {
		if !t.Internal && match.Includes(t.Name) && !asked[t.Name] {
			names = append(names, t.Name)
		}
	}
	return names, nil
}

// prepareStartTopics checks each topic of a start (on the source, the controller's
// checks, the actual states, the plan: a mirror loop, a removal of this site's records
// not allowed) and, unless o.ValidateOnly, creates or grows its destination topic. It
// returns the refused topics' results (with o.ValidateOnly every topic's, with its
// plan), the topics to start and their plans. A refused topic is left as it was.
func (m *Mirror) prepareStartTopics(ctx context.Context, mr *reconcile.Runtime, name string, names []string, src []metasync.SourceTopic,
	o StartOptions) ([]TopicResult, []TopicMeta, map[string][]PartitionPlan, error) {
	byName := make(map[string]metasync.SourceTopic, len(src))
	for _, t := range src {
		byName[t.Name] = t
	}
	results := make([]TopicResult, 0, len(names))
	var metas []TopicMeta
	plans := map[string][]PartitionPlan{}
	for _, topic := range names {
		st, ok := byName[topic]
		if !ok {
			results = append(results, TopicResult{Topic: topic,
				Err: admin.Errorf(admin.CodeUnknownTopicOrPartition, "topic %q does not exist on the source of mirror %q", topic, name)})
			continue
		}
		meta := TopicMeta{Name: topic, TopicID: st.TopicID, NumPartitions: st.Partitions}
		// The controller's checks first: a refused topic leaves no destination topic.
		checks, err := m.ctrl.CheckStart(name, []TopicMeta{meta}, o.IncludePatterns, o.ExcludePatterns)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := checks[0]; err != nil {
			results = append(results, TopicResult{Topic: topic, Err: err})
			continue
		}
		if err := m.checkActual(ctx, name, st.Name, statemachine.OpStart); err != nil {
			results = append(results, TopicResult{Topic: topic, Err: err})
			continue
		}
		// The plan before any change: a mirror loop or a removal of this site's
		// records refuses the topic here, while it is still writable.
		plan, err := m.planStart(ctx, mr, name, topic, o)
		if _, exists := m.dest.Topic(topic); !exists && err == nil {
			plan = newTopicPlan(st.Partitions)
			if o.ValidateOnly {
				err = CheckReplicationFactor(m.dest, topic) // what the creation checks first
			}
		}
		if err != nil || o.ValidateOnly {
			results = append(results, TopicResult{Topic: topic, Err: err, Plan: plan, Truncations: fullTruncations(plan)})
			continue
		}
		if err := m.createStartTopic(ctx, name, st); err != nil {
			results = append(results, TopicResult{Topic: topic, Err: err})
			continue
		}
		metas = append(metas, meta)
		plans[topic] = plan
	}
	return results, metas, plans, nil
}

// createStartTopic checks the actual states of topic st for a start, then creates its
// destination topic with the source's id, or grows it to the source's partition count.
func (m *Mirror) createStartTopic(ctx context.Context, name string, st metasync.SourceTopic) error {
	if err := m.checkActual(ctx, name, st.Name, statemachine.OpStart); err != nil {
		return err
	}
	if _, exists := m.dest.Topic(st.Name); !exists {
		// JR59.2: every replica placeable, or INVALID_REPLICATION_FACTOR before anything is created.
		if err := CheckReplicationFactor(m.dest, st.Name); err != nil {
			return err
		}
	}
	if err := m.dest.CreateTopic(ctx, TopicSpec{Name: st.Name, TopicID: st.TopicID, Partitions: st.Partitions}); err != nil {
		return asAdminError(err)
	}
	if spec, ok := m.dest.Topic(st.Name); ok && spec.Partitions < st.Partitions {
		if err := m.dest.CreatePartitions(ctx, st.Name, st.Partitions); err != nil {
			return asAdminError(err)
		}
	}
	return nil
}

// commitStartTopics makes the started topics read-only, checks that nothing was
// written since their plans (else plans them again and refuses a removal now
// disallowed), and records the start in the controller with, when o.AllowTruncation,
// the planned removals of this site's records as its approvals (controller.Approval). A topic refused here is made writable again as it was.
func (m *Mirror) commitStartTopics(ctx context.Context, mr *reconcile.Runtime, name string, metas []TopicMeta,
	plans map[string][]PartitionPlan, o StartOptions) ([]TopicResult, error) {
	if _, lazy := m.dest.(OpenLogs); !lazy {
		openLogs(m.dest, metas) // planMoved opens every log: open them in parallel first
	}
	// The read-only flags of every topic at once: a destination that makes
	// them durable by group commit (LocalDestination) then commits thousands
	// of partitions' flags in a few writes, where topic after topic it writes
	// a few per topic.
	flagsOf, errsOf := make([][]bool, len(metas)), make([]error, len(metas))
	var g errgroup.Group
	g.SetLimit(topicFlagWorkers)
	for i, t := range metas {
		g.Go(func() error {
			flagsOf[i], errsOf[i] = m.setTopicReadOnly(t.Name, true)
			return nil
		})
	}
	_ = g.Wait()
	var refused []TopicResult
	var ok []TopicMeta
	was := map[string][]bool{} // the read-only flags before, to give back on a refusal
	for i, t := range metas {
		flags, err := flagsOf[i], errsOf[i]
		was[t.Name] = flags
		if err == nil && planMoved(m.dest, t.Name, plans[t.Name]) {
			// Written between the plan and the read-only flag: plan again, now stable.
			plans[t.Name], err = m.planStart(ctx, mr, name, t.Name, o)
		}
		if err != nil {
			m.restoreReadOnly(t.Name, flags)
			refused = append(refused, TopicResult{Topic: t.Name, Err: err, Plan: plans[t.Name], Truncations: fullTruncations(plans[t.Name])})
			continue
		}
		if o.AllowTruncation {
			// Durable with the topic's MIRRORING record: a restart in PREPARING honours
			// it; PREPARING refuses any removal of this site's records it does not cover.
			t.Approvals = controller.ApprovalsOf(plans[t.Name])
		}
		mr.LogPlan(t.Name, plans[t.Name])
		ok = append(ok, t)
	}
	res, err := m.ctrl.StartTopics(ctx, name, ok, o.IncludePatterns, o.ExcludePatterns)
	if err != nil {
		for _, t := range ok {
			m.restoreReadOnly(t.Name, was[t.Name])
		}
		return nil, err
	}
	for i, r := range res {
		res[i].Plan, res[i].Truncations = plans[r.Topic], fullTruncations(plans[r.Topic])
		if r.Err != nil {
			m.restoreReadOnly(r.Topic, was[r.Topic])
		}
	}
	return append(refused, res...), nil
}

// openWorkers is how many logs openLogs opens at once: opening a partition's log
// creates its directory and files and fsyncs them, and the disk overlaps the fsyncs
// of many files where one after another they add up at thousands of partitions.
const openWorkers = 32

// openLogs opens the destination logs of every partition of topics, openWorkers at a
// time, for a Destination that cannot tell an open log (OpenLogs), before planMoved
// goes through them one by one. An open that fails is left to the partition's
// reconciler (which fails that partition alone, with the cause).
func openLogs(d Destination, topics []TopicMeta) {
	type part struct {
		topic string
		p     int32
	}
	work := make(chan part)
	var wg sync.WaitGroup
	for range openWorkers {
		wg.Go(func() {
			for w := range work {
				_, _ = d.Log(w.topic, w.p)
			}
		})
	}
	for _, t := range topics {
		spec, _ := d.Topic(t.Name)
		for p := range spec.Partitions {
			work <- part{t.Name, p}
		}
	}
	close(work)
	wg.Wait()
}

// setTopicReadOnly sets the read-only flag of every partition of topic and returns
// what each was before.
func (m *Mirror) setTopicReadOnly(topic string, ro bool) ([]bool, error) {
	spec, _ := m.dest.Topic(topic)
	was := make([]bool, spec.Partitions)
	err := eachPartition(spec.Partitions, func(p int32) error {
		// The destination's flag, which its logs follow (open or not): opening the
		// log is left to the partition's reconciler (a failed open fails it alone).
		was[p] = m.dest.ReadOnly(topic, p)
		return m.dest.SetReadOnly(topic, p, ro)
	})
	if err != nil {
		return was, asAdminError(err)
	}
	return was, nil
}

// restoreReadOnly gives the partitions of a refused topic back the flags in was
// (writable for the partitions was does not cover: partitions the start created, or
// whose log could not be opened).
func (m *Mirror) restoreReadOnly(topic string, was []bool) {
	spec, _ := m.dest.Topic(topic)
	_ = eachPartition(spec.Partitions, func(p int32) error {
		ro := int(p) < len(was) && was[p]
		if err := m.dest.SetReadOnly(topic, p, ro); err != nil {
			m.log.Warn("mirror: cannot restore the read-only flag of a refused start", "topic", topic, "partition", p, "err", err)
		}
		return nil
	})
}

// flagWorkers is how many read-only flags eachPartition sets at once: a
// destination that makes each flag durable (LocalDestination) commits the
// flags set while a write is in flight together, so thousands of partitions
// cost a few writes, where one after another they cost one each.
const flagWorkers = 64

// topicFlagWorkers is how many topics' read-only flags a start sets at once
// (each flagWorkers partitions at a time).
const topicFlagWorkers = 16

// eachPartition calls f for partitions 0..n-1, flagWorkers at a time, and
// returns the first error (every call is made).
func eachPartition(n int32, f func(p int32) error) error {
	var g errgroup.Group
	g.SetLimit(flagWorkers)
	for p := int32(0); p < n; p++ {
		g.Go(func() error { return f(p) })
	}
	return g.Wait()
}

// planMoved reports whether a log of topic grew or shrank since plan was computed.
func planMoved(d Destination, topic string, plan []PartitionPlan) bool {
	opened, lazy := d.(OpenLogs)
	for _, p := range plan {
		var l fetcher.Log
		if lazy {
			var open bool
			if l, open = opened.OpenLog(topic, p.Partition); !open {
				// Not written since the plan read it (a log the plan read was open
				// then), or ever: a topic this start created.
				continue
			}
		} else {
			var err error
			if l, err = d.Log(topic, p.Partition); err != nil {
				return true
			}
		}
		if l.LogEndOffset() != p.LogEnd || l.LogStartOffset() != p.LogStart {
			return true
		}
	}
	return false
}

// StopMirrorTopics stops mirroring topics of mirror name: failover or migration (spec
// §14.3). It checks the actual partition states (stop is allowed from MIRRORING, PAUSED,
// FAILED and the transient states before them), then sets the desired state to STOPPED
// with StateOffset fencing; the reconcilers run STOPPING (remove the fetcher, bump the
// leader epoch, truncate to the LSO, persist the LME, append MIRROR_PID_RESET) and clear
// the read-only flag in STOPPED. o.Patterns also stop every topic of the mirror they
// match and keep auto-discovery from re-adding them. With o.Wait the call returns once
// every stopped topic is actually STOPPED.
func (m *Mirror) StopMirrorTopics(ctx context.Context, name string, topics []string, o StopOptions) ([]TopicResult, error) {
	if err := m.checkRequest(ctx, name); err != nil {
		return nil, err
	}
	match, err := controller.NewTopicMatcher(o.Patterns, nil)
	if err != nil {
		return nil, err
	}
	names := dedupe(topics)
	if len(o.Patterns) > 0 {
		asked := setOf(names)
		for _, t := range m.ctrl.Topics(name) {
			if match.Includes(t.Topic) && !asked[t.Topic] {
				names = append(names, t.Topic)
			}
		}
	}
	return m.lifecycleWait(ctx, name, names, statemachine.OpStop, o.Wait, o.ValidateOnly, statemachine.Stopped,
		func(ctx context.Context, name string, ok []string, off int64) ([]TopicResult, error) {
			return m.ctrl.StopTopics(ctx, name, ok, o.Patterns, off)
		})
}

// PauseMirrorTopics pauses topics of mirror name (spec §14.4): every partition must be
// actually MIRRORING, and the topic desired MIRRORING. The reconcilers remove the
// fetchers (PAUSING) and reach PAUSED; the partitions stay read-only.
func (m *Mirror) PauseMirrorTopics(ctx context.Context, name string, topics []string, o LifecycleOptions) ([]TopicResult, error) {
	return m.lifecycleWait(ctx, name, dedupe(topics), statemachine.OpPause, o.Wait, o.ValidateOnly, statemachine.Paused, m.ctrl.PauseTopics)
}

// ResumeMirrorTopics resumes paused topics of mirror name (spec §14.5): every partition
// must be actually PAUSED. Fetching resumes at the local log end, without truncation.
func (m *Mirror) ResumeMirrorTopics(ctx context.Context, name string, topics []string, o LifecycleOptions) ([]TopicResult, error) {
	return m.lifecycleWait(ctx, name, dedupe(topics), statemachine.OpResume, o.Wait, o.ValidateOnly, statemachine.Mirroring, m.ctrl.ResumeTopics)
}

// lifecycleWait runs lifecycle(ctx, name, topics, op, validateOnly, apply); with wait
// it then waits until the topics that succeeded reach want. apply is called with the
// mirror's name.
func (m *Mirror) lifecycleWait(ctx context.Context, name string, topics []string, op statemachine.Op, wait, validateOnly bool,
	want statemachine.State, apply func(ctx context.Context, name string, ok []string, stateOffset int64) ([]TopicResult, error)) ([]TopicResult, error) {
	res, err := m.lifecycle(ctx, name, topics, op, validateOnly, func(ctx context.Context, ok []string, off int64) ([]TopicResult, error) {
		return apply(ctx, name, ok, off)
	})
	if err != nil || !wait || validateOnly {
		return res, err
	}
	return res, m.waitResults(ctx, name, res, want)
}

// lifecycle validates the actual states of topics for op through the coordinator, notes
// the controller offset it validated against, computes each valid topic's plan and,
// unless validateOnly, hands the valid topics to apply. Every result of a planned topic
// carries its plan.
func (m *Mirror) lifecycle(ctx context.Context, name string, topics []string, op statemachine.Op, validateOnly bool,
	apply func(ctx context.Context, ok []string, stateOffset int64) ([]TopicResult, error)) ([]TopicResult, error) {
	if err := m.checkRequest(ctx, name); err != nil {
		return nil, err
	}
	off := m.ctrl.Offset()
	var results []TopicResult
	var valid []string
	for _, topic := range topics {
		ts, ok := m.ctrl.Topic(topic)
		if !ok || ts.Mirror != name {
			results = append(results, TopicResult{Topic: topic,
				Err: admin.Errorf(admin.CodeUnknownTopicOrPartition, "topic %q is not a topic of mirror %q", topic, name)})
			continue
		}
		if err := m.checkActual(ctx, name, topic, op); err != nil {
			results = append(results, TopicResult{Topic: topic, Err: err})
			continue
		}
		valid = append(valid, topic)
	}
	plans := make(map[string][]PartitionPlan, len(valid))
	for _, topic := range valid {
		plan, err := m.planLifecycle(ctx, name, topic, op)
		if err != nil {
			return nil, err
		}
		plans[topic] = plan
	}
	if validateOnly {
		for _, topic := range valid {
			results = append(results, TopicResult{Topic: topic, Plan: plans[topic]})
		}
		return sortResults(results, topics), nil
	}
	if len(valid) > 0 || op == statemachine.OpStop {
		res, err := apply(ctx, valid, off)
		if err != nil {
			return nil, err
		}
		answered := make(map[string]bool, len(results))
		for _, r := range results {
			answered[r.Topic] = true
		}
		for _, r := range res {
			if !answered[r.Topic] {
				answered[r.Topic] = true
				r.Plan = plans[r.Topic]
				results = append(results, r)
			}
		}
	}
	return sortResults(results, topics), nil
}

// waitResults waits until the topics that succeeded reach want.
func (m *Mirror) waitResults(ctx context.Context, name string, res []TopicResult, want statemachine.State) error {
	var ok []string
	for _, r := range res {
		if r.Err == nil {
			ok = append(ok, r.Topic)
		}
	}
	return m.WaitForStates(ctx, name, ok, want)
}

// checkActual reads the actual state of every partition of topic in mirror name and
// checks op against each (statemachine.CheckOp). It returns the first refusal as an
// INVALID_CLUSTER_MIRROR_STATES *admin.Error naming the partition and its state, or the
// coordinator's error for a partition it could not read.
func (m *Mirror) checkActual(ctx context.Context, name, topic string, op statemachine.Op) error {
	ts, known := m.ctrl.Topic(topic)
	if !known || ts.Mirror != name {
		return nil // not a topic of this mirror yet: every partition is UNKNOWN (start)
	}
	spec, ok := m.dest.Topic(topic)
	if !ok {
		if op == statemachine.OpStart {
			return nil
		}
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "destination topic %q does not exist", topic)
	}
	req := coordinator.ReadRequest{MirrorName: name, Partitions: make([]coordinator.ReadPartition, spec.Partitions)}
	for p := int32(0); p < spec.Partitions; p++ {
		req.Partitions[p] = coordinator.ReadPartition{TopicID: ts.TopicID, Partition: p, LeaderEpoch: -1}
	}
	resp, err := m.coord.ReadMirrorStates(ctx, req)
	if err != nil {
		return err
	}
	for _, r := range resp.Partitions {
		if r.ErrorCode != admin.CodeNone {
			return admin.Errorf(r.ErrorCode, "topic %q partition %d: cannot read the mirror state", topic, r.Partition)
		}
		if err := statemachine.CheckOp(op, topic, r.Partition, r.State); err != nil {
			var ise *statemachine.InvalidStatesError
			if errors.As(err, &ise) {
				return admin.NewError(admin.CodeInvalidClusterMirrorStates, ise.Reason())
			}
			return admin.NewError(admin.CodeInvalidClusterMirrorStates, err.Error())
		}
	}
	return nil
}

// DeleteClusterMirrors deletes mirrors (spec §14.6). For each name: every partition of
// every topic of the mirror must be actually STOPPED and desired STOPPED
// (INVALID_CLUSTER_MIRROR_STATES otherwise); the controller dissociates the topics and
// removes the definition; the mirror's fetcher, source and sync stop and the
// coordinator tombstones its partition states and LMEs (so a deleted mirror can no
// longer be used for failback). The result maps every name to nil or its error.
func (m *Mirror) DeleteClusterMirrors(ctx context.Context, names []string) map[string]error {
	out := make(map[string]error, len(names))
	for _, name := range names {
		out[name] = m.deleteMirror(ctx, name)
	}
	return out
}

func (m *Mirror) deleteMirror(ctx context.Context, name string) error {
	if err := m.checkRequest(ctx, name); err != nil {
		return err
	}
	off := m.ctrl.Offset()
	for _, ts := range m.ctrl.Topics(name) {
		if err := m.checkActual(ctx, name, ts.Topic, statemachine.OpDelete); err != nil {
			return err
		}
	}
	if err := m.ctrl.DeleteMirror(ctx, name, off); err != nil {
		return err
	}
	errs := []error{m.dropMirror(name)}
	if _, err := m.coord.DeleteMirror(ctx, name); err != nil {
		errs = append(errs, fmt.Errorf("mirror: delete states of mirror %q: %w", name, err))
	}
	return errors.Join(errs...)
}

// ListClusterMirrors lists the mirrors matching f (spec §11.3), sorted by name. With
// DesiredStates every mirror is still listed, with only its topics in those states.
func (m *Mirror) ListClusterMirrors(ctx context.Context, f ListFilter) ([]MirrorListing, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	wantNames, wantIDs := setOf(f.MirrorNames), setOf(f.SourceClusterIDs)
	var out []MirrorListing
	for _, mi := range m.ctrl.Mirrors() {
		if len(f.MirrorNames) > 0 && !wantNames[mi.Name] {
			continue
		}
		l := MirrorListing{Name: mi.Name, SourceBootstrap: strings.Join(mi.Config.BootstrapServers, ","),
			SourceClusterID: mi.Config.SourceClusterID} // recorded; the runtime's answer below when it has one
		if mr, ok := m.mirror(mi.Name); ok {
			if len(f.SourceClusterIDs) > 0 {
				mr.ResolveClusterID(ctx)
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			l.SourceClusterID = mr.ClusterID()
		}
		if len(f.SourceClusterIDs) > 0 && !wantIDs[l.SourceClusterID] {
			continue
		}
		for _, ts := range m.ctrl.Topics(mi.Name) {
			if len(f.DesiredStates) > 0 && !slices.Contains(f.DesiredStates, ts.Desired) {
				continue
			}
			l.TopicCount++
			if f.IncludeTopicNames {
				l.TopicNames = append(l.TopicNames, ts.Topic)
			}
		}
		if f.IncludeTopicNames && l.TopicNames == nil {
			l.TopicNames = []string{}
		}
		out = append(out, l)
	}
	return out, nil
}

// DescribeClusterMirrors describes mirrors (nil names = all; an unknown name is
// UNKNOWN_CLUSTER_MIRROR) with, per partition, the actual state, LME and failure reason
// (o.IncludeStates) and the source and destination offsets (o.IncludeLags); see spec
// §11.4. o.ClusterID keeps only mirrors whose source cluster id equals it.
func (m *Mirror) DescribeClusterMirrors(ctx context.Context, names []string, o DescribeOptions) ([]MirrorDescription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	var infos []MirrorInfo
	if names == nil {
		infos = m.ctrl.Mirrors()
	} else {
		for _, n := range dedupe(names) {
			mi, ok := m.ctrl.Mirror(n)
			if !ok {
				return nil, controller.UnknownMirror(n)
			}
			infos = append(infos, mi)
		}
	}
	var out []MirrorDescription
	for _, mi := range infos {
		d := MirrorDescription{Name: mi.Name, SourceBootstrap: strings.Join(mi.Config.BootstrapServers, ","),
			SourceClusterID: mi.Config.SourceClusterID}
		if mr, ok := m.mirror(mi.Name); ok {
			if o.ClusterID != "" {
				mr.ResolveClusterID(ctx)
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			d.SourceClusterID = mr.ClusterID()
		}
		if o.ClusterID != "" && d.SourceClusterID != o.ClusterID {
			continue
		}
		topics, err := m.describeTopics(ctx, mi.Name, o)
		if err != nil {
			return nil, err
		}
		d.Topics = topics
		out = append(out, d)
	}
	return out, nil
}

func (m *Mirror) describeTopics(ctx context.Context, name string, o DescribeOptions) ([]TopicDescription, error) {
	var out []TopicDescription
	now := m.opts.clock()
	req := coordinator.ReadRequest{MirrorName: name}
	var slots []tpSlot
	for _, ts := range m.ctrl.Topics(name) {
		want, filtered := o.TopicPartitions[ts.Topic]
		if o.TopicPartitions != nil && !filtered {
			continue
		}
		td := TopicDescription{Topic: ts.Topic, TopicID: ts.TopicID, Desired: ts.Desired}
		var n int32
		if spec, ok := m.dest.Topic(ts.Topic); ok {
			n = spec.Partitions
		}
		for p := int32(0); p < n; p++ {
			if len(want) > 0 && !slices.Contains(want, p) {
				continue
			}
			pd := PartitionDescription{Partition: p, State: statemachine.Unknown, LastMirrorEpoch: -1,
				LastMirrorOffset: -1, SourceOffset: -1, DestinationOffset: -1, TimeLag: -1, PreviousState: statemachine.Unknown,
				VerifiedOffset: -1}
			if r := m.reconcilerOf(ts.Topic, p); r != nil && r.Mirror() == name {
				describeHealth(&pd, r, o.IncludeLags, now)
			}
			if o.IncludeStates {
				req.Partitions = append(req.Partitions, coordinator.ReadPartition{TopicID: ts.TopicID, Partition: p, LeaderEpoch: -1})
				slots = append(slots, tpSlot{len(out), len(td.Partitions)})
			}
			td.Partitions = append(td.Partitions, pd)
		}
		out = append(out, td)
	}
	err := m.readStates(ctx, req, slots, func(s tpSlot, r coordinator.ReadPartitionResult) {
		pd := &out[s.t].Partitions[s.p]
		pd.ErrorCode = r.ErrorCode
		if r.ErrorCode != admin.CodeNone {
			return
		}
		pd.State, pd.LastMirrorEpoch, pd.LastMirrorOffset = r.State, r.LastMirrorEpoch, r.LastMirrorOffset
		pd.RetryAttempt, pd.PreviousState = r.RetryAttempt, r.PreviousState
		if r.ErrorMessage != nil {
			pd.ErrorMessage = *r.ErrorMessage
		}
	})
	if err != nil {
		return nil, err
	}
	if o.IncludeLags && o.IncludeStates {
		m.pausedLags(ctx, name, out)
	}
	return out, nil
}

// pausedLags fills in the source offset, so the lag, of the PAUSED partitions of out,
// which no fetcher follows: one ListOffsets to the mirror's source, fresher than the
// last fidelity check's reading. A source that does not answer leaves what the last
// check read (with its time), or unknown (-1).
func (m *Mirror) pausedLags(ctx context.Context, name string, out []TopicDescription) {
	mr, ok := m.mirror(name)
	if !ok {
		return
	}
	var tps []TopicPartition
	for _, td := range out {
		for _, pd := range td.Partitions {
			if pd.State == statemachine.Paused && pd.DestinationOffset >= 0 { // fresher than the last check's

				tps = append(tps, TopicPartition{Topic: td.Topic, Partition: pd.Partition})
			}
		}
	}
	now := m.opts.clock()
	hws, err := mr.SourceHighWatermarks(ctx, tps)
	if err != nil {
		m.log.Debug("mirror: describe: source offsets of paused partitions unknown", "mirror", name, "err", err)
		return
	}
	for i := range out {
		for j := range out[i].Partitions {
			pd := &out[i].Partitions[j]
			if hw, ok := hws[TopicPartition{Topic: out[i].Topic, Partition: pd.Partition}]; ok && pd.State == statemachine.Paused {
				pd.SourceOffset, pd.SourceOffsetTime = hw, now
			}
		}
	}
}

// asAdminError keeps *admin.Error values and wraps others as UNKNOWN_SERVER_ERROR.
func asAdminError(err error) error {
	var ae *admin.Error
	if errors.As(err, &ae) {
		return err
	}
	return admin.NewError(admin.CodeUnknownServerError, err.Error())
}

// dedupe returns list without repeats, in first-seen order (linear time).
func dedupe(list []string) []string {
	out := make([]string, 0, len(list))
	seen := make(map[string]bool, len(list))
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// setOf is the set of list's strings.
func setOf(list []string) map[string]bool {
	set := make(map[string]bool, len(list))
	for _, s := range list {
		set[s] = true
	}
	return set
}

// sortResults orders results as the topics were asked, then the others by name.
func sortResults(rs []TopicResult, order []string) []TopicResult {
	pos := make(map[string]int, len(order))
	for i, t := range order {
		pos[t] = i
	}
	sort.SliceStable(rs, func(i, j int) bool {
		pi, oki := pos[rs[i].Topic]
		pj, okj := pos[rs[j].Topic]
		switch {
		case oki && okj:
			return pi < pj
		case oki != okj:
			return oki
		}
		return rs[i].Topic < rs[j].Topic
	})
	return rs
}
