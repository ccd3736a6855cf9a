package mirror

import (
	"context"

	"github.com/kmirror/kmirror/admin"
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
func (m *Mirror) RecoverMirrorTopics(ctx context.Context, name string, topics []string) ([]TopicResult, error) {
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
		results = append(results, TopicResult{Topic: topic, Err: m.recoverTopic(name, topic)})
	}
	return results, nil
}

func (m *Mirror) recoverTopic(name, topic string) error {
	ts, ok := m.ctrl.Topic(topic)
	if !ok || ts.Mirror != name {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "topic %q is not a topic of mirror %q", topic, name)
	}
	if ts.Desired != statemachine.DesiredMirroring {
		return admin.Errorf(admin.CodeInvalidClusterMirrorStates,
			"topic %q of mirror %q is %s: only a MIRRORING topic can be recovered", topic, name, ts.Desired)
	}
	spec, ok := m.dest.Topic(topic)
	if !ok {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "destination topic %q does not exist", topic)
	}
	for p := int32(0); p < spec.Partitions; p++ {
		if r := m.reconcilerOf(topic, p); r != nil && r.mirror == name {
			if st, _ := r.current(); st == statemachine.Failed {
				r.recover()
			}
		}
	}
	return nil
}
