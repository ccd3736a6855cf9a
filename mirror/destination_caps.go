package mirror

import "github.com/kmirror/kmirror/mirror/dest"

// Names of the Destination capabilities of share groups and replica placement (package
// mirror/dest).
type (
	// ShareGroupOffsets is dest.ShareGroupOffsets: a Destination that keeps share-group
	// start offsets.
	ShareGroupOffsets = dest.ShareGroupOffsets
	// ReplicaPlacement is dest.ReplicaPlacement: the replication factor of new mirror
	// topics and how many replicas the Destination can place.
	ReplicaPlacement = dest.ReplicaPlacement
)

// CheckReplicationFactor is dest.CheckReplicationFactor: INVALID_REPLICATION_FACTOR
// when d cannot place every replica of a new mirror topic.
func CheckReplicationFactor(d Destination, topic string) error {
	return dest.CheckReplicationFactor(d, topic)
}
