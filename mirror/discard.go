package mirror

import (
	"github.com/kmirror/kmirror/mirror/localdest"
)

// PartitionDiscard is localdest.PartitionDiscard: data the open of one
// partition's log removed (a torn tail past its flush point, or a
// RepairCorruption cut), with its partition.
type PartitionDiscard = localdest.PartitionDiscard

// discardReporter is a Destination that reports what the opens of its logs
// removed (LocalDestination, or a type that embeds one).
type discardReporter interface {
	OnDiscard(fn func(PartitionDiscard)) (stop func())
}

// watchDiscards reports, while the Mirror is open, every removal the opens of
// the destination's logs made or make: a warning naming the partition, the
// file, the offsets and the bytes, and Metrics.LogRecoveryDiscard. The
// removals of any partition are reported, mirrored or not: a torn tail of a
// mirror partition is fetched again from the source, one of a partition
// written on this site (after a failover) is not.
func (m *Mirror) watchDiscards() {
	d, ok := m.dest.(discardReporter)
	if !ok {
		return
	}
	metrics := m.opts.ops.metrics
	m.stopDiscards = d.OnDiscard(func(pd PartitionDiscard) {
		m.log.Warn("mirror: the open of a log removed data", "topic", pd.Topic, "partition", pd.Partition,
			"file", pd.File, "position", pd.Position, "from_offset", pd.FromOffset, "to_offset", pd.ToOffset,
			"bytes", pd.Bytes, "files", pd.Files, "repaired", pd.Repaired, "reason", pd.Reason)
		metrics.LogRecoveryDiscard(pd.Topic, pd.Partition, pd.FromOffset, pd.ToOffset, pd.Bytes, pd.Repaired)
	})
}
