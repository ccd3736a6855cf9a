package reconcile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/metasync"

	"github.com/kmirror/kmirror/statemachine"
)

// ErrTieredStorage fails a partition whose destination topic has tiered storage enabled
// (remote.storage.enable=true): a mirror topic's log must stay local, byte for byte with
// the source (spec §5.5, JR4). Not retried.
var ErrTieredStorage = errors.New("mirror: tiered storage is enabled on the destination topic (remote.storage.enable=true); mirror topics cannot use tiered storage")

// KeyRemoteStorageEnable is the topic config that turns on tiered storage.
const KeyRemoteStorageEnable = "remote.storage.enable"

// uleEnabled reports whether unclean leader election on the source is supported for
// this partition: mirror.support.unclean.leader.election as a config of the destination
// topic when set there ("mirror.*" topic configs are never synced from the source, so
// the destination's own value holds), else as a mirror config. A topic value that is
// neither true nor false is ignored, with a warning, for the mirror's.
func (r *Partition) uleEnabled() bool {
	if spec, ok := r.e.dest.Topic(r.topic); ok {
		if v, set := spec.Configs[controller.KeyUncleanLeaderElection]; set {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true":
				return true
			case "false":
				return false
			}
			r.e.log.Warn("mirror: invalid topic config ignored; the mirror's value applies", "mirror", r.mirror,
				"topic", r.topic, "config", controller.KeyUncleanLeaderElection, "value", v)
		}
	}
	cfg, err := r.mr.config()
	return err == nil && cfg.SupportUncleanLeaderElec
}

// failSourceTopics fails, non-retryably, the partitions of the topics whose source
// the sync cycle found deleted (metasync.ErrSourceTopicMissing) or recreated with another topic
// id (metasync.ErrSourceTopicRecreated). A partition already FAILED that way is left alone.
func (mr *Runtime) failSourceTopics(st metasync.SyncStats) {
	for _, e := range st.Errors {
		var se *metasync.SyncError
		if !errors.As(e, &se) || se.Topic == "" ||
			!(errors.Is(se.Err, metasync.ErrSourceTopicMissing) || errors.Is(se.Err, metasync.ErrSourceTopicRecreated)) {
			continue
		}
		reason := fmt.Sprintf("source topic %q: %v", se.Topic, se.Err)
		if errors.Is(se.Err, metasync.ErrSourceTopicMissing) {
			reason = fmt.Sprintf("source topic %q was deleted: %v", se.Topic, se.Err)
		}
		for _, r := range mr.e.partitionsOf(mr) {
			if r.topic != se.Topic || r.pubRetry.Load() == -1 {
				continue
			}
			r.push(statemachine.Error{Reason: reason, Cause: se.Err})
		}
	}
}

// tieredStorageCheck returns the Error event that fails the partition when its
// destination topic has tiered storage enabled, the topic is not being stopped and the
// partition is not failed non-retryably already, stopping or stopped; nil otherwise. It
// runs before every desired-state step, so the partition fails before PREPARING touches
// its log.
func (r *Partition) tieredStorageCheck() statemachine.Event {
	ts, found := r.e.ctrl.Topic(r.topic)
	if !found || ts.Mirror != r.mirror || ts.Desired == statemachine.DesiredStopped || r.nonRetryable {
		return nil
	}
	switch r.state {
	case statemachine.Stopping, statemachine.Stopped:
		return nil
	}
	spec, ok := r.e.dest.Topic(r.topic)
	if !ok || spec.Configs[KeyRemoteStorageEnable] != "true" {
		return nil
	}
	return statemachine.Error{Reason: fmt.Sprintf("%s-%d: %v", r.topic, r.partition, ErrTieredStorage), Cause: ErrTieredStorage}
}
