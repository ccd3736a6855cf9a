package records

import (
	"errors"
	"fmt"
)

// ErrCorrupt is matched (errors.Is) by every error that reports bytes that
// are not a valid v2 record batch: bad length, bad magic, CRC mismatch,
// undecodable records.
var ErrCorrupt = errors.New("records: corrupt batch")

// ErrIncomplete is matched by the error ParseBatch returns when the buffer
// holds only the start of a batch. It also matches ErrCorrupt.
var ErrIncomplete = errors.New("records: incomplete batch")

// ErrTooLarge is matched when decompressing a batch would exceed the decode
// limit (a decompression bomb or a batch far beyond any sane size). It also
// matches ErrCorrupt.
var ErrTooLarge = errors.New("records: decoded batch too large")

// ErrUnknownRecord is matched when a __mirror_state or controller record has
// an unknown record type or an unsupported version.
var ErrUnknownRecord = errors.New("records: unknown record type or version")

// ErrBadRecord is matched when a __mirror_state or controller record cannot
// be decoded (truncated, trailing bytes, invalid field) or encoded.
var ErrBadRecord = errors.New("records: malformed coordinator record")

// ErrBadUUID is matched when ParseUUID is given text that is not a Kafka
// UUID.
var ErrBadUUID = errors.New("records: invalid uuid")

// CorruptError describes a corrupt or incomplete batch. Position is a byte
// offset inside the buffer the caller handed in (the Iterator's or
// ParseBatch's buffer; the batch itself for Batch methods): the start of the
// batch for header and CRC problems, HeaderSize for problems in the record
// section. BaseOffset is the batch's base offset, or -1 when the header was
// too short to read it. It matches ErrCorrupt (and ErrIncomplete /
// ErrTooLarge when that is the cause).
type CorruptError struct {
	Position   int
	BaseOffset int64
	Reason     string

	kind error // ErrIncomplete, ErrTooLarge or nil
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("records: corrupt batch at byte %d (base offset %d): %s", e.Position, e.BaseOffset, e.Reason)
}

// Is reports whether target is ErrCorrupt, or the more specific sentinel
// that caused this error.
func (e *CorruptError) Is(target error) bool {
	return target == ErrCorrupt || (e.kind != nil && target == e.kind)
}

func corruptf(pos int, base int64, kind error, format string, args ...any) *CorruptError {
	return &CorruptError{Position: pos, BaseOffset: base, Reason: fmt.Sprintf(format, args...), kind: kind}
}

// RecordError describes a __mirror_state or controller record that cannot be
// decoded. It matches ErrBadRecord or ErrUnknownRecord.
type RecordError struct {
	// Part is "key" or "value".
	Part string
	// Type is the record type read from the key, or -1 when unknown.
	Type int16
	// Reason says what is wrong.
	Reason string

	kind error
}

// Error implements error.
func (e *RecordError) Error() string {
	return fmt.Sprintf("%v: %s of record type %d: %s", e.kind, e.Part, e.Type, e.Reason)
}

// Unwrap returns the sentinel this error matches.
func (e *RecordError) Unwrap() error { return e.kind }

func recordErr(kind error, part string, typ int16, format string, args ...any) *RecordError {
	return &RecordError{Part: part, Type: typ, Reason: fmt.Sprintf(format, args...), kind: kind}
}
