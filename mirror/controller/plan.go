package controller

import "github.com/kmirror/kmirror/statemachine"

// PartitionPlan is what one lifecycle operation (start, stop, pause, resume, recover)
// will do to one partition, computed before the operation changes anything. A
// validate-only request returns it and changes nothing; a real request returns the plan
// it carried out (a start refused for removing this site's records returns it with the
// refusal).
type PartitionPlan struct {
	Partition int32
	// StateNow is the actual state of the partition; StateAfter the state the
	// operation leads it to (MIRRORING for a start, STOPPED for a stop, ...).
	StateNow, StateAfter statemachine.State
	// LastMirrorEpoch is, for a start, the last mirrored epoch found on the source
	// cluster (-1 when none: the log is truncated fully); for a stop, the LME the stop
	// will persist (the latest epoch of the local log, -1 for an empty log).
	LastMirrorEpoch int32
	// LMECluster and LMEMirror name where the LME was found: the source cluster's id
	// and the mirror there that mirrors the partition from this cluster ("" when none;
	// for a stop, this cluster and the stopped mirror).
	LMECluster, LMEMirror string
	// LogStart and LogEnd bound the local log now.
	LogStart, LogEnd int64
	// TruncationOffset is where PREPARING cuts the local log, -1 when it cuts nothing.
	TruncationOffset int64
	// FullTruncation says the whole log goes (no LME is known).
	FullTruncation bool
	// DivergenceOffset is where the first fetches after PREPARING cut the log further,
	// -1 when they do not: the source's epoch ends below the kept log (a failback: this
	// site's records the other site never mirrored, Kafka's diverging-epoch rule).
	// Removed and LocalWrites include that cut.
	DivergenceOffset int64
	// Removed is what the truncation removes: the offset range and the data records
	// in it.
	Removed OffsetRange
	// LocalWrites is the part of Removed that was written on this site (by its
	// producers) since the partition last stopped mirroring, or ever when it never
	// mirrored.
	LocalWrites OffsetRange
	// SourceLogStart is the source's log start offset for a full truncation (what
	// below it is not re-mirrored), -1 when not asked or unknown.
	SourceLogStart int64
	// OpenTransactions are the open transactions a stop aborts (an ABORT marker each).
	OpenTransactions []OpenTransaction
}

// RemovesRecords reports whether the plan removes records written on this site or
// truncates a log with records fully: what a start refuses without AllowTruncation.
func (p PartitionPlan) RemovesRecords() bool {
	return p.LocalWrites.Records > 0 || (p.FullTruncation && p.Removed.Records > 0)
}

// OffsetRange is the offsets [From, To) and the number of data records in them
// (control records not counted).
type OffsetRange struct {
	From, To int64
	Records  int64
}

// Empty reports whether the range holds no offset.
func (r OffsetRange) Empty() bool { return r.To <= r.From }

// OpenTransaction is one open transaction of a partition's log.
type OpenTransaction struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
}
