package compacted

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/IBM/sarama"
)

// controlAbort is the type of an ABORT control record (key: version int16, type int16).
const controlAbort = 0

// replayBatches calls fn for every committed record of blk with an offset in [from, end),
// in offset order. It skips control batches and the batches of aborted transactions:
// a transactional batch of producer P is aborted from the first offset of an aborted
// transaction the response lists for P up to P's ABORT marker. It returns the offset
// after the last whole batch of blk (at least from), and whether it stopped at a
// truncated batch.
func replayBatches(blk *sarama.FetchResponseBlock, from, end int64, fn func(offset int64, key, value []byte) error) (next int64, partial bool, err error) {
	pending := slices.Clone(blk.AbortedTransactions)
	slices.SortFunc(pending, func(a, b *sarama.AbortedTransaction) int {
		switch {
		case a.FirstOffset < b.FirstOffset:
			return -1
		case a.FirstOffset > b.FirstOffset:
			return 1
		}
		return 0
	})
	aborted := make(map[int64]bool) // producer ids inside an aborted transaction
	next = from
	for _, rs := range blk.RecordsSet {
		b := rs.RecordBatch
		if b == nil {
			return next, false, fmt.Errorf("%w: legacy message set at offset %d", ErrReplay, next)
		}
		if b.PartialTrailingRecord {
			return next, true, nil
		}
		if b.FirstOffset >= end {
			break
		}
		last := b.FirstOffset + int64(b.LastOffsetDelta)
		for len(pending) > 0 && pending[0].FirstOffset <= last {
			aborted[pending[0].ProducerID] = true
			pending = pending[1:]
		}
		switch {
		case b.Control:
			if len(b.Records) > 0 && isAbortMarker(b.Records[0].Key) {
				delete(aborted, b.ProducerID)
			}
		case b.IsTransactional && aborted[b.ProducerID]:
		default:
			if err := replayBatch(b, from, end, fn); err != nil {
				return next, false, err
			}
		}
		next = max(next, last+1)
	}
	return next, false, nil
}

// replayBatch calls fn for the records of b with an offset in [from, end).
func replayBatch(b *sarama.RecordBatch, from, end int64, fn func(offset int64, key, value []byte) error) error {
	for _, r := range b.Records {
		off := b.FirstOffset + r.OffsetDelta
		if off < from || off >= end {
			continue
		}
		if err := fn(off, r.Key, r.Value); err != nil {
			return fmt.Errorf("compacted: replay of the record at offset %d: %w", off, err)
		}
	}
	return nil
}

func isAbortMarker(key []byte) bool {
	return len(key) >= 4 && binary.BigEndian.Uint16(key[2:4]) == controlAbort
}
