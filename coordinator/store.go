package coordinator

import (
	"context"

	"github.com/kmirror/kmirror/records"
)

// Store persists the records of the __mirror_state partitions.
//
// Ownership contract: an owner claims a partition with Load(partition,
// ownerEpoch). A Load with a higher owner epoch fences every lower one: from
// then on Append with the lower epoch fails with an error matching ErrFenced
// (for KafkaStore, through the transactional producer epoch, also across
// processes). Appending to a partition not loaded with that epoch by this
// Store fails with ErrNotOwner.
//
// Error contract: Append is atomic — on a nil error every record is durable
// and will be returned by later Loads (until compaction supersedes it by a
// newer value or tombstone of the same key); on an error none of the records
// is visible to a later Load. (A store whose commit acknowledgement can be
// lost documents the exception.) Load calls fn with the committed records of
// the partition in log order; an error from fn aborts the load and is
// returned wrapped.
//
// Implementations are safe for concurrent use by different partitions; calls
// for one partition come from one goroutine.
type Store interface {
	// Load claims partition for ownerEpoch and replays its committed
	// records into fn, in log order.
	Load(ctx context.Context, partition, ownerEpoch int32, fn func(records.StateRecord) error) error
	// Append durably and atomically appends recs to partition.
	Append(ctx context.Context, partition, ownerEpoch int32, recs []records.StateRecord) error
	// Unload releases partition for ownerEpoch (no fencing; best effort).
	Unload(partition, ownerEpoch int32)
	// Close releases the store's resources.
	Close() error
}
