package dest

import (
	"context"
	"errors"
	"hash/fnv"
)

// ProducerIDBlockSize is how many producer ids one ProducerIDAllocator call reserves:
// Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
const ProducerIDBlockSize = 1000

// ErrProducerIDsExhausted is returned by ProducerIDAllocator.AllocateProducerIDs once
// the destination's producer-id range has no room for another block.
var ErrProducerIDsExhausted = errors.New("dest: producer ids exhausted")

// ProducerIDBlock is a range of producer ids reserved for this destination's clients:
// First up to First+Size-1.
type ProducerIDBlock struct {
	First int64
	Size  int64
}

// ProducerIDAllocator is optionally implemented by a Destination that hands out the
// producer ids of its own clients (the data plane's InitProducerId), in blocks, as
// Kafka's controller does for its brokers (ProducerIdControlManager, one
// ProducerIdsRecord per block). localdest.LocalDestination implements it.
type ProducerIDAllocator interface {
	// AllocateProducerIDs reserves the next block of ProducerIDBlockSize ids. The
	// reservation is durable before it returns (a file destination fsyncs it), so no
	// id of a block returned is ever returned again, after a restart or a crash
	// (kill -9) included; ids of a block whose holder stopped before using them are
	// skipped, as Kafka skips them. Blocks never overlap and grow; every id lies in
	// the destination's local range (LocalProducerIDRange). An error hands out
	// nothing; a full range is ErrProducerIDsExhausted.
	AllocateProducerIDs(ctx context.Context) (ProducerIDBlock, error)
}

// Producer-id ranges (LocalProducerIDRange).
const (
	// localProducerIDBase is the first id of any site's local range: Kafka allocates
	// its producer ids from 0 upwards, a block of 1000 at a time, and would need 2^62
	// allocations to get here, so mirrored ids of a Kafka source are all below it.
	localProducerIDBase = int64(1) << 62
	localSlotBits       = 16
	// LocalProducerIDRangeSize is the number of ids in one site's local range
	// (2^45, about 3.5e13: ten years of 100,000 InitProducerId calls a second).
	LocalProducerIDRangeSize = int64(1) << 45
)

// LocalProducerIDRange returns the range, first up to limit-1, a destination with
// clusterID allocates its clients' producer ids from when it has no stored range: the
// one of 2^16 slots of LocalProducerIDRangeSize ids above 2^62 picked by the FNV-1a
// hash of clusterID. Ids of a Kafka source are far below every slot; ids allocated by
// another kmirror site (a source in chained or two-way mirroring) lie in that site's
// own slot, another one unless the two cluster ids hash to the same slot (1 in 65,536).
// Either way the data plane keeps a site's producers out of mirror partitions and a
// stopped partition's MIRROR_PID_RESET expires the mirrored producers, so an equal id
// is never taken for the same producer; the ranges are a second, numeric separation.
func LocalProducerIDRange(clusterID string) (first, limit int64) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(clusterID))
	slot := int64(h.Sum32() & (1<<localSlotBits - 1))
	first = localProducerIDBase + slot*LocalProducerIDRangeSize
	return first, first + LocalProducerIDRangeSize
}
