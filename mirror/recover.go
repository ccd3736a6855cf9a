package mirror

import (
	"context"

	"github.com/kmirror/kmirror/internal/reconcile"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/statemachine"
)

// RecoverMirrorTopics restarts the FAILED partitions of topics of mirror name (a later
// KIP revision, spec §14.10; `--recover` in the tool): each restarts from PREPARING with
// its retry attempts reset to zero, whether its automatic retries ran out or its failure
// was non-retryable (the operator removed the cause). Partitions in any other state are
// left alone. Per topic: a topic that is not a topic of the mirror is
// UNKNOWN_TOPIC_OR_PARTITION; a topic whose desired state is not MIRRORING (paused or
// stopped) is INVALID_CLUSTER_MIRROR_STATES. The restart is asked of the partitions
// this instance leads; it does not wait for them to mirror again.
//
// With o.ValidateOnly it changes nothing and returns each topic's plan: the FAILED
// partitions that would restart, and what their PREPARING would truncate.
//
// A FAILED partition that failed before its PREPARING truncated (PreviousState
// UNKNOWN, STOPPED or PREPARING) may still hold records written on this site: when its
// plan removes some, the topic is refused with a *TruncationRefusedError carrying the
// plan (nothing changes) unless o.AllowTruncation, which records the plan's ranges as
// the topic's approvals before the restart.
func (m *Mirror) RecoverMirrorTopics(ctx context.Context, name string, topics []string, o RecoverOptions) ([]TopicResult, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := m.ctrl.Mirror(name); !ok {
		return nil, controller.UnknownMirror(name)
	}
	results := make([]TopicResult, 0, len(topics))
	for _, topic := range dedupe(topics) {
		results = append(results, m.recoverTopic(ctx, name, topic, o))
	}
	return results, nil
}

// recoverTopic recovers one topic (RecoverMirrorTopics): its plan first, a removal of
// this site's records refused or approved, then the restart.
func (m *Mirror) recoverTopic(ctx context.Context, name, topic string, o RecoverOptions) TopicResult {
	off := m.ctrl.Offset()
	plan, guarded, err := m.planRecoverGuarded(ctx, name, topic)
	if err == nil && len(guarded) > 0 && !o.AllowTruncation {
		err = &TruncationRefusedError{Mirror: name, Topic: topic, Plan: plan, AtPrepare: true}
	}
	if err != nil || o.ValidateOnly {
		return TopicResult{Topic: topic, Err: err, Plan: plan}
	}
	if len(guarded) > 0 {
		if err := m.ctrl.ApproveRemovals(ctx, name, topic, controller.ApprovalsOf(guarded), off); err != nil {
			return TopicResult{Topic: topic, Err: err, Plan: plan}
		}
	}
	return TopicResult{Topic: topic, Err: m.eng.RecoverTopic(name, topic), Plan: plan}
}

// planRecoverGuarded is planRecover, with the rows of the partitions whose restart
// removes records written on this site (reconcile.GuardsLocalWrites of the state
// they failed in, and PartitionPlan.RemovesRecords) that no recorded approval covers
// (a start's that a failure before its truncation left unused still does): what
// needs an approval.
func (m *Mirror) planRecoverGuarded(ctx context.Context, name, topic string) ([]PartitionPlan, []PartitionPlan, error) {
	plan, prev, err := m.planRecoverStates(ctx, name, topic)
	if err != nil {
		return nil, nil, err
	}
	ts, _ := m.ctrl.Topic(topic)
	var guarded []PartitionPlan
	for _, p := range plan {
		if p.StateNow != statemachine.Failed || !reconcile.GuardsLocalWrites(prev[p.Partition]) || !p.RemovesRecords() {
			continue
		}
		if ap, ok := ts.Approval(p.Partition); ok && ap.Covers(p.Removed) {
			continue
		}
		guarded = append(guarded, p)
	}
	return plan, guarded, nil
}
