package mirror

import "github.com/kmirror/kmirror/statemachine"

// partitionMirroring reports whether this instance's reconciler of topic/partition is
// of mirror name and actually MIRRORING: the share-group sync of the mirror syncs only
// such partitions (metasync.SyncConfig.Mirroring).
func (m *Mirror) partitionMirroring(name string) func(topic string, partition int32) bool {
	return func(topic string, partition int32) bool {
		r := m.reconcilerOf(topic, partition)
		if r == nil || r.Mirror() != name {
			return false
		}
		st, _ := r.Current()
		return st == statemachine.Mirroring
	}
}
