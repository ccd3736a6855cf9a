package statelog

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/kmirror/kmirror/records"
)

// maxTornBytes bounds what recovery may cut as a torn tail: the tail is at most the one
// write in flight at the crash, and an Append is one batch; more trailing bytes than
// this after an invalid batch cannot be a torn write.
const maxTornBytes = 64 << 20

// badBatch describes why the batch at a position is invalid.
type badBatch struct {
	reason string
}

// batchReader reads whole batches of a segment sequentially from position 0.
type batchReader struct {
	r        *bufio.Reader
	pos      int64 // position of the next batch
	size     int64 // bytes to read
	prevNext int64 // offsets must be at or above this
	buf      []byte
}

func newBatchReader(f *os.File, size, base int64) *batchReader {
	return &batchReader{r: bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20), size: size, prevNext: base}
}

// next returns the next valid batch (nil at the end), a non-nil *badBatch when the
// batch at br.pos is invalid (br.pos is left there), or an I/O error. The returned
// batch aliases the reader's buffer until the next call.
func (br *batchReader) next() (records.Batch, *badBatch, error) {
	remaining := br.size - br.pos
	if remaining == 0 {
		return nil, nil, nil
	}
	if remaining < records.HeaderSize {
		return nil, &badBatch{fmt.Sprintf("%d trailing bytes, less than a batch header", remaining)}, nil
	}
	hdr, err := br.r.Peek(records.HeaderSize)
	if err != nil {
		return nil, nil, fmt.Errorf("statelog: read segment: %w", err)
	}
	if bad := checkHeader(hdr, remaining, br.prevNext); bad != nil {
		return nil, bad, nil
	}
	size := 12 + int(int32(binary.BigEndian.Uint32(hdr[8:])))
	if cap(br.buf) < size {
		br.buf = make([]byte, size)
	}
	br.buf = br.buf[:size]
	if _, err := io.ReadFull(br.r, br.buf); err != nil {
		return nil, nil, fmt.Errorf("statelog: read segment: %w", err)
	}
	b := records.Batch(br.buf)
	if err := b.VerifyCRC(); err != nil {
		// the reader moved past the batch; a bad batch ends every scan
		return nil, &badBatch{"CRC mismatch"}, nil
	}
	br.pos += int64(size)
	br.prevNext = b.NextOffset()
	return b, nil, nil
}

// checkHeader checks a batch header read with remaining bytes left in the file and
// offsets required at or above prevNext.
func checkHeader(hdr []byte, remaining, prevNext int64) *badBatch {
	b := records.Batch(hdr)
	length := b.BatchLength()
	switch {
	case length < records.HeaderSize-12:
		return &badBatch{fmt.Sprintf("batch length %d below the minimum", length)}
	case int64(length)+12 > remaining:
		return &badBatch{fmt.Sprintf("batch of %d bytes runs past the end of the file (%d bytes left)", int64(length)+12, remaining)}
	case b.Magic() != 2:
		return &badBatch{fmt.Sprintf("magic %d, want 2", b.Magic())}
	case b.BaseOffset() < prevNext:
		return &badBatch{fmt.Sprintf("base offset %d below the previous batch's next offset %d", b.BaseOffset(), prevNext)}
	case b.LastOffsetDelta() < 0 || b.NumRecords() < 0:
		return &badBatch{fmt.Sprintf("negative last offset delta %d or record count %d", b.LastOffsetDelta(), b.NumRecords())}
	case b.Attributes().Compression() != records.CompressionNone || b.Attributes().IsControl():
		return &badBatch{fmt.Sprintf("attributes %#x: state batches are uncompressed data batches", uint16(b.Attributes()))}
	}
	return nil
}

// validBatchAfter reports whether a whole, CRC-valid batch with offsets at or above
// prevNext starts anywhere in f after position from (and before size). Recovery uses
// it to tell a torn tail (nothing valid follows) from corruption inside acknowledged
// data.
func validBatchAfter(f *os.File, from, size, prevNext int64) (bool, error) {
	if size-from > maxTornBytes {
		return true, nil // not one write: treat as data that must not be cut
	}
	rest := make([]byte, size-from)
	if _, err := f.ReadAt(rest, from); err != nil {
		return false, fmt.Errorf("statelog: read segment tail: %w", err)
	}
	for q := 1; q+records.HeaderSize <= len(rest); q++ {
		if rest[q+16] != 2 {
			continue
		}
		if checkHeader(rest[q:q+records.HeaderSize], int64(len(rest)-q), prevNext) != nil {
			continue
		}
		n := 12 + int(records.Batch(rest[q:]).BatchLength())
		if records.Batch(rest[q:q+n]).VerifyCRC() == nil {
			return true, nil
		}
	}
	return false, nil
}
