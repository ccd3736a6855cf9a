package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
)

// pidAllocator hands out the producer ids of this site's clients from the durable
// blocks of a mirror.ProducerIDAllocator, as Kafka's ProducerIdManager hands out ids
// from the blocks its controller persists: an id is handed out only from a block that
// is already durable, so a restart (kill -9 included) never hands it out again, and
// the ids left in a block at a restart are skipped. Clients never choose an id: every
// InitProducerId that needs one takes the next, so a client reaches only ids of the
// site's own range (dest.LocalProducerIDRange), never the ids mirrored batches carry.
type pidAllocator struct {
	src mirror.ProducerIDAllocator

	mu        sync.Mutex
	next, end int64 // the current block's unused ids: next up to end-1
}

// id returns the next producer id, reserving a new block first when the current one
// is used up (one fsync per dest.ProducerIDBlockSize ids).
func (a *pidAllocator) id(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.end {
		b, err := a.src.AllocateProducerIDs(ctx)
		if err != nil {
			return -1, fmt.Errorf("dataplane: allocate producer ids: %w", err)
		}
		if b.Size <= 0 || b.First < 0 || b.First < a.end || b.First > b.First+b.Size {
			return -1, fmt.Errorf("dataplane: allocate producer ids: invalid block %d+%d after %d", b.First, b.Size, a.end)
		}
		a.next, a.end = b.First, b.First+b.Size
	}
	a.next++
	return a.next - 1, nil
}

// pidCode is the InitProducerId code of an allocation error: COORDINATOR_LOAD_IN_PROGRESS
// (retriable), as Kafka answers while its next block is not there yet, or
// UNKNOWN_SERVER_ERROR once the range is used up (retrying cannot help).
func pidCode(err error) int16 {
	if errors.Is(err, mirror.ErrProducerIDsExhausted) {
		return int16(admin.CodeUnknownServerError)
	}
	return int16(admin.CodeCoordinatorLoadInProgress)
}
