package compacted

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/kmirror/kmirror/records"
)

// abortedTxn is one entry of a fetch response's aborted transactions: the producer
// and the first offset of a transaction it aborted.
type abortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// fetched is what the replay decides on in one partition of a fetch response: the raw
// record batches and the aborted transactions.
type fetched struct {
	Batches []byte
	Aborted []abortedTxn
}

// passed is the outcome of replayBatches.
type passed struct {
	// Next is the offset after the last whole batch below the end (at least from).
	Next int64
	// Incomplete is the size of the trailing incomplete batch the walk stopped at (the
	// size its header declares, or records.HeaderSize when fewer than 12 bytes of it
	// came); 0 when the walk did not stop at one.
	Incomplete int
	// Truncated describes the incomplete batch (it matches records.ErrIncomplete and
	// records.ErrCorrupt); nil when Incomplete is 0.
	Truncated error
}

// replayBatches calls fn for every committed record of f with an offset in [from, end),
// in offset order. It skips control batches and the batches of aborted transactions:
// a transactional batch of producer P is aborted from the first offset of an aborted
// transaction the response lists for P up to P's ABORT marker. Every whole batch, also
// one without records (the log cleaner keeps those for producer state), moves Next to
// its last offset + 1. A corrupt batch (bad length or magic, CRC mismatch, undecodable
// records) is an error matching ErrReplay and records.ErrCorrupt, naming its offset.
func replayBatches(f fetched, from, end int64, fn func(offset int64, key, value []byte) error) (passed, error) {
	pending := slices.Clone(f.Aborted)
	slices.SortFunc(pending, func(a, b abortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	aborted := make(map[int64]bool) // producer ids inside an aborted transaction
	out := passed{Next: from}
	it := records.NewIterator(f.Batches)
	for it.Next() {
		b := it.Batch()
		if b.BaseOffset() >= end {
			return out, nil
		}
		if err := b.VerifyCRC(); err != nil {
			return out, fmt.Errorf("%w: batch at offset %d: %w", ErrReplay, b.BaseOffset(), err)
		}
		last := b.LastOffset()
		for len(pending) > 0 && pending[0].FirstOffset <= last {
			aborted[pending[0].ProducerID] = true
			pending = pending[1:]
		}
		attrs := b.Attributes()
		switch {
		case attrs.IsControl():
			if err := endTxn(b, aborted); err != nil {
				return out, err
			}
		case attrs.IsTransactional() && aborted[b.ProducerID()]:
		default:
			if err := replayBatch(b, from, end, fn); err != nil {
				return out, err
			}
		}
		out.Next = max(out.Next, last+1)
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("%w: after offset %d: %w", ErrReplay, out.Next-1, err)
	}
	if it.Partial() {
		rest := f.Batches[it.Pos():]
		out.Incomplete = incompleteSize(rest)
		_, out.Truncated = records.ParseBatch(rest)
	}
	return out, nil
}

// endTxn ends the aborted transaction of the producer of control batch b when b is an
// ABORT marker. A control batch without records (emptied by the cleaner) ends nothing.
func endTxn(b records.Batch, aborted map[int64]bool) error {
	if b.NumRecords() == 0 {
		return nil
	}
	t, err := b.ControlType()
	if err != nil {
		return fmt.Errorf("%w: control batch at offset %d: %w", ErrReplay, b.BaseOffset(), err)
	}
	if t == records.ControlAbort {
		delete(aborted, b.ProducerID())
	}
	return nil
}

// incompleteSize is the size the header of the incomplete batch rest declares, or
// records.HeaderSize when rest is too short to hold its length.
func incompleteSize(rest []byte) int {
	const lengthEnd = 12 // base offset int64, batch length int32
	if len(rest) < lengthEnd {
		return records.HeaderSize
	}
	return lengthEnd + int(binary.BigEndian.Uint32(rest[8:lengthEnd]))
}

// replayBatch calls fn for the records of b with an offset in [from, end).
func replayBatch(b records.Batch, from, end int64, fn func(offset int64, key, value []byte) error) error {
	if b.NumRecords() == 0 {
		return nil
	}
	recs, err := b.Records()
	if err != nil {
		return fmt.Errorf("%w: batch at offset %d: %w", ErrReplay, b.BaseOffset(), err)
	}
	for _, r := range recs {
		off := b.BaseOffset() + int64(r.OffsetDelta)
		if off < from || off >= end {
			continue
		}
		if err := fn(off, r.Key, r.Value); err != nil {
			return fmt.Errorf("compacted: replay of the record at offset %d: %w", off, err)
		}
	}
	return nil
}
