package records

import (
	"encoding/binary"
	"fmt"
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one decoded record of a v2 batch. Key, Value and header values
// are nil when absent (length -1 on the wire).
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
	Headers        []Header
}

// DefaultDecodeLimit is the largest decompressed record section Records
// accepts (256 MiB). Kafka's own batches are bounded by max.message.bytes
// (1 MiB by default) so anything near this is a decompression bomb.
const DefaultDecodeLimit = 256 << 20

// Records decompresses (when needed) and decodes the records of b. It is
// meant for verification and tests; the mirror path never calls it. The
// decompressed size is capped at DefaultDecodeLimit. For an uncompressed
// batch the returned keys and values alias b.
func (b Batch) Records() ([]Record, error) { return b.RecordsLimit(DefaultDecodeLimit) }

// RecordsLimit is Records with a caller-chosen cap on the decompressed size
// in bytes; exceeding it returns an error matching ErrTooLarge.
func (b Batch) RecordsLimit(limit int) ([]Record, error) {
	base := b.BaseOffset()
	n := b.NumRecords()
	if n < 0 {
		return nil, corruptf(0, base, nil, "negative record count %d", n)
	}
	data, err := decompress(b.Attributes().Compression(), b[HeaderSize:], limit)
	if err != nil {
		return nil, &CorruptError{Position: HeaderSize, BaseOffset: base, Reason: err.Error(), kind: kindOf(err)}
	}
	// Each record takes at least 7 bytes; refuse counts the data cannot
	// hold before allocating for them.
	if int64(n)*7 > int64(len(data)) {
		return nil, corruptf(HeaderSize, base, nil, "record count %d does not fit in %d bytes of records", n, len(data))
	}
	recs := make([]Record, 0, n)
	d := decoder{buf: data}
	for i := int32(0); i < n; i++ {
		r, err := d.record()
		if err != nil {
			return nil, corruptf(HeaderSize, base, nil, "record %d: %v", i, err)
		}
		recs = append(recs, r)
	}
	if len(d.buf) != 0 {
		return nil, corruptf(HeaderSize, base, nil, "%d bytes after the last of %d records", len(d.buf), n)
	}
	return recs, nil
}

// decoder reads v2 record fields; every method fails cleanly on short input.
type decoder struct{ buf []byte }

var errShort = fmt.Errorf("truncated")

func (d *decoder) varint() (int64, error) {
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		return 0, errShort
	}
	d.buf = d.buf[n:]
	return v, nil
}

func (d *decoder) varint32() (int32, error) {
	v, err := d.varint()
	if err != nil {
		return 0, err
	}
	if v != int64(int32(v)) {
		return 0, fmt.Errorf("varint %d overflows int32", v)
	}
	return int32(v), nil
}

// bytes reads a varint length and that many bytes; -1 gives nil.
func (d *decoder) bytes() ([]byte, error) {
	l, err := d.varint32()
	if err != nil {
		return nil, err
	}
	if l == -1 {
		return nil, nil
	}
	if l < 0 || int(l) > len(d.buf) {
		return nil, fmt.Errorf("length %d with %d bytes left", l, len(d.buf))
	}
	out := d.buf[:l:l]
	d.buf = d.buf[l:]
	return out, nil
}

func (d *decoder) record() (Record, error) {
	var r Record
	length, err := d.varint32()
	if err != nil {
		return r, err
	}
	if length < 0 || int(length) > len(d.buf) {
		return r, fmt.Errorf("record length %d with %d bytes left", length, len(d.buf))
	}
	body := decoder{buf: d.buf[:length]}
	d.buf = d.buf[length:]
	if len(body.buf) < 1 {
		return r, errShort
	}
	r.Attributes = int8(body.buf[0])
	body.buf = body.buf[1:]
	if r.TimestampDelta, err = body.varint(); err != nil {
		return r, err
	}
	if r.OffsetDelta, err = body.varint32(); err != nil {
		return r, err
	}
	if r.Key, err = body.bytes(); err != nil {
		return r, err
	}
	if r.Value, err = body.bytes(); err != nil {
		return r, err
	}
	nh, err := body.varint32()
	if err != nil {
		return r, err
	}
	// A header takes at least 2 bytes.
	if nh < 0 || int(nh)*2 > len(body.buf) {
		return r, fmt.Errorf("header count %d with %d bytes left", nh, len(body.buf))
	}
	if nh > 0 {
		r.Headers = make([]Header, nh)
	}
	for i := range r.Headers {
		k, err := body.bytes()
		if err != nil {
			return r, err
		}
		if k == nil {
			return r, fmt.Errorf("header %d has a null key", i)
		}
		r.Headers[i].Key = string(k)
		if r.Headers[i].Value, err = body.bytes(); err != nil {
			return r, err
		}
	}
	if len(body.buf) != 0 {
		return r, fmt.Errorf("%d bytes left inside the record", len(body.buf))
	}
	return r, nil
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// appendRecord appends r in v2 record form (length-prefixed).
func appendRecord(dst []byte, r *Record) []byte {
	var body []byte
	body = append(body, byte(r.Attributes))
	body = binary.AppendVarint(body, r.TimestampDelta)
	body = binary.AppendVarint(body, int64(r.OffsetDelta))
	body = appendVarBytes(body, r.Key)
	body = appendVarBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = binary.AppendVarint(body, int64(len(h.Key)))
		body = append(body, h.Key...)
		body = appendVarBytes(body, h.Value)
	}
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// BatchSpec is the header of a batch BuildBatch writes.
type BatchSpec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Compression          Compression
	LogAppendTime        bool
	Transactional        bool
	// Control sets the control attribute (used by BuildControlBatch; set it
	// yourself only to build unusual control batches in tests).
	Control bool
	// ProducerID -1 means none (then use ProducerEpoch -1, BaseSequence -1).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	BaseTimestamp int64
}

// BuildBatch builds a valid v2 batch (correct length, counts, max timestamp
// and CRC) holding recs, compressed with spec.Compression. It is for tests
// and simulations; the mirror path copies batches, never builds them.
//
// Record OffsetDelta and TimestampDelta are written as given, except that
// when every record has OffsetDelta 0 the deltas 0..n-1 are assigned (the
// common case of a batch without gaps). Given deltas must be strictly
// increasing and non-negative. LastOffsetDelta is the last record's delta
// (0 for an empty batch); MaxTimestamp is BaseTimestamp plus the largest
// TimestampDelta.
func BuildBatch(spec BatchSpec, recs []Record) ([]byte, error) {
	assign := true
	for i := range recs {
		if recs[i].OffsetDelta != 0 {
			assign = false
			break
		}
	}
	var raw []byte
	var lastDelta int32
	maxTS := spec.BaseTimestamp
	for i := range recs {
		r := recs[i]
		if assign {
			r.OffsetDelta = int32(i)
		} else if r.OffsetDelta < 0 || (i > 0 && r.OffsetDelta <= lastDelta) {
			return nil, fmt.Errorf("records: build batch: record %d offset delta %d not increasing", i, r.OffsetDelta)
		}
		lastDelta = r.OffsetDelta
		if ts := spec.BaseTimestamp + r.TimestampDelta; ts > maxTS {
			maxTS = ts
		}
		raw = appendRecord(raw, &r)
	}
	payload, err := compress(spec.Compression, raw)
	if err != nil {
		return nil, fmt.Errorf("records: build batch: %w", err)
	}
	attrs := Attributes(spec.Compression) & AttrCompressionMask
	if spec.LogAppendTime {
		attrs |= AttrLogAppendTime
	}
	if spec.Transactional {
		attrs |= AttrTransactional
	}
	if spec.Control {
		attrs |= AttrControl
	}
	return buildBatch(spec, attrs, lastDelta, maxTS, int32(len(recs)), payload), nil
}

func buildBatch(spec BatchSpec, attrs Attributes, lastDelta int32, maxTS int64, n int32, payload []byte) []byte {
	out := make([]byte, HeaderSize, HeaderSize+len(payload))
	be := binary.BigEndian
	be.PutUint64(out[offBaseOffset:], uint64(spec.BaseOffset))
	be.PutUint32(out[offBatchLength:], uint32(HeaderSize-lengthFieldEnd+len(payload)))
	be.PutUint32(out[offLeaderEpoch:], uint32(spec.PartitionLeaderEpoch))
	out[offMagic] = 2
	be.PutUint16(out[offAttributes:], uint16(attrs))
	be.PutUint32(out[offLastOffsetDelta:], uint32(lastDelta))
	be.PutUint64(out[offBaseTimestamp:], uint64(spec.BaseTimestamp))
	be.PutUint64(out[offMaxTimestamp:], uint64(maxTS))
	be.PutUint64(out[offProducerID:], uint64(spec.ProducerID))
	be.PutUint16(out[offProducerEpoch:], uint16(spec.ProducerEpoch))
	be.PutUint32(out[offBaseSequence:], uint32(spec.BaseSequence))
	be.PutUint32(out[offNumRecords:], uint32(n))
	out = append(out, payload...)
	be.PutUint32(out[offCRC:], Batch(out).ComputeCRC())
	return out
}
