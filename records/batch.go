package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the size of a v2 record batch header; the records (possibly
// compressed) follow it.
const HeaderSize = 61

// Offsets of the v2 batch header fields.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// lengthFieldEnd is where the bytes counted by batchLength start.
	lengthFieldEnd = 12
	// minBatchLength is the smallest legal batchLength (a header, no records).
	minBatchLength = HeaderSize - lengthFieldEnd
)

// castagnoli is the CRC-32C table; hash/crc32 uses the CPU's CRC32
// instructions for it where available. Never written after init.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is the codec in bits 0-2 of the batch attributes.
type Compression int8

// The codecs Kafka defines.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// String returns Kafka's name of the codec ("none", "gzip", ...).
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

// Attributes is the int16 attributes field of a v2 batch.
type Attributes int16

// Attribute bits.
const (
	AttrCompressionMask Attributes = 0x07
	AttrLogAppendTime   Attributes = 0x08
	AttrTransactional   Attributes = 0x10
	AttrControl         Attributes = 0x20
	AttrDeleteHorizon   Attributes = 0x40
)

// Compression returns the codec (bits 0-2).
func (a Attributes) Compression() Compression { return Compression(a & AttrCompressionMask) }

// LogAppendTime reports bit 3: timestamps are broker append time.
func (a Attributes) LogAppendTime() bool { return a&AttrLogAppendTime != 0 }

// IsTransactional reports bit 4.
func (a Attributes) IsTransactional() bool { return a&AttrTransactional != 0 }

// IsControl reports bit 5: the batch holds control records.
func (a Attributes) IsControl() bool { return a&AttrControl != 0 }

// HasDeleteHorizon reports bit 6: the log cleaner set a delete horizon in
// the base timestamp.
func (a Attributes) HasDeleteHorizon() bool { return a&AttrDeleteHorizon != 0 }

// Batch is a view over exactly one whole v2 record batch. It never copies:
// accessors read the underlying bytes and the setters write them. Obtain one
// from ParseBatch or an Iterator, which check that the slice is a complete
// v2 batch; the accessors assume so.
type Batch []byte

func (b Batch) u16(off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
func (b Batch) u32(off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
func (b Batch) u64(off int) uint64 { return binary.BigEndian.Uint64(b[off:]) }

// BaseOffset returns the offset of the first record.
func (b Batch) BaseOffset() int64 { return int64(b.u64(offBaseOffset)) }

// BatchLength returns the number of bytes after the length field; the batch
// is 12+BatchLength bytes.
func (b Batch) BatchLength() int32 { return int32(b.u32(offBatchLength)) }

// PartitionLeaderEpoch returns the leader epoch stamped by the broker that
// appended the batch.
func (b Batch) PartitionLeaderEpoch() int32 { return int32(b.u32(offLeaderEpoch)) }

// Magic returns the format version (always 2 for a parsed Batch).
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// CRC returns the stored CRC-32C.
func (b Batch) CRC() uint32 { return b.u32(offCRC) }

// Attributes returns the attributes field.
func (b Batch) Attributes() Attributes { return Attributes(b.u16(offAttributes)) }

// LastOffsetDelta returns the offset delta of the last record.
func (b Batch) LastOffsetDelta() int32 { return int32(b.u32(offLastOffsetDelta)) }

// BaseTimestamp returns the first timestamp (or the delete horizon when
// HasDeleteHorizon).
func (b Batch) BaseTimestamp() int64 { return int64(b.u64(offBaseTimestamp)) }

// MaxTimestamp returns the largest timestamp in the batch.
func (b Batch) MaxTimestamp() int64 { return int64(b.u64(offMaxTimestamp)) }

// ProducerID returns the producer id, -1 when none.
func (b Batch) ProducerID() int64 { return int64(b.u64(offProducerID)) }

// ProducerEpoch returns the producer epoch, -1 when none.
func (b Batch) ProducerEpoch() int16 { return int16(b.u16(offProducerEpoch)) }

// BaseSequence returns the sequence of the first record, -1 when none.
func (b Batch) BaseSequence() int32 { return int32(b.u32(offBaseSequence)) }

// NumRecords returns the record count stored in the header.
func (b Batch) NumRecords() int32 { return int32(b.u32(offNumRecords)) }

// LastOffset returns BaseOffset + LastOffsetDelta.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset returns LastOffset + 1, the offset that follows the batch.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// ComputeCRC returns the CRC-32C (Castagnoli) of b[21:], the bytes the
// stored CRC covers.
func (b Batch) ComputeCRC() uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }

// VerifyCRC checks the stored CRC against the bytes. A mismatch returns a
// *CorruptError (Position 0, relative to the batch). It does not allocate
// when the CRC matches.
func (b Batch) VerifyCRC() error {
	if got, want := b.ComputeCRC(), b.CRC(); got != want {
		return corruptf(0, b.BaseOffset(), nil, "crc mismatch: stored %#08x, computed %#08x", want, got)
	}
	return nil
}

// SetBaseOffset overwrites the base offset in place. The field is outside
// the CRC, so the batch stays valid; nothing else is touched.
func (b Batch) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(o)) }

// SetPartitionLeaderEpoch overwrites the partition leader epoch in place
// (outside the CRC); nothing else is touched.
func (b Batch) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(e))
}

// checkHeader validates the start of buf (at absolute position pos in the
// caller's buffer). It returns the total size of the batch, or incomplete
// true when buf holds a plausible but truncated batch.
func checkHeader(buf []byte, pos int) (size int, incomplete bool, err error) {
	base := int64(-1)
	if len(buf) >= offBatchLength {
		base = int64(binary.BigEndian.Uint64(buf))
	}
	if len(buf) < lengthFieldEnd {
		return 0, true, nil
	}
	length := int32(binary.BigEndian.Uint32(buf[offBatchLength:]))
	if length < minBatchLength {
		return 0, false, corruptf(pos, base, nil, "batch length %d below the minimum %d", length, minBatchLength)
	}
	if len(buf) > offMagic && buf[offMagic] != 2 {
		return 0, false, corruptf(pos, base, nil, "unsupported magic %d (only v2 batches are supported)", int8(buf[offMagic]))
	}
	size = lengthFieldEnd + int(length)
	if len(buf) < size {
		return size, true, nil
	}
	return size, false, nil
}

// ParseBatch returns a view of the first batch of buf. It checks the
// length, the magic byte and that the whole batch is present, but not the
// CRC. A truncated batch returns an error matching ErrIncomplete (and
// ErrCorrupt).
func ParseBatch(buf []byte) (Batch, error) {
	size, incomplete, err := checkHeader(buf, 0)
	if err != nil {
		return nil, err
	}
	if incomplete {
		base := int64(-1)
		if len(buf) >= offBatchLength {
			base = int64(binary.BigEndian.Uint64(buf))
		}
		if size == 0 {
			return nil, corruptf(0, base, ErrIncomplete, "%d bytes, too short for a batch header", len(buf))
		}
		return nil, corruptf(0, base, ErrIncomplete, "batch needs %d bytes, buffer has %d", size, len(buf))
	}
	return Batch(buf[:size:size]), nil
}

// Iterator walks the batches of a buffer (a fetch response's RecordBatches,
// a log segment) without copying:
//
//	it := records.NewIterator(buf)
//	for it.Next() {
//		b := it.Batch()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
//	if it.Partial() { /* trailing incomplete batch at it.Pos() */ }
//
// A trailing incomplete batch, which fetch responses may carry, stops the
// walk and is reported by Partial, not as an error. A corrupt header stops
// the walk with a *CorruptError naming the byte position and base offset.
// Not safe for concurrent use.
type Iterator struct {
	buf     []byte
	pos     int
	cur     Batch
	err     error
	partial bool
}

// NewIterator returns an iterator over buf.
func NewIterator(buf []byte) *Iterator { return &Iterator{buf: buf} }

// Reset makes it iterate over buf from the start, so one Iterator can be
// reused without allocating.
func (it *Iterator) Reset(buf []byte) { *it = Iterator{buf: buf} }

// Next advances to the next batch and reports whether there is one.
func (it *Iterator) Next() bool {
	it.cur = nil
	if it.err != nil || it.partial || it.pos >= len(it.buf) {
		return false
	}
	rest := it.buf[it.pos:]
	size, incomplete, err := checkHeader(rest, it.pos)
	if err != nil {
		it.err = err
		return false
	}
	if incomplete {
		it.partial = true
		return false
	}
	it.cur = Batch(rest[:size:size])
	it.pos += size
	return true
}

// Batch returns the current batch (valid after Next returned true). It
// aliases the buffer.
func (it *Iterator) Batch() Batch { return it.cur }

// Err returns the corruption that stopped the walk, if any.
func (it *Iterator) Err() error { return it.err }

// Partial reports whether the walk stopped at a trailing incomplete batch.
func (it *Iterator) Partial() bool { return it.partial }

// Pos returns the byte position just after the last whole batch returned,
// which is where a partial or corrupt batch starts once Next returns false.
func (it *Iterator) Pos() int { return it.pos }
