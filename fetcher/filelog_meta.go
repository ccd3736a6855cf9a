package fetcher

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/atomicfile"
)

type logMeta struct {
	leaderEpoch int32
	logStart    int64
	pending     string // "none", "truncate", "full"
	pendingOff  int64
}

// ErrCorruptState is returned by OpenFileLog when the kmirror-log-state file
// cannot be parsed.
var ErrCorruptState = errors.New("fetcher: corrupt log state file")

func decodeMeta(data []byte) (logMeta, error) {
	lines := strings.Split(string(data), "\n")
	if len(lines) != 5 || lines[4] != "" || lines[0] != "0" {
		return logMeta{}, fmt.Errorf("%w: bad layout", ErrCorruptState)
	}
	p, off, ok := strings.Cut(lines[3], " ")
	if !ok {
		return logMeta{}, fmt.Errorf("%w: pending %q", ErrCorruptState, lines[3])
	}
	return parseMetaFields(lines[1], lines[2], p, off)
}

// parseMetaFields parses a state record's fields, in either layout.
func parseMetaFields(leaderEpoch, logStart, pending, pendingOff string) (logMeta, error) {
	var m logMeta
	e, err := strconv.ParseInt(leaderEpoch, 10, 32)
	if err != nil || e < -1 {
		return logMeta{}, fmt.Errorf("%w: leader epoch %q", ErrCorruptState, leaderEpoch)
	}
	m.leaderEpoch = int32(e)
	if m.logStart, err = strconv.ParseInt(logStart, 10, 64); err != nil || m.logStart < 0 {
		return logMeta{}, fmt.Errorf("%w: log start %q", ErrCorruptState, logStart)
	}
	if pending != "none" && pending != "truncate" && pending != "full" {
		return logMeta{}, fmt.Errorf("%w: pending %q", ErrCorruptState, pending)
	}
	m.pending = pending
	if m.pendingOff, err = strconv.ParseInt(pendingOff, 10, 64); err != nil {
		return logMeta{}, fmt.Errorf("%w: pending offset %q", ErrCorruptState, pendingOff)
	}
	return m, nil
}

// smallFileSlots bounds the small-file writes (a temporary file and a
// directory descriptor each) the process's FileLogs make at once: a stop of
// 100,000 partitions wrote their recovery points together and ran out of
// descriptors next to the FileCache's share; 256 at once keep the disk busy.
var smallFileSlots = make(chan struct{}, 256)

// withFileSlot runs fn holding one of smallFileSlots.
func withFileSlot(fn func() error) error {
	smallFileSlots <- struct{}{}
	defer func() { <-smallFileSlots }()
	return fn()
}

// writeFileAtomic replaces name in dir (atomicfile.WriteFile).
func writeFileAtomic(dir, name string, data []byte) error {
	if err := withFileSlot(func() error { return atomicfile.WriteFile(dir, name, data, 0o644) }); err != nil {
		return fmt.Errorf("fetcher: write %s: %w", name, fileLimitError(err))
	}
	return nil
}

// overwriteFile makes data the content of path (created if absent) by
// writing it in place and cutting what is left after it, without a sync: a
// crash may leave any mix of the old and new bytes, so it is only for files
// that recovery does not trust.
func overwriteFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeAtSync writes data at off into the existing file path and, when
// sync, fdatasyncs it before closing it.
func writeAtSync(path string, data []byte, off int64, sync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		_, err = f.WriteAt(data, off)
	}
	if err == nil && sync {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (l *FileLog) path(name string) string { return filepath.Join(l.dir, name) }

// writeMeta makes m the durable content of the state file. The first write
// of a log (or of a state file in the single-record layout of older
// versions) replaces the file atomically with the two-slot layout; later ones
// overwrite the slot that does not hold the current record, in place, and
// fdatasync it: no file is created or renamed, so a bump of the leader epoch
// costs one small write and one data sync (a failover of 100,000 partitions
// made 100,000 atomic replacements, each a create, two fsyncs and a rename).
func (l *FileLog) writeMeta(m logMeta) error { return l.writeMetaSync(m, true) }

// writeMetaSync is writeMeta; with sync false the slot is written and not
// synced (metaUnsynced) and syncMetaLocked, or a syncfs round that starts
// later, makes it durable. The first write of a log is always durable.
func (l *FileLog) writeMetaSync(m logMeta, sync bool) error {
	if l.metaSeq == 0 {
		file := make([]byte, 2*stateSlotSize)
		copy(file, encodeStateSlot(1, m))
		if err := writeFileAtomic(l.dir, StateFileName, file); err != nil {
			return err
		}
		l.metaSeq, l.metaSlot = 1, 0
		return nil
	}
	seq, slot := l.metaSeq+1, 1-l.metaSlot
	if l.metaUnsynced {
		// The other slot holds the last durable record: keep it.
		slot = l.metaSlot
	}
	if !sync {
		err := withFileSlot(func() error {
			return writeAtSync(l.path(StateFileName), encodeStateSlot(seq, m), int64(slot)*stateSlotSize, false)
		})
		if err != nil {
			return fmt.Errorf("fetcher: write %s: %w", StateFileName, fileLimitError(err))
		}
		l.metaSeq, l.metaSlot, l.metaUnsynced = seq, slot, true
		return nil
	}
	// With other syncs under way (a failover), the slot is written and its
	// file closed, and the filesystem's next syncfs round is waited for
	// after the small-file slot is released: a slot held through the round
	// made the 256 slots the failover's bound (256 bumps per round).
	group, end := startSync(l.group)
	defer end()
	err := withFileSlot(func() error {
		return writeAtSync(l.path(StateFileName), encodeStateSlot(seq, m), int64(slot)*stateSlotSize, !group)
	})
	if err == nil && group {
		var joined bool
		if joined, err = l.group.sync(); !joined { // grouping turned off: the file's own sync
			err = withFileSlot(func() error { return writeAtSync(l.path(StateFileName), nil, 0, true) })
		}
	}
	if err != nil {
		// The slot written may hold anything now; the other one still holds
		// the last durable record, and the next write goes to this slot again.
		return fmt.Errorf("fetcher: write %s: %w", StateFileName, fileLimitError(err))
	}
	l.metaSeq, l.metaSlot, l.metaUnsynced = seq, slot, false
	return nil
}

// syncMetaLocked makes a slot written without a sync durable.
func (l *FileLog) syncMetaLocked() error {
	if !l.metaUnsynced {
		return nil
	}
	if err := withFileSlot(func() error { return writeAtSync(l.path(StateFileName), nil, 0, true) }); err != nil {
		return fmt.Errorf("fetcher: sync %s: %w", StateFileName, fileLimitError(err))
	}
	l.metaUnsynced = false
	return nil
}

// stateSlotSize is the size of each of the state file's two slots. A slot is
// one text line, "1 <seq> <leader epoch> <log start> <pending> <pending
// offset> <crc32c>\n", zero-padded: the valid slot (its checksum matches)
// with the higher sequence number is the state; a write torn by a crash
// spoils only the slot it went to, so the other still gives the state before
// it. The bytes of the slot not written are rewritten unchanged when the
// device writes the page, so they survive a torn page too.
const stateSlotSize = 512

var stateCRC = crc32.MakeTable(crc32.Castagnoli)

func encodeStateSlot(seq uint64, m logMeta) []byte {
	line := fmt.Appendf(make([]byte, 0, stateSlotSize), "1 %d %d %d %s %d", seq, m.leaderEpoch, m.logStart, m.pending, m.pendingOff)
	line = fmt.Appendf(line, " %08x\n", crc32.Checksum(line, stateCRC))
	slot := make([]byte, stateSlotSize)
	copy(slot, line)
	return slot
}

// decodeStateSlot parses one slot; ok is false when it holds no valid record
// (zeros, a torn write, anything else).
func decodeStateSlot(slot []byte) (seq uint64, m logMeta, ok bool) {
	end := bytes.IndexByte(slot, '\n')
	if end < 0 {
		return 0, logMeta{}, false
	}
	f := strings.Fields(string(slot[:end]))
	if len(f) != 7 || f[0] != "1" {
		return 0, logMeta{}, false
	}
	body := slot[:end-len(f[6])-1]
	if want, err := strconv.ParseUint(f[6], 16, 32); err != nil || uint32(want) != crc32.Checksum(body, stateCRC) {
		return 0, logMeta{}, false
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || seq == 0 {
		return 0, logMeta{}, false
	}
	m, err = parseMetaFields(f[2], f[3], f[4], f[5])
	return seq, m, err == nil
}

// decodeStateFile parses the state file in either layout: two slots, or the
// single record of older versions ("0\n<epoch>\n<log start>\n<pending>
// <offset>\n"), for which seq is 0 (the next write replaces the file).
func decodeStateFile(data []byte) (m logMeta, seq uint64, slot int, err error) {
	if len(data) != 2*stateSlotSize {
		m, err = decodeMeta(data)
		return m, 0, 0, err
	}
	for i := range 2 {
		s, sm, ok := decodeStateSlot(data[i*stateSlotSize : (i+1)*stateSlotSize])
		if ok && s > seq {
			m, seq, slot = sm, s, i
		}
	}
	if seq == 0 {
		return logMeta{}, 0, 0, fmt.Errorf("%w: no valid slot", ErrCorruptState)
	}
	return m, seq, slot, nil
}

func (l *FileLog) metaLocked() logMeta {
	return logMeta{leaderEpoch: l.st.leaderEpoch, logStart: l.st.logStart, pending: "none", pendingOff: -1}
}

// segMark is what a recovery point records of one segment: its base offset,
// the size of its flushed prefix (the whole file for a rolled segment) and
// the next offset after that prefix.
type segMark struct {
	base, size, next int64
}

// recoveryPoint is the content of the kmirror-recovery-point file: every
// rolled segment as it was when rolled (fsynced), and the flush point of the
// active segment. Text: "0\n<rolled count>\n" then one "<base> <size>
// <next>\n" line per rolled segment, ascending, then one for the active
// segment.
type recoveryPoint struct {
	rolled []segMark
	active segMark
}

func encodeRecoveryPoint(rp recoveryPoint) []byte {
	out := fmt.Appendf(nil, "0\n%d\n", len(rp.rolled))
	for _, m := range append(rp.rolled, rp.active) {
		out = fmt.Appendf(out, "%d %d %d\n", m.base, m.size, m.next)
	}
	return out
}

func decodeRecoveryPoint(data []byte) (recoveryPoint, error) {
	bad := func(what string) error {
		return fmt.Errorf("%w: %s: %s", ErrCorruptState, RecoveryPointFileName, what)
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 4 || lines[0] != "0" || lines[len(lines)-1] != "" {
		return recoveryPoint{}, bad("bad layout")
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-4 {
		return recoveryPoint{}, bad(fmt.Sprintf("rolled count %q", lines[1]))
	}
	var rp recoveryPoint
	prev := int64(-1)
	for i, line := range lines[2 : len(lines)-1] {
		f := strings.Fields(line)
		var v [3]int64
		for j := 0; len(f) == 3 && j < 3; j++ {
			if v[j], err = strconv.ParseInt(f[j], 10, 64); err != nil {
				break
			}
		}
		m := segMark{v[0], v[1], v[2]}
		if len(f) != 3 || err != nil || m.base <= prev || m.size < 0 || m.next < m.base {
			return recoveryPoint{}, bad(fmt.Sprintf("segment line %q", line))
		}
		prev = m.base
		if i < n {
			rp.rolled = append(rp.rolled, m)
		} else {
			rp.active = m
		}
	}
	return rp, nil
}

// readRecoveryPoint returns the recovery point, nil when there is none (a
// new log, or one written before recovery points existed).
func (l *FileLog) readRecoveryPoint() (*recoveryPoint, error) {
	data, err := os.ReadFile(l.path(RecoveryPointFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetcher: read %s: %w", RecoveryPointFileName, err)
	}
	rp, err := decodeRecoveryPoint(data)
	if err != nil {
		return nil, err
	}
	l.rpData = data // a recovery that changes nothing does not rewrite it
	return &rp, nil
}

// recoveryPointLocked is the recovery point of the in-memory segments: the
// rolled ones whole, the active one up to its last fsync.
func (l *FileLog) recoveryPointLocked() recoveryPoint {
	var rp recoveryPoint
	for _, s := range l.segs[:len(l.segs)-1] {
		rp.rolled = append(rp.rolled, segMark{s.base, s.size, s.end})
	}
	a := l.active()
	rp.active = segMark{a.base, a.synced, max(a.syncedEnd, a.base)}
	return rp
}

// writeRecoveryPoint writes rp atomically unless it is what was last written.
func (l *FileLog) writeRecoveryPoint(rp recoveryPoint) error {
	data := encodeRecoveryPoint(rp)
	if bytes.Equal(data, l.rpData) {
		return nil
	}
	l.rpData = nil // unknown until the write succeeds
	if err := writeFileAtomic(l.dir, RecoveryPointFileName, data); err != nil {
		return err
	}
	l.rpData = data
	return nil
}
