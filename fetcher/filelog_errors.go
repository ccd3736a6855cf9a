package fetcher

import (
	"errors"
	"fmt"
)

// Errors of a FileLog's recovery (OpenFileLog). A CorruptSegmentError is
// Is(ErrCorruptLog) and unwraps to its reason, which is one of the reasons
// below or a records error (Is(records.ErrCorrupt)) for an invalid batch.
var (
	// ErrCorruptLog is returned by OpenFileLog (as a *CorruptSegmentError)
	// when flushed data cannot be trusted: an invalid batch in a rolled
	// segment or below the active segment's flush point, a missing segment
	// file, a segment that does not match what was recorded for it.
	// Nothing was deleted; FileLogOptions.RepairCorruption cuts the log at
	// the first bad offset instead.
	ErrCorruptLog = errors.New("fetcher: corrupt log")
	// ErrSegmentMissing is the reason of a CorruptSegmentError for a segment
	// file that the recovery point lists but the directory lacks.
	ErrSegmentMissing = errors.New("fetcher: segment file missing")
	// ErrSegmentMismatch is the reason of a CorruptSegmentError for a
	// segment whose size or end offset differs from what the recovery point
	// recorded (for example a file cut at a batch boundary).
	ErrSegmentMismatch = errors.New("fetcher: segment differs from its recovery point")
	// ErrSegmentUnexpected is the reason of a CorruptSegmentError for a
	// segment file that the recovery point does not list.
	ErrSegmentUnexpected = errors.New("fetcher: segment file not in the recovery point")
	// ErrSegmentOverlap is the reason of a CorruptSegmentError for a segment
	// whose base offset is below the end of the segment before it.
	ErrSegmentOverlap = errors.New("fetcher: segment overlaps the one before it")
	// ErrLogFailed is returned by the mutating methods of a FileLog after a
	// truncation failed half-way: the files and the in-memory state may
	// differ, and only Close (which then writes nothing) and a reopen, which
	// redoes the truncation, are safe.
	ErrLogFailed = errors.New("fetcher: log failed, reopen it")
)

// CorruptSegmentError reports flushed data of a FileLog that cannot be
// trusted. It is Is(ErrCorruptLog) and unwraps to Reason.
type CorruptSegmentError struct {
	// File is the path of the segment file.
	File string
	// Offset is the first offset that is not known good: the base offset of
	// the invalid batch, or the end of the valid data before Position.
	Offset int64
	// Position is the byte position in File where the problem starts.
	Position int64
	// Reason is ErrSegmentMissing, ErrSegmentMismatch, ErrSegmentUnexpected,
	// ErrSegmentOverlap (possibly wrapped with details) or the records error
	// of an invalid batch.
	Reason error
}

// Error names the file, the offset, the position and the reason.
func (e *CorruptSegmentError) Error() string {
	return fmt.Sprintf("fetcher: corrupt log: segment %s at offset %d (position %d): %v", e.File, e.Offset, e.Position, e.Reason)
}

// Is reports ErrCorruptLog.
func (e *CorruptSegmentError) Is(target error) bool { return target == ErrCorruptLog }

// Unwrap returns Reason.
func (e *CorruptSegmentError) Unwrap() error { return e.Reason }

// Discard is a range of data that OpenFileLog removed, as
// (*FileLog).Discarded reports it: either a torn tail past the active
// segment's flush point (cut automatically, Repaired false) or a cut made by
// FileLogOptions.RepairCorruption (Repaired true).
type Discard struct {
	// File is the segment file that was cut (or, for a missing file, the
	// first one that was not kept).
	File string
	// Position is where File was cut.
	Position int64
	// FromOffset is the first offset removed: the end of the data kept.
	FromOffset int64
	// ToOffset is the end (exclusive) of the removed data as far as the
	// recovery point and the batch headers tell; -1 when unknown (a torn
	// tail).
	ToOffset int64
	// Bytes is the number of bytes removed, File's and the later files'.
	Bytes int64
	// Files lists the later segment files that were removed.
	Files []string
	// Repaired tells a RepairCorruption cut from a torn tail.
	Repaired bool
	// Reason is why the data was not kept (a *CorruptSegmentError when
	// Repaired).
	Reason error
}
