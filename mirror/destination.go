package mirror

import (
	"context"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/localdest"
)

// The Destination contract lives in package mirror/dest (so that a Destination
// implementation need not import the facade); these aliases keep the names of package
// mirror.
type (
	// TopicSpec is dest.TopicSpec: a destination topic.
	TopicSpec = dest.TopicSpec
	// TopicPartition is dest.TopicPartition (itself fetcher.TopicPartition): one partition.
	TopicPartition = dest.TopicPartition
	// Destination is dest.Destination: what the host owns on the destination side.
	Destination = dest.Destination
	// ReplicaWaiter is dest.ReplicaWaiter: a Destination with follower replicas.
	ReplicaWaiter = dest.ReplicaWaiter
	// OpenLogs is dest.OpenLogs: a Destination that tells whether a log is open.
	OpenLogs = dest.OpenLogs
	// GroupOffsets is dest.GroupOffsets: a Destination that stores group offsets.
	GroupOffsets = dest.GroupOffsets
	// ClientAdmin is dest.ClientAdmin: the host-facing topic admin operations.
	ClientAdmin = dest.ClientAdmin
	// ACL is dest.ACL: one access-control binding.
	ACL = dest.ACL
	// ACLStore is dest.ACLStore: a Destination that keeps synced ACLs.
	ACLStore = dest.ACLStore
	// ProducerIDAllocator is dest.ProducerIDAllocator: durable producer-id blocks.
	ProducerIDAllocator = dest.ProducerIDAllocator
	// ProducerIDBlock is dest.ProducerIDBlock: a reserved range of producer ids.
	ProducerIDBlock = dest.ProducerIDBlock
)

// ProduceToLog is dest.ProduceToLog: the client write path of one destination
// partition, for Destination implementations.
func ProduceToLog(ctx context.Context, log fetcher.Log, topic string, partition int32, batch []byte) (int64, error) {
	return dest.ProduceToLog(ctx, log, topic, partition, batch)
}

// The Destination kmirror ships lives in package mirror/localdest; these names keep
// the API of package mirror.
type (
	// LocalDestination is localdest.LocalDestination: file-backed or in memory.
	LocalDestination = localdest.LocalDestination
	// UnwritableRootError is localdest.UnwritableRootError: a root kmirror cannot write.
	UnwritableRootError = localdest.UnwritableRootError
)

// ProducerIDBlockSize is dest.ProducerIDBlockSize: the ids in one producer-id block.
const ProducerIDBlockSize = dest.ProducerIDBlockSize

// LocalProducerIDRangeSize is dest.LocalProducerIDRangeSize: the ids of one site's
// local range.
const LocalProducerIDRangeSize = dest.LocalProducerIDRangeSize

// LocalProducerIDRange is dest.LocalProducerIDRange: the range a destination with
// clusterID allocates its clients' producer ids from.
func LocalProducerIDRange(clusterID string) (first, limit int64) {
	return dest.LocalProducerIDRange(clusterID)
}

// ErrProducerIDsExhausted is dest.ErrProducerIDsExhausted: a ProducerIDAllocator's
// range has no room for another block.
var ErrProducerIDsExhausted = dest.ErrProducerIDsExhausted

// ErrClusterIDMismatch and ClusterIDMismatchError are localdest's: OpenFileDestination
// refuses a root created under another cluster id.
var ErrClusterIDMismatch = localdest.ErrClusterIDMismatch

// ClusterIDMismatchError is localdest.ClusterIDMismatchError.
type ClusterIDMismatchError = localdest.ClusterIDMismatchError

// ErrDestinationLocked is localdest.ErrLocked: the root is open in another
// LocalDestination, in this process or another.
var ErrDestinationLocked = localdest.ErrLocked

// DestinationLockFile is localdest.LockFile, the lock file of a file destination's root.
const DestinationLockFile = localdest.LockFile

// OpenFileDestination is localdest.OpenFile: it opens (creating when needed) a file
// destination rooted at root, locked until Close. A root created under another cluster
// id is refused with a *ClusterIDMismatchError (ErrClusterIDMismatch).
func OpenFileDestination(root, clusterID string, opts fetcher.FileLogOptions) (*LocalDestination, error) {
	return localdest.OpenFile(root, clusterID, opts)
}

// NewMemoryDestination is localdest.NewMemory: a destination whose partitions are
// MemoryLogs made with opts.
func NewMemoryDestination(clusterID string, opts fetcher.MemoryLogOptions) *LocalDestination {
	return localdest.NewMemory(clusterID, opts)
}
