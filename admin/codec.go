package admin

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

//go:generate go run ../internal/admingen -in definitions -out zz_generated.go

// Decoding errors. Every error returned by a ReadFrom or ReadFromLimit method
// wraps exactly one of them.
var (
	// ErrTruncated: the input ended before the message did.
	ErrTruncated = errors.New("admin: truncated message")
	// ErrMalformed: the input is not a valid encoding of the message (null in
	// a non-nullable field, impossible length, trailing bytes, ...).
	ErrMalformed = errors.New("admin: malformed message")
	// ErrUnsupportedVersion: the message version is outside its valid range.
	ErrUnsupportedVersion = errors.New("admin: unsupported version")
	// ErrTooLarge: the message holds more array elements than the decoder
	// was allowed to allocate (ReadFromLimit, ServerConfig.MaxDecodedElements).
	ErrTooLarge = errors.New("admin: message exceeds the decode limit")
)

// DefaultMaxDecodedElements is the number of array elements (of every array of
// a message together) ReadFrom decodes before it fails with ErrTooLarge:
// 1,048,576. It bounds the memory of a decoded message independently of its
// size: an element is at most a few dozen bytes of Go memory (the decoded
// strings and bytes themselves are copies of at most the input's bytes),
// whereas the smallest encoded element is one byte.
const DefaultMaxDecodedElements = 1 << 20

// DecodeError says which message failed to decode and why.
type DecodeError struct {
	Message string // Go type name of the message, e.g. "ReadMirrorStatesRequest"
	Offset  int    // bytes consumed when the error was detected (-1 if unknown)
	Reason  string
	Err     error // ErrTruncated, ErrMalformed or ErrUnsupportedVersion
}

// Error implements error.
func (e *DecodeError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("%v: %s at byte %d: %s", e.Err, e.Message, e.Offset, e.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Message, e.Reason)
}

// Unwrap returns the sentinel.
func (e *DecodeError) Unwrap() error { return e.Err }

func unsupportedVersion(msg string, version int16) error {
	return &DecodeError{Message: msg, Offset: -1, Reason: fmt.Sprintf("version %d", version), Err: ErrUnsupportedVersion}
}

// decoder is a kbin.Reader that can also record a semantic error. Once an
// error is recorded, Ok reports false and every later read yields zero
// values, so generated loops stop early. Not safe for concurrent use.
type decoder struct {
	kbin.Reader
	total  int
	elems  int    // array elements this decoder may still allocate
	reason string // first semantic error, "" if none
	at     int
	large  bool // the error is the element limit (ErrTooLarge)
}

func newDecoder(src []byte, maxElements int) *decoder {
	return &decoder{Reader: kbin.Reader{Src: src}, total: len(src), elems: max(maxElements, 0)}
}

// sub returns a decoder for a tagged field's bytes sharing d's element budget
// (absorb hands the rest back).
func (d *decoder) sub(src []byte) *decoder { return newDecoder(src, d.elems) }

// Ok reports whether no read has failed and no semantic error was recorded.
func (d *decoder) Ok() bool { return d.reason == "" && d.Reader.Ok() }

// fail records a semantic error (the first one wins) and empties the input.
func (d *decoder) fail(format string, args ...any) {
	if d.reason == "" {
		d.reason = fmt.Sprintf(format, args...)
		d.at = d.total - len(d.Src)
	}
	d.Src = nil
}

// arrayLen reads a compact array length: -1 for null (only if nullable),
// otherwise a count whose minimal encoding fits in the remaining input.
// Any failure returns -2 with the error recorded.
func (d *decoder) arrayLen(nullable bool, minElem int) int {
	n := int64(d.Uvarint()) - 1
	if !d.Ok() {
		return -2
	}
	if n < 0 {
		if nullable {
			return -1
		}
		d.fail("null array in a non-nullable field")
		return -2
	}
	if n*int64(max(minElem, 1)) > int64(len(d.Src)) {
		d.fail("array of %d elements cannot fit in %d remaining bytes", n, len(d.Src))
		return -2
	}
	if n > int64(d.elems) {
		d.fail("array of %d elements exceeds the decode limit (%d elements left)", n, d.elems)
		d.large = true
		return -2
	}
	d.elems -= int(n)
	return int(n)
}

// compactString reads a non-nullable compact string.
func (d *decoder) compactString() string {
	n := int64(d.Uvarint()) - 1
	if !d.Ok() {
		return ""
	}
	if n < 0 {
		d.fail("null string in a non-nullable field")
		return ""
	}
	return string(d.Span(int(n)))
}

// compactBytes reads compact bytes, copying them out of the input.
func (d *decoder) compactBytes(nullable bool) []byte {
	n := int64(d.Uvarint()) - 1
	if !d.Ok() {
		return nil
	}
	if n < 0 {
		if !nullable {
			d.fail("null bytes in a non-nullable field")
		}
		return nil
	}
	return append([]byte{}, d.Span(int(n))...)
}

// absorb checks that the tagged field decoded by sub used all its bytes and
// carries any error of sub into d.
func (d *decoder) absorb(sub *decoder, field string) {
	d.elems = sub.elems
	d.large = d.large || (sub.large && d.reason == "")
	switch {
	case sub.reason != "":
		d.fail("tagged field %s: %s", field, sub.reason)
	case !sub.Reader.Ok():
		d.fail("tagged field %s: truncated", field)
	case len(sub.Src) != 0:
		d.fail("tagged field %s: %d trailing bytes", field, len(sub.Src))
	}
}

// finish turns the decoder state into the ReadFrom result.
func (d *decoder) finish(msg string) error {
	switch {
	case d.reason != "" && d.large:
		return &DecodeError{Message: msg, Offset: d.at, Reason: d.reason, Err: ErrTooLarge}
	case d.reason != "":
		return &DecodeError{Message: msg, Offset: d.at, Reason: d.reason, Err: ErrMalformed}
	case !d.Reader.Ok():
		return &DecodeError{Message: msg, Offset: -1, Reason: fmt.Sprintf("input of %d bytes ended early", d.total), Err: ErrTruncated}
	case len(d.Src) != 0:
		return &DecodeError{Message: msg, Offset: d.total - len(d.Src), Reason: fmt.Sprintf("%d trailing bytes", len(d.Src)), Err: ErrMalformed}
	}
	return nil
}

// derefString returns *s, or "" for nil; generated code uses it to encode a
// *string field in a version where it is not nullable.
func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
