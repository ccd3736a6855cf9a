package mirror

import (
	"context"
	"errors"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/internal/reconcile"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/statemachine"
)

// The plan of a lifecycle operation (TopicResult.Plan; see StartOptions.ValidateOnly).
type (
	// PartitionPlan is controller.PartitionPlan: what an operation does to one partition.
	PartitionPlan = controller.PartitionPlan
	// OffsetRange is controller.OffsetRange: offsets [From, To) and their data records.
	OffsetRange = controller.OffsetRange
	// OpenTransaction is controller.OpenTransaction: an open transaction a stop aborts.
	OpenTransaction = controller.OpenTransaction
	// TruncationRefusedError is reconcile.TruncationRefusedError: a start refused
	// because it would remove records written on this site (Is ErrTruncationRefused).
	TruncationRefusedError = reconcile.TruncationRefusedError
	// Removal is reconcile.Removal: records an allowed start removed (WithRemovals).
	Removal = reconcile.Removal
)

// ErrTruncationRefused is matched by a *TruncationRefusedError: a start (or the
// PREPARING of a partition that no start allowed) that would remove records written
// on this site. The admin server answers it as MIRROR_TRUNCATION_REFUSED with the plan.
var ErrTruncationRefused = reconcile.ErrTruncationRefused

// WithRemovals registers fn to be called after PREPARING removed records that a start
// allowed it to remove (StartOptions.AllowTruncation): the offsets and how many of the
// records were written on this site. Called from partition goroutines.
func WithRemovals(fn func(Removal)) Option {
	return optionFunc(func(o *options) { o.removals = fn })
}

// planStates reads the stored state of every partition of topic (mirror name) for a
// plan: the state and the LastMirrorOffset where this site's own writes begin. A
// topic the mirror does not know yet, or without a destination topic, has none.
func (m *Mirror) planStates(ctx context.Context, name, topic string) (map[int32]reconcile.PlanState, error) {
	out := map[int32]reconcile.PlanState{}
	spec, ok := m.dest.Topic(topic)
	if !ok {
		return out, nil
	}
	ts, known := m.ctrl.Topic(topic)
	if !known {
		return out, nil
	}
	if ts.Mirror != name {
		return out, nil
	}
	req := coordinator.ReadRequest{MirrorName: name, Partitions: make([]coordinator.ReadPartition, spec.Partitions)}
	for p := int32(0); p < spec.Partitions; p++ {
		req.Partitions[p] = coordinator.ReadPartition{TopicID: ts.TopicID, Partition: p, LeaderEpoch: -1}
	}
	resp, err := m.coord.ReadMirrorStates(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, r := range resp.Partitions {
		if r.ErrorCode != admin.CodeNone {
			return nil, admin.Errorf(r.ErrorCode, "topic %q partition %d: cannot read the mirror state", topic, r.Partition)
		}
		out[r.Partition] = reconcile.PlanState{State: r.State, LastMirrorOffset: r.LastMirrorOffset, Previous: r.PreviousState}
	}
	return out, nil
}

// planStart is the plan of starting topic (see StartOptions): the error refuses the
// topic (a mirror loop as INVALID_CLUSTER_MIRROR_STATES; a removal of this site's
// records without o.AllowTruncation as *TruncationRefusedError).
func (m *Mirror) planStart(ctx context.Context, mr *reconcile.Runtime, name, topic string, o StartOptions) ([]PartitionPlan, error) {
	states, err := m.planStates(ctx, name, topic)
	if err != nil {
		return nil, err
	}
	plan, err := mr.PlanStart(ctx, topic, states)
	if err != nil {
		if errors.Is(err, reconcile.ErrMirrorLoop) {
			return nil, admin.NewError(admin.CodeInvalidClusterMirrorStates, err.Error())
		}
		return nil, asAdminError(err)
	}
	if o.AllowTruncation {
		return plan, nil
	}
	for _, p := range plan {
		if p.RemovesRecords() {
			return plan, &TruncationRefusedError{Mirror: name, Topic: topic, Plan: plan}
		}
	}
	return plan, nil
}

// fullTruncations is the legacy TopicResult.Truncations of a start plan.
func fullTruncations(plan []PartitionPlan) []FullTruncation {
	var out []FullTruncation
	for _, p := range plan {
		if p.FullTruncation && !p.Removed.Empty() {
			out = append(out, reconcile.FullTruncationOf(p))
		}
	}
	return out
}

// planLifecycle is the plan of op (stop, pause, resume) for topic: per partition the
// state now and after; for a stop the LME persisted and the open transactions aborted.
func (m *Mirror) planLifecycle(ctx context.Context, name, topic string, op statemachine.Op) ([]PartitionPlan, error) {
	states, err := m.planStates(ctx, name, topic)
	if err != nil {
		return nil, err
	}
	if op == statemachine.OpStop {
		mr, ok := m.mirror(name)
		if !ok {
			return nil, controller.UnknownMirror(name)
		}
		return mr.PlanStop(topic, states)
	}
	after := map[statemachine.Op]statemachine.State{statemachine.OpPause: statemachine.Paused, statemachine.OpResume: statemachine.Mirroring}[op]
	spec, _ := m.dest.Topic(topic)
	out := make([]PartitionPlan, 0, spec.Partitions)
	for p := int32(0); p < spec.Partitions; p++ {
		pl := PartitionPlan{Partition: p, StateNow: reconcile.StateOf(states, p).State, StateAfter: after, LastMirrorEpoch: -1, TruncationOffset: -1, DivergenceOffset: -1, SourceLogStart: -1}
		if l, err := m.dest.Log(topic, p); err == nil {
			pl.LogStart, pl.LogEnd = l.LogStartOffset(), l.LogEndOffset()
		}
		out = append(out, pl)
	}
	return out, nil
}

// planRecoverStates is the plan of recovering topic: its FAILED partitions restart
// from PREPARING (the truncation planned as for a start); the others stay as they
// are. It also returns the state each FAILED partition failed in.
func (m *Mirror) planRecoverStates(ctx context.Context, name, topic string) ([]PartitionPlan, map[int32]statemachine.State, error) {
	ts, ok := m.ctrl.Topic(topic)
	if !ok || ts.Mirror != name {
		return nil, nil, admin.Errorf(admin.CodeUnknownTopicOrPartition, "topic %q is not a topic of mirror %q", topic, name)
	}
	if ts.Desired != statemachine.DesiredMirroring {
		return nil, nil, admin.Errorf(admin.CodeInvalidClusterMirrorStates,
			"topic %q of mirror %q is %s: only a MIRRORING topic can be recovered", topic, name, ts.Desired)
	}
	mr, ok := m.mirror(name)
	if !ok {
		return nil, nil, controller.UnknownMirror(name)
	}
	states, err := m.planStates(ctx, name, topic)
	if err != nil {
		return nil, nil, err
	}
	plan, err := mr.PlanStart(ctx, topic, states)
	if err != nil {
		return nil, nil, asAdminError(err)
	}
	prev := map[int32]statemachine.State{}
	for p, st := range states {
		if st.State == statemachine.Failed {
			prev[p] = st.Previous
		}
	}
	for i := range plan {
		if plan[i].StateNow != statemachine.Failed {
			plan[i] = PartitionPlan{Partition: plan[i].Partition, StateNow: plan[i].StateNow, StateAfter: plan[i].StateNow,
				LastMirrorEpoch: -1, LogStart: plan[i].LogStart, LogEnd: plan[i].LogEnd, TruncationOffset: -1, DivergenceOffset: -1, SourceLogStart: -1}
		}
	}
	return plan, prev, nil
}

// newTopicPlan is the plan of a start that creates its destination topic: every
// partition goes from UNKNOWN to MIRRORING with an empty log.
func newTopicPlan(partitions int32) []PartitionPlan {
	out := make([]PartitionPlan, 0, partitions)
	for p := int32(0); p < partitions; p++ {
		out = append(out, PartitionPlan{Partition: p, StateNow: statemachine.Unknown, StateAfter: statemachine.Mirroring,
			LastMirrorEpoch: -1, TruncationOffset: -1, DivergenceOffset: -1, SourceLogStart: -1})
	}
	return out
}
