package dest

// ShareGroupOffsets is optionally implemented by a Destination that keeps share groups
// (KIP-932): the metadata sync copies, for the mirror's inactive share groups, the
// share-partition start offset (SPSO) of each partition of a MIRRORING topic, clamped
// to the destination log and never moved backwards (spec §17).
type ShareGroupOffsets interface {
	// ShareStartOffsets returns the share-partition start offsets of group (nil when
	// it has none).
	ShareStartOffsets(group string) map[TopicPartition]int64
	// HasActiveShareMembers reports whether group has members on the destination;
	// such groups are never synced (their consumers own the offsets).
	HasActiveShareMembers(group string) bool
	// SetShareStartOffsets stores the start offsets of group, durably; partitions not
	// in offsets keep theirs.
	SetShareStartOffsets(group string, offsets map[TopicPartition]int64) error
}
