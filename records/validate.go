package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The refusals ValidateClientBatch reports. Each is matched (errors.Is) by
// the *ValidationError it returns and names the Kafka error a broker
// answers for that case.
var (
	// ErrInvalidRecord: the batch or one of its records is malformed or
	// breaks a rule (INVALID_RECORD, 87).
	ErrInvalidRecord = errors.New("records: invalid record")
	// ErrInvalidTimestamp: a record timestamp is out of the topic's
	// range, or the client claimed LogAppendTime (INVALID_TIMESTAMP, 32).
	ErrInvalidTimestamp = errors.New("records: invalid timestamp")
	// ErrUnsupportedCompression: the codec bits name no codec Kafka has
	// (UNSUPPORTED_COMPRESSION_TYPE, 76).
	ErrUnsupportedCompression = errors.New("records: unsupported compression type")
	// ErrDecodeLimit: the records decompress to more than the decode
	// limit, a decompression bomb (MESSAGE_TOO_LARGE, 10).
	ErrDecodeLimit = errors.New("records: decompressed records exceed the limit")
)

// ValidationError is a client batch ValidateClientBatch refuses. It matches
// its Kind (one of ErrInvalidRecord, ErrInvalidTimestamp,
// ErrUnsupportedCompression, ErrDecodeLimit; ErrCorrupt for a CRC mismatch).
type ValidationError struct {
	// Kind is the sentinel the error matches.
	Kind error
	// Record is the index of the offending record, or -1 when the batch
	// as a whole is refused.
	Record int
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *ValidationError) Error() string {
	if e.Record >= 0 {
		return fmt.Sprintf("%v: record %d: %s", e.Kind, e.Record, e.Reason)
	}
	return fmt.Sprintf("%v: %s", e.Kind, e.Reason)
}

// Unwrap returns Kind.
func (e *ValidationError) Unwrap() error { return e.Kind }

func invalidf(kind error, rec int, format string, args ...any) *ValidationError {
	return &ValidationError{Kind: kind, Record: rec, Reason: fmt.Sprintf(format, args...)}
}

// ClientRules are the topic's rules a client batch is checked against; see
// ValidateClientBatch. The zero value checks structure only: CreateTime
// with no timestamp bound and no key requirement, but a DecodeLimit of 0
// refuses every record, so set it.
type ClientRules struct {
	// NowMs is the broker's clock in Unix milliseconds (the package reads
	// no clock).
	NowMs int64
	// LogAppendTime is message.timestamp.type=LogAppendTime: the broker
	// stamps the time, and record timestamps are not checked.
	LogAppendTime bool
	// BeforeMaxMs and AfterMaxMs are message.timestamp.before.max.ms and
	// message.timestamp.after.max.ms (CreateTime only): a record timestamp
	// older than NowMs-BeforeMaxMs or newer than NowMs+AfterMaxMs is
	// refused. Kafka's default for both is math.MaxInt64 (no bound);
	// negative values are taken as 0.
	BeforeMaxMs, AfterMaxMs int64
	// Compacted is cleanup.policy containing compact: every record needs
	// a key.
	Compacted bool
	// DecodeLimit bounds the decompressed record section in bytes.
	DecodeLimit int
}

// ClientBatchInfo describes a batch ValidateClientBatch accepted.
type ClientBatchInfo struct {
	// MaxTimestamp is the largest record timestamp (-1 when no record has
	// one), or NowMs under LogAppendTime: the value the batch header must
	// carry, which StampClientBatch writes.
	MaxTimestamp int64
}

// ValidateClientBatch checks one CRC-framed v2 batch a client produced, as
// a Kafka partition leader does before it appends (the checks of
// LogValidator and of the log's append analysis, for a client origin),
// without changing b. It refuses:
//   - a CRC mismatch (ErrCorrupt);
//   - a base offset other than 0, a control batch, a producer id without
//     a base sequence, a transactional batch without a producer id, a record count or last offset delta below 1 or that
//     disagree, or a count other than the records inside (ErrInvalidRecord);
//   - codec bits 5-7 (ErrUnsupportedCompression); a payload that does not
//     decode under its codec (ErrInvalidRecord); one that decodes to more
//     than rules.DecodeLimit bytes (ErrDecodeLimit);
//   - a record whose length does not cover exactly its fields, a varint
//     that overflows, an offset delta other than its index, a null header
//     key, bytes after the last record, a record without a key on a
//     compacted topic (ErrInvalidRecord);
//   - the LogAppendTime attribute set by the client, or under CreateTime a
//     record timestamp (other than -1, none) outside the rules' window
//     (ErrInvalidTimestamp).
//
// Mirrored batches are not client batches: they are never passed here.
func ValidateClientBatch(b Batch, rules ClientRules) (ClientBatchInfo, error) {
	if err := b.VerifyCRC(); err != nil {
		return ClientBatchInfo{}, &ValidationError{Kind: ErrCorrupt, Record: -1, Reason: err.Error()}
	}
	a := b.Attributes()
	n, lastDelta := b.NumRecords(), b.LastOffsetDelta()
	switch {
	case b.BaseOffset() != 0:
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "base offset %d, a client batch starts at 0", b.BaseOffset())
	case a.IsControl():
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "clients may not write control batches")
	case int64(lastDelta)+1 <= 0:
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "invalid offset range: last offset delta %d", lastDelta)
	case n <= 0:
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "invalid record count %d", n)
	case int64(n) != int64(lastDelta)+1:
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "last offset delta %d disagrees with the record count %d", lastDelta, n)
	case a.IsTransactional() && b.ProducerID() < 0:
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "transactional batch without a producer id")
	case b.ProducerID() >= 0 && b.BaseSequence() < 0:
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "producer id %d with base sequence %d", b.ProducerID(), b.BaseSequence())
	case a.Compression() > CompressionZstd:
		return ClientBatchInfo{}, invalidf(ErrUnsupportedCompression, -1, "unknown compression codec %d", int8(a.Compression()))
	case a.LogAppendTime():
		return ClientBatchInfo{}, invalidf(ErrInvalidTimestamp, -1, "the producer set the timestamp type to LogAppendTime")
	}
	data, err := decompress(a.Compression(), b[HeaderSize:], rules.DecodeLimit)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return ClientBatchInfo{}, invalidf(ErrDecodeLimit, -1, "%s payload decompresses to more than %d bytes", a.Compression(), rules.DecodeLimit)
		}
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "%s payload does not decode: %v", a.Compression(), err)
	}
	// Each record takes at least 7 bytes: refuse a count the data cannot
	// hold before walking it.
	if int64(n)*7 > int64(len(data)) {
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "record count %d does not fit in %d bytes of records", n, len(data))
	}
	baseTS := b.BaseTimestamp()
	maxTS := int64(-1)
	d := decoder{buf: data}
	for i := 0; i < int(n); i++ {
		r, err := d.record()
		if err != nil {
			return ClientBatchInfo{}, invalidf(ErrInvalidRecord, i, "%v", err)
		}
		if r.OffsetDelta != int32(i) {
			return ClientBatchInfo{}, invalidf(ErrInvalidRecord, i, "offset delta %d, want %d", r.OffsetDelta, i)
		}
		if rules.Compacted && r.Key == nil {
			return ClientBatchInfo{}, invalidf(ErrInvalidRecord, i, "a compacted topic cannot accept a record without a key")
		}
		ts, ok := addTimestamp(baseTS, r.TimestampDelta)
		if !ok {
			return ClientBatchInfo{}, invalidf(ErrInvalidTimestamp, i, "timestamp %d%+d overflows", baseTS, r.TimestampDelta)
		}
		if !rules.LogAppendTime && ts != -1 && !inWindow(ts, rules) {
			return ClientBatchInfo{}, invalidf(ErrInvalidTimestamp, i, "timestamp %d is out of range [now-%d, now+%d] (now %d)",
				ts, max(rules.BeforeMaxMs, 0), max(rules.AfterMaxMs, 0), rules.NowMs)
		}
		maxTS = max(maxTS, ts)
	}
	if len(d.buf) != 0 {
		return ClientBatchInfo{}, invalidf(ErrInvalidRecord, -1, "%d bytes after the last of %d records", len(d.buf), n)
	}
	if rules.LogAppendTime {
		maxTS = rules.NowMs
	}
	return ClientBatchInfo{MaxTimestamp: maxTS}, nil
}

// addTimestamp returns base+delta, false on int64 overflow.
func addTimestamp(base, delta int64) (int64, bool) {
	s := base + delta
	if (delta > 0 && s < base) || (delta < 0 && s > base) {
		return 0, false
	}
	return s, true
}

// inWindow reports whether ts lies in [now-before, now+after], computed
// without overflow.
func inWindow(ts int64, r ClientRules) bool {
	before, after := max(r.BeforeMaxMs, 0), max(r.AfterMaxMs, 0)
	if ts <= r.NowMs {
		// r.NowMs - ts may overflow only when it exceeds MaxInt64.
		diff := uint64(r.NowMs) - uint64(ts)
		return diff <= uint64(before)
	}
	return uint64(ts)-uint64(r.NowMs) <= uint64(after)
}

// StampClientBatch writes what a leader writes into an accepted client
// batch's header, as Kafka does in place: the max timestamp info gives
// (NowMs under LogAppendTime, with the LogAppendTime attribute set), and
// the CRC recomputed when anything changed. It reports whether b changed.
// b must be a batch ValidateClientBatch accepted; it is written in place,
// so pass a copy of bytes the caller must not change. Mirrored batches are
// never stamped: their bytes stay the source's.
func StampClientBatch(b Batch, info ClientBatchInfo, logAppendTime bool) bool {
	a := b.Attributes()
	if logAppendTime {
		a |= AttrLogAppendTime
	}
	ts := info.MaxTimestamp
	if a == b.Attributes() && ts == b.MaxTimestamp() {
		return false
	}
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(a))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], b.ComputeCRC())
	return true
}

// NoTimestampBound is the default of message.timestamp.before.max.ms and
// message.timestamp.after.max.ms: no bound.
const NoTimestampBound = math.MaxInt64
