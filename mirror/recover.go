package mirror

import (
	"context"

	"github.com/kmirror/kmirror/mirror/controller"
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
		if o.ValidateOnly {
			plan, err := m.planRecover(ctx, name, topic)
			results = append(results, TopicResult{Topic: topic, Err: err, Plan: plan})
			continue
		}
		results = append(results, TopicResult{Topic: topic, Err: m.eng.RecoverTopic(name, topic)})
	}
	return results, nil
}
