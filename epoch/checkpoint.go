package epoch

import (
	"errors"
	"fmt"
	"strconv"
)

// CheckpointVersion is the only leader-epoch-checkpoint format version Kafka writes.
const CheckpointVersion = 0

// ErrCorruptCheckpoint is matched (errors.Is) by every error DecodeCheckpoint returns.
var ErrCorruptCheckpoint = errors.New("epoch: corrupt leader-epoch checkpoint")

// CheckpointError says where and why a checkpoint could not be decoded. It matches
// ErrCorruptCheckpoint with errors.Is.
type CheckpointError struct {
	Line   int    // 1-based line number of the problem (the line after the last one when data is missing)
	Reason string // what is wrong
}

// Error implements error.
func (e *CheckpointError) Error() string {
	return fmt.Sprintf("%v: line %d: %s", ErrCorruptCheckpoint, e.Line, e.Reason)
}

// Is reports whether target is ErrCorruptCheckpoint.
func (e *CheckpointError) Is(target error) bool { return target == ErrCorruptCheckpoint }

// EncodeCheckpoint returns the content of a Kafka leader-epoch-checkpoint file holding
// entries: the version line "0", the entry count, then one "epoch startOffset" line per
// entry, every line ending in '\n' (what Kafka's CheckpointFile writes on Linux).
func EncodeCheckpoint(entries []Entry) []byte {
	b := make([]byte, 0, 4+24*len(entries))
	b = strconv.AppendInt(b, CheckpointVersion, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(len(entries)), 10)
	b = append(b, '\n')
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.StartOffset, 10)
		b = append(b, '\n')
	}
	return b
}

// DecodeCheckpoint parses a leader-epoch-checkpoint file. Empty data (Kafka creates the file
// empty) is an empty history. Otherwise the format is strict, exactly what EncodeCheckpoint
// and Kafka write: a version line "0", a count line, then exactly count lines
// "epoch startOffset" (canonical decimal numbers — no sign, no leading zeros — separated by
// one space), every line ending in '\n', nothing after. The entries must form a valid
// history (epochs and start offsets ≥ 0 and strictly increasing). Any deviation is a
// *CheckpointError naming the line, matching ErrCorruptCheckpoint. For valid non-empty data,
// EncodeCheckpoint(entries) returns data unchanged.
//
// Kafka's own reader is more lenient (any whitespace, signs, leading zeros, a missing final
// newline, non-monotonic entries it silently repairs); a file kmirror refuses is one Kafka
// itself never writes.
func DecodeCheckpoint(data []byte) ([]Entry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	r := lineReader{data: data}

	line, err := r.next()
	if err != nil {
		return nil, err
	}
	v, ok := parseCanonical(line, 31)
	if !ok {
		return nil, r.errorf("version %q is not a number", line)
	}
	if v != CheckpointVersion {
		return nil, r.errorf("unsupported version %d, want %d", v, CheckpointVersion)
	}

	line, err = r.next()
	if err != nil {
		return nil, err
	}
	count, ok := parseCanonical(line, 31)
	if !ok {
		return nil, r.errorf("entry count %q is not a non-negative number", line)
	}
	// Each entry line takes at least 4 bytes ("0 0\n"): bound the allocation by the data,
	// not by the announced count.
	entries := make([]Entry, 0, min(count, int64(len(data)-r.pos)/4))
	for i := int64(0); i < count; i++ {
		line, err = r.next()
		if err != nil {
			if r.pos >= len(data) {
				return nil, r.errorf("count line announced %d entries, found %d", count, i)
			}
			return nil, err
		}
		sp := -1
		for j, ch := range line {
			if ch == ' ' {
				sp = j
				break
			}
		}
		if sp < 0 {
			return nil, r.errorf("entry %q is not \"epoch startOffset\"", line)
		}
		ep, ok := parseCanonical(line[:sp], 31)
		if !ok {
			return nil, r.errorf("epoch %q is not a non-negative int32", line[:sp])
		}
		off, ok := parseCanonical(line[sp+1:], 63)
		if !ok {
			return nil, r.errorf("start offset %q is not a non-negative int64", line[sp+1:])
		}
		e := Entry{Epoch: int32(ep), StartOffset: off}
		if n := len(entries); n > 0 {
			prev := entries[n-1]
			if e.Epoch <= prev.Epoch {
				return nil, r.errorf("epoch %d not above the previous entry's epoch %d", e.Epoch, prev.Epoch)
			}
			if e.StartOffset <= prev.StartOffset {
				return nil, r.errorf("start offset %d not above the previous entry's start offset %d",
					e.StartOffset, prev.StartOffset)
			}
		}
		entries = append(entries, e)
	}
	if r.pos != len(data) {
		return nil, &CheckpointError{Line: r.line + 1,
			Reason: fmt.Sprintf("%d bytes after the %d entries the count line announced", len(data)-r.pos, count)}
	}
	return entries, nil
}

// lineReader splits data into '\n'-terminated lines, counting them.
type lineReader struct {
	data []byte
	pos  int // offset of the next line
	line int // 1-based number of the line last returned
}

// next returns the next line without its '\n'; a missing line or a missing '\n' is an error.
func (r *lineReader) next() ([]byte, error) {
	r.line++
	if r.pos >= len(r.data) {
		return nil, r.errorf("unexpected end of data (missing line)")
	}
	for i := r.pos; i < len(r.data); i++ {
		if r.data[i] == '\n' {
			line := r.data[r.pos:i]
			r.pos = i + 1
			return line, nil
		}
	}
	return nil, r.errorf("line not terminated by a newline")
}

func (r *lineReader) errorf(format string, args ...any) error {
	return &CheckpointError{Line: r.line, Reason: fmt.Sprintf(format, args...)}
}

// parseCanonical parses a canonical non-negative decimal (digits only, no leading zero unless
// the number is 0) that fits in bits bits. ok is false otherwise.
func parseCanonical(s []byte, bits int) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	limit := uint64(1)<<bits - 1
	var v uint64
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + uint64(ch-'0') // ≤ 19 digits: at most 9_999_999_999_999_999_999 < 2^64
		if v > limit {
			return 0, false
		}
	}
	return int64(v), true
}
