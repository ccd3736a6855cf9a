package mirror

import "github.com/kmirror/kmirror/statemachine"

// partitionMirroring reports whether this instance's reconciler of topic/partition is
// of mirror mr and actually MIRRORING: the share-group sync of the mirror syncs only
// such partitions (SyncConfig.Mirroring).
func (mr *mirrorRuntime) partitionMirroring(topic string, partition int32) bool {
	r := mr.m.reconcilerOf(topic, partition)
	if r == nil || r.mirror != mr.name {
		return false
	}
	st, _ := r.current()
	return st == statemachine.Mirroring
}
