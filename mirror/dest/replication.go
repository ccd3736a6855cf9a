package dest

import "github.com/kmirror/kmirror/admin"

// ReplicaPlacement is optionally implemented by a Destination whose topics have
// replicas: it says which replication factor a new mirror topic gets and how many
// replicas the destination can place now. The KIP creates a mirror topic with the
// destination's default.replication.factor (there is no per-mirror or per-request
// replication factor) and refuses the creation with INVALID_REPLICATION_FACTOR unless
// every replica can be placed on a live broker (spec §10.2, JR59.2). A Destination
// without it counts as one replica that can always be placed.
type ReplicaPlacement interface {
	// ReplicationFactor is the replication factor of a new mirror topic (Kafka: the
	// destination's default.replication.factor).
	ReplicationFactor() int16
	// PlaceableReplicas is how many replicas of a new partition the destination can
	// place now (Kafka: its brokers that are neither fenced nor in controlled shutdown).
	PlaceableReplicas() int
}

// CheckReplicationFactor is the check a mirror topic's creation runs before anything is
// created: nil when d does not implement ReplicaPlacement or can place every replica of
// topic, else an *admin.Error with INVALID_REPLICATION_FACTOR naming the replication
// factor and how many replicas can be placed.
func CheckReplicationFactor(d Destination, topic string) error {
	rp, ok := d.(ReplicaPlacement)
	if !ok {
		return nil
	}
	rf, placeable := rp.ReplicationFactor(), rp.PlaceableReplicas()
	switch {
	case rf < 1:
		return admin.Errorf(admin.CodeInvalidReplicationFactor,
			"topic %q: the destination's replication factor %d is below 1", topic, rf)
	case int(rf) > placeable:
		return admin.Errorf(admin.CodeInvalidReplicationFactor,
			"topic %q: unable to replicate each partition %d time(s): the destination can place %d replica(s) now",
			topic, rf, placeable)
	}
	return nil
}
