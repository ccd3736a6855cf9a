package localdest

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
)

// producerIDsFile holds the producer-id range of a file destination and the first id
// of the next block (Kafka's ProducerIdsRecord.NextProducerId), replaced atomically.
const producerIDsFile = "kmirror-producer-ids.json"

var _ dest.ProducerIDAllocator = (*LocalDestination)(nil)

// producerIDs is the allocator's state: ids First up to Limit-1, Next the first id of
// the next block. The range is fixed when the destination first allocates and stored
// with it, so it never moves, whatever LocalProducerIDRange answers later.
type producerIDs struct {
	First int64 `json:"first"`
	Limit int64 `json:"limit"`
	Next  int64 `json:"next"`
}

func (p producerIDs) valid() bool {
	return p.First >= 0 && p.First < p.Limit && p.Next >= p.First && p.Next <= p.Limit
}

// openProducerIDs reads the stored state of root, or starts the range of clusterID.
func openProducerIDs(root, clusterID string) (producerIDs, error) {
	var p producerIDs
	path := filepath.Join(root, producerIDsFile)
	if err := readJSON(path, &p); err != nil {
		return producerIDs{}, err
	}
	if p == (producerIDs{}) {
		return newProducerIDs(clusterID), nil
	}
	if !p.valid() {
		return producerIDs{}, fmt.Errorf("mirror: corrupt %s: range %d-%d, next %d", path, p.First, p.Limit, p.Next)
	}
	return p, nil
}

func newProducerIDs(clusterID string) producerIDs {
	first, limit := dest.LocalProducerIDRange(clusterID)
	return producerIDs{First: first, Limit: limit, Next: first}
}

// AllocateProducerIDs implements dest.ProducerIDAllocator: the next block is written to
// kmirror-producer-ids.json (atomicfile: fsynced, then renamed, then the directory
// fsynced) before it is returned; a memory destination keeps it in memory.
func (d *LocalDestination) AllocateProducerIDs(ctx context.Context) (dest.ProducerIDBlock, error) {
	if err := ctx.Err(); err != nil {
		return dest.ProducerIDBlock{}, err
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return dest.ProducerIDBlock{}, fetcher.ErrClosed
	}
	d.pidMu.Lock()
	defer d.pidMu.Unlock()
	cur := d.pids
	if cur.Limit-cur.Next < dest.ProducerIDBlockSize {
		return dest.ProducerIDBlock{}, fmt.Errorf("%w: range %d-%d is used up", dest.ErrProducerIDsExhausted, cur.First, cur.Limit-1)
	}
	next := cur
	next.Next += dest.ProducerIDBlockSize
	if d.root != "" {
		if err := writeJSON(d.root, producerIDsFile, next); err != nil {
			return dest.ProducerIDBlock{}, fmt.Errorf("mirror: reserve producer ids from %d: %w", cur.Next, err)
		}
	}
	d.pids = next
	return dest.ProducerIDBlock{First: cur.Next, Size: dest.ProducerIDBlockSize}, nil
}
