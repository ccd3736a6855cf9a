package reconcile

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/statemachine"
)

// WaitForStates blocks until every partition of topics of mirror name is actually in
// state want, as this instance's reconcilers last wrote it (and ran its entry actions:
// a STOPPED partition is writable). It returns early with an error when a partition is
// FAILED and nothing can lead out of it (want is not STOPPED and no automatic retry is
// left: off, exhausted or a non-retryable failure), when a topic is not a topic of the mirror, or when ctx is done. A test and CLI
// helper.
func (e *Engine) WaitForStates(ctx context.Context, name string, topics []string, want statemachine.State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, ok := e.ctrl.Mirror(name); !ok {
		return controller.UnknownMirror(name)
	}
	for _, topic := range topics {
		ts, ok := e.ctrl.Topic(topic)
		if !ok || ts.Mirror != name {
			return fmt.Errorf("mirror: topic %q is not a topic of mirror %q", topic, name)
		}
		for p := int32(0); ; p++ {
			spec, ok := e.dest.Topic(topic)
			if !ok {
				return fmt.Errorf("mirror: destination topic %q does not exist", topic)
			}
			if p >= spec.Partitions {
				break
			}
			for {
				ch := e.Changed()
				r := e.Partition(topic, p)
				if r != nil && r.mirror == name {
					st, reason := r.Current()
					if st == want {
						break
					}
					// FAILED is final unless a stop (FAILED -> STOPPING) or an automatic
					// retry can lead out of it.
					if st == statemachine.Failed && want != statemachine.Stopped && r.FailureFinal() {
						return fmt.Errorf("mirror: topic %q partition %d is FAILED: %s", topic, p, reason)
					}
				}
				select {
				case <-ch:
				case <-ctx.Done():
					st := statemachine.Unknown
					if r != nil {
						st, _ = r.Current()
					}
					return fmt.Errorf("mirror: waiting for topic %q partition %d to be %s (now %s): %w", topic, p, want, st, ctx.Err())
				case <-e.ctx.Done():
					return ErrClosed
				}
			}
		}
	}
	return nil
}

// WaitForLag blocks until every partition of topics of mirror name is MIRRORING with a
// known source offset and a lag of at most maxLag (a controlled migration waits for 0
// before it stops the topics). It returns early with an error when a partition is
// FAILED, when a topic is not a topic of the mirror, or when ctx is done.
func (e *Engine) WaitForLag(ctx context.Context, name string, topics []string, maxLag int64) error {
	if err := e.WaitForStates(ctx, name, topics, statemachine.Mirroring); err != nil {
		return err
	}
	for _, topic := range topics {
		spec, ok := e.dest.Topic(topic)
		if !ok {
			return fmt.Errorf("mirror: destination topic %q does not exist", topic)
		}
		for p := int32(0); p < spec.Partitions; p++ {
			for {
				ch := e.Changed()
				r := e.Partition(topic, p)
				if r == nil || r.mirror != name {
					return fmt.Errorf("mirror: topic %q partition %d is not mirrored by %q", topic, p, name)
				}
				st, reason := r.Current()
				// FAILED is final unless an automatic retry can lead out of it.
				if st == statemachine.Failed && r.FailureFinal() {
					return fmt.Errorf("mirror: topic %q partition %d is FAILED: %s", topic, p, reason)
				}
				src, dst := r.Offsets()
				if st == statemachine.Mirroring && src >= 0 && src-dst <= maxLag {
					break
				}
				select {
				case <-ch:
				case <-ctx.Done():
					return fmt.Errorf("mirror: waiting for topic %q partition %d to catch up (source %d, destination %d): %w", topic, p, src, dst, ctx.Err())
				case <-e.ctx.Done():
					return ErrClosed
				}
			}
		}
	}
	return nil
}

// RecoverTopic asks the FAILED partitions of topic of mirror name that this instance
// leads to restart from PREPARING with their retry attempts reset (Partition.recover).
// A topic that is not a topic of the mirror, or whose destination topic is missing, is
// UNKNOWN_TOPIC_OR_PARTITION; one whose desired state is not MIRRORING is
// INVALID_CLUSTER_MIRROR_STATES (*admin.Error).
func (e *Engine) RecoverTopic(name, topic string) error {
	ts, ok := e.ctrl.Topic(topic)
	if !ok || ts.Mirror != name {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "topic %q is not a topic of mirror %q", topic, name)
	}
	if ts.Desired != statemachine.DesiredMirroring {
		return admin.Errorf(admin.CodeInvalidClusterMirrorStates,
			"topic %q of mirror %q is %s: only a MIRRORING topic can be recovered", topic, name, ts.Desired)
	}
	spec, ok := e.dest.Topic(topic)
	if !ok {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "destination topic %q does not exist", topic)
	}
	for p := int32(0); p < spec.Partitions; p++ {
		if r := e.Partition(topic, p); r != nil && r.mirror == name {
			if st, _ := r.Current(); st == statemachine.Failed {
				r.recover()
			}
		}
	}
	return nil
}
