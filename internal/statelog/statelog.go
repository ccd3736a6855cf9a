// Package statelog is the local compacted log behind the file-backed state stores
// (coordinator.FileStore, mirror.FileControllerLog): key/value records in Kafka's own
// segment format (v2 record batches, uncompressed, no producer id), so that
// kafka-dump-log reads them like any other segment.
//
// # Layout
//
// One directory holds one log: exactly one segment "<base>.log" (the base offset
// zero-padded to 20 digits, as Kafka names segments) and the checkpoint file
// "kmirror-state-checkpoint". The checkpoint is text, replaced atomically (temp file,
// fsync, rename, fsync of the directory):
//
//	kmirror-statelog 1
//	<segment base> <clean bytes> <next offset> <live records> <swap 0|1>
//
// "clean bytes" is a prefix of the segment known to be whole and fsynced (written at
// compaction and on Close); "next offset" is the offset the next append gets at least
// (compaction may drop the last records, whose offsets are never reused); "swap" says a
// compacted segment "<base>.cleaned" is being renamed into place.
//
// # Durability
//
// Append writes one batch holding all its records (one CRC: all or nothing) and fsyncs
// the segment before it returns: an acknowledged append survives kill -9 and power loss.
// A failed write or fsync is undone (the segment is cut back to its previous size and
// fsynced); if even that fails the log refuses further appends (ErrBroken) and must be
// reopened, whose recovery scan decides what is on disk.
//
// # Recovery
//
// Open scans the segment and verifies every batch (length, magic, CRC, increasing
// offsets). An invalid batch at or after the clean prefix is a torn tail (the last,
// unacknowledged write cut short by a crash) when nothing valid can follow it: the
// header or the batch runs past the end of the file, the batch ends exactly at the end
// of the file, or every byte from it to the end is zero. A torn tail is cut. Anything
// else (an invalid batch inside the clean prefix, or followed by more data) is a
// *CorruptError: acknowledged state is never dropped silently. A checkpoint of a newer
// format version is refused with a *VersionError.
//
// # Compaction
//
// Once the segment holds at least Options.CompactMinRecords records and at least twice
// as many as the last compaction kept, Append compacts after its own write is durable:
// the latest value of every key (tombstones dropped: the rewrite is whole, so no older
// value can resurface) is written with its original offset to "<base>.cleaned",
// fsynced, the checkpoint is switched to it (swap 1), the file renamed into place and
// the old segment removed. A crash anywhere in between leaves either the old or the new
// segment in force, never a mix.
package statelog

import (
	"errors"
	"fmt"
)

// Errors of the package; the typed errors below match them with errors.Is.
var (
	// ErrCorrupt is matched by a *CorruptError.
	ErrCorrupt = errors.New("statelog: corrupt state file")
	// ErrNewerVersion is matched by a *VersionError.
	ErrNewerVersion = errors.New("statelog: state file written by a newer version")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("statelog: closed")
	// ErrBroken is returned by Append once a failed write could not be undone; the log
	// must be closed and reopened.
	ErrBroken = errors.New("statelog: log needs a reopen after a failed write")
)

// FormatVersion is the checkpoint format version this package writes and reads.
const FormatVersion = 1

// CorruptError reports a state file that cannot be read without losing acknowledged
// records. It matches ErrCorrupt.
type CorruptError struct {
	Path     string
	Position int64 // byte position in the file, -1 when not about a position
	Reason   string
}

// Error names the file, the position and the reason.
func (e *CorruptError) Error() string {
	if e.Position < 0 {
		return fmt.Sprintf("statelog: corrupt state file %s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("statelog: corrupt state file %s at byte %d: %s", e.Path, e.Position, e.Reason)
}

// Is makes a *CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// VersionError reports a checkpoint of a format version this build cannot read. It
// matches ErrNewerVersion.
type VersionError struct {
	Path      string
	Found     int
	Supported int
}

// Error names the file and both versions.
func (e *VersionError) Error() string {
	return fmt.Sprintf("statelog: %s has format version %d; this build reads up to version %d (upgrade kmirror)",
		e.Path, e.Found, e.Supported)
}

// Is makes a *VersionError match ErrNewerVersion.
func (e *VersionError) Is(target error) bool { return target == ErrNewerVersion }
