package localdest

import (
	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror/dest"
)

var _ dest.ReplicaPlacement = (*LocalDestination)(nil)

// ReplicationFactor implements dest.ReplicaPlacement: the replication factor new
// topics get, 1 unless set with SetReplicationFactor (Kafka's default.replication.factor).
func (d *LocalDestination) ReplicationFactor() int16 {
	if rf := d.replicationFactor.Load(); rf != 0 {
		return int16(rf)
	}
	return 1
}

// PlaceableReplicas implements dest.ReplicaPlacement: a LocalDestination is one node,
// so it places one replica of each partition.
func (d *LocalDestination) PlaceableReplicas() int { return 1 }

// SetReplicationFactor sets the replication factor new topics get (the host's
// default.replication.factor). Above 1, every topic creation is refused with
// INVALID_REPLICATION_FACTOR, as a one-broker Kafka cluster refuses it; below 1 the call
// itself is refused with INVALID_REPLICATION_FACTOR.
func (d *LocalDestination) SetReplicationFactor(rf int16) error {
	if rf < 1 {
		return admin.Errorf(admin.CodeInvalidReplicationFactor, "replication factor %d is below 1", rf)
	}
	d.replicationFactor.Store(int32(rf))
	return nil
}
