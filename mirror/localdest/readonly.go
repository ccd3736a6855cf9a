package localdest

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kmirror/kmirror/internal/atomicfile"
)

// readOnlyFile is the journal of a file destination's read-only flags. A failover
// flags every mirrored partition at once: with the flags inside kmirror-topics.json,
// each group commit re-encoded and rewrote every flag (at 100,000 partitions, about
// 3 MB and 100 ms of encoding with the destination's lock held, per commit). The
// journal appends what changed, one fsync per commit, and is rewritten as a snapshot
// of the live flags only when it has grown to twice their number.
//
// Each line is a record: an operation byte, its argument and a CRC-32C of the two, in
// hex, after the last space:
//
//	=kmirror-read-only 1 <crc>   the snapshot header, first line of every file
//	+<topic>/<partition> <crc>   the partition is read-only
//	-<topic>/<partition> <crc>   it is not
//
// An append cut by a crash leaves a torn tail: records that do not check from some
// point to the end of the file. Its writes were never acknowledged, so it is dropped
// (the file is cut back to the last whole record). A record that does not check
// followed by one that does is corruption, and the destination refuses to open.
const readOnlyFile = "kmirror-read-only.log"

const readOnlyHeader = "kmirror-read-only 1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendReadOnlyRecord appends one record of op and arg to b.
func appendReadOnlyRecord(b []byte, op byte, arg string) []byte {
	start := len(b)
	b = append(b, op)
	b = append(b, arg...)
	sum := crc32.Checksum(b[start:], castagnoli)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(sum), 16)
	return append(b, '\n')
}

// encodeReadOnlySnapshot is a whole journal holding flags.
func encodeReadOnlySnapshot(flags map[string]bool) []byte {
	b := make([]byte, 0, 32+len(flags)*32)
	b = appendReadOnlyRecord(b, '=', readOnlyHeader)
	for k := range flags {
		b = appendReadOnlyRecord(b, '+', k)
	}
	return b
}

// ReadOnlyJournalError reports a journal of read-only flags that cannot be read
// back: a record in its middle that does not check, or a file without its header.
type ReadOnlyJournalError struct {
	Path   string
	Offset int64 // of the first record that does not check
	Reason string
}

func (e *ReadOnlyJournalError) Error() string {
	return fmt.Sprintf("mirror: corrupt %s at byte %d: %s", e.Path, e.Offset, e.Reason)
}

// parseReadOnlyRecord checks one line (without its newline).
func parseReadOnlyRecord(line []byte) (op byte, arg string, ok bool) {
	sp := bytes.LastIndexByte(line, ' ')
	if sp < 1 {
		return 0, "", false
	}
	sum, err := strconv.ParseUint(string(line[sp+1:]), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(line[:sp], castagnoli) {
		return 0, "", false
	}
	return line[0], string(line[1:sp]), true
}

// replayReadOnly reads a journal: the flags it holds, its records and the length of
// its whole records (anything after that is a torn tail).
func replayReadOnly(path string, data []byte) (flags map[string]bool, records int, good int64, err error) {
	flags = map[string]bool{}
	var off int64
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n')
		line := data
		if n >= 0 {
			line = data[:n]
		}
		op, arg, ok := parseReadOnlyRecord(line)
		switch {
		case !ok || n < 0:
			if tornTail(data) {
				return flags, records, off, nil
			}
			return nil, 0, 0, &ReadOnlyJournalError{Path: path, Offset: off, Reason: "a record does not check, and whole records follow it"}
		case records == 0 && (op != '=' || arg != readOnlyHeader):
			return nil, 0, 0, &ReadOnlyJournalError{Path: path, Offset: off, Reason: "no " + readOnlyHeader + " header"}
		case op == '+':
			flags[arg] = true
		case op == '-':
			delete(flags, arg)
		case op != '=':
			return nil, 0, 0, &ReadOnlyJournalError{Path: path, Offset: off, Reason: fmt.Sprintf("unknown operation %q", op)}
		}
		records++
		off += int64(n) + 1
		data = data[n+1:]
	}
	if records == 0 {
		return nil, 0, 0, &ReadOnlyJournalError{Path: path, Offset: 0, Reason: "empty, without its header"}
	}
	return flags, records, off, nil
}

// tornTail reports whether no whole record checks in data (the rest of a journal
// from a record that does not).
func tornTail(data []byte) bool {
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n')
		if n < 0 {
			return true
		}
		if _, _, ok := parseReadOnlyRecord(data[:n]); ok {
			return false
		}
		data = data[n+1:]
	}
	return true
}

// readOnlyJournal is the open journal of a file destination (readOnlyFile).
type readOnlyJournal struct {
	root    string
	f       *os.File // nil until the first snapshot is written
	records int      // records in the file
}

// openReadOnlyJournal reads root's journal: its flags, or ok false when there is
// none yet. A torn tail is cut off the file.
func openReadOnlyJournal(root string) (j *readOnlyJournal, flags map[string]bool, ok bool, err error) {
	j = &readOnlyJournal{root: root}
	path := filepath.Join(root, readOnlyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("mirror: read %s: %w", path, err)
	}
	flags, records, good, err := replayReadOnly(path, data)
	if err != nil {
		return nil, nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, nil, false, fmt.Errorf("mirror: open %s: %w", path, err)
	}
	if good < int64(len(data)) {
		// An append that was never acknowledged: cut, durably, before anything follows it.
		err := f.Truncate(good)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, nil, false, fmt.Errorf("mirror: cut the torn tail of %s: %w", path, err)
		}
	}
	j.f, j.records = f, records
	return j, flags, true, nil
}

// needsSnapshot reports whether the next write should replace the journal with a
// snapshot of live flags: there is no file yet, or it holds more than twice as many
// records as flags (plus some slack, so a small journal is never rewritten).
func (j *readOnlyJournal) needsSnapshot(live int) bool {
	return j.f == nil || j.records > 2*live+4096
}

// append writes records (whole lines, records of them) and syncs them.
func (j *readOnlyJournal) append(data []byte, records int) error {
	if _, err := j.f.Write(data); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.records += records
	return nil
}

// replace makes snapshot (encodeReadOnlySnapshot, records of them) the journal,
// atomically and durably, and appends to it from then on.
func (j *readOnlyJournal) replace(snapshot []byte, records int) error {
	if err := atomicfile.WriteFile(j.root, readOnlyFile, snapshot, 0o600); err != nil {
		return err
	}
	j.close() // the replaced file: never appended to again
	f, err := os.OpenFile(filepath.Join(j.root, readOnlyFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err // j.f is nil: the next write is a snapshot again
	}
	j.f, j.records = f, records
	return nil
}

func (j *readOnlyJournal) close() {
	if j != nil && j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// openReadOnly reads the read-only flags of a file destination whose meta has been
// read: from its journal, or from kmirror-topics.json where they were kept before.
// Flags found there go into a snapshot of the journal at the next write, before
// the topics file is rewritten without them; once a journal exists, it alone
// holds the flags.
func (d *LocalDestination) openReadOnly() error {
	legacy := d.meta.ReadOnly
	d.meta.ReadOnly = nil
	j, flags, ok, err := openReadOnlyJournal(d.root)
	if err != nil {
		return err
	}
	d.roJournal = j
	d.writeReadOnly = func(data []byte, records int, snapshot bool) error {
		if snapshot {
			return j.replace(data, records)
		}
		return j.append(data, records)
	}
	switch {
	case ok:
		d.readOnly = flags
		d.topicsDirty = len(legacy) > 0
	case len(legacy) > 0:
		d.readOnly = legacy
		d.roBroken, d.topicsDirty = true, true
	default:
		d.readOnly = map[string]bool{}
	}
	return nil
}
