package fetcher

import (
	"bytes"
	"errors"
	"fmt"
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

func encodeMeta(m logMeta) []byte {
	return fmt.Appendf(nil, "0\n%d\n%d\n%s %d\n", m.leaderEpoch, m.logStart, m.pending, m.pendingOff)
}

// ErrCorruptState is returned by OpenFileLog when the kmirror-log-state file
// cannot be parsed.
var ErrCorruptState = errors.New("fetcher: corrupt log state file")

func decodeMeta(data []byte) (logMeta, error) {
	lines := strings.Split(string(data), "\n")
	if len(lines) != 5 || lines[4] != "" || lines[0] != "0" {
		return logMeta{}, fmt.Errorf("%w: bad layout", ErrCorruptState)
	}
	var m logMeta
	e, err := strconv.ParseInt(lines[1], 10, 32)
	if err != nil || e < -1 {
		return logMeta{}, fmt.Errorf("%w: leader epoch %q", ErrCorruptState, lines[1])
	}
	m.leaderEpoch = int32(e)
	if m.logStart, err = strconv.ParseInt(lines[2], 10, 64); err != nil || m.logStart < 0 {
		return logMeta{}, fmt.Errorf("%w: log start %q", ErrCorruptState, lines[2])
	}
	p, off, ok := strings.Cut(lines[3], " ")
	if !ok || (p != "none" && p != "truncate" && p != "full") {
		return logMeta{}, fmt.Errorf("%w: pending %q", ErrCorruptState, lines[3])
	}
	m.pending = p
	if m.pendingOff, err = strconv.ParseInt(off, 10, 64); err != nil {
		return logMeta{}, fmt.Errorf("%w: pending offset %q", ErrCorruptState, off)
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

func (l *FileLog) path(name string) string { return filepath.Join(l.dir, name) }

func (l *FileLog) writeMeta(m logMeta) error {
	return writeFileAtomic(l.dir, StateFileName, encodeMeta(m))
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
