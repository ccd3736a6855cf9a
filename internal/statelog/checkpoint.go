package statelog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kmirror/kmirror/internal/atomicfile"
)

// File names inside a log directory.
const (
	// CheckpointFile is the checkpoint file name.
	CheckpointFile = "kmirror-state-checkpoint"
	segmentExt     = ".log"
	cleanedExt     = ".cleaned"
	checkpointHead = "kmirror-statelog"
)

// checkpoint is the content of CheckpointFile.
type checkpoint struct {
	base  int64 // base offset of the segment in force
	clean int64 // bytes of the segment known whole and fsynced
	next  int64 // the next offset is at least this
	live  int64 // records kept by the last compaction (or found at open)
	swap  bool  // "<base>.cleaned" replaces "<base>.log" (see compact)
}

func encodeCheckpoint(c checkpoint) []byte {
	swap := 0
	if c.swap {
		swap = 1
	}
	return fmt.Appendf(nil, "%s %d\n%d %d %d %d %d\n", checkpointHead, FormatVersion, c.base, c.clean, c.next, c.live, swap)
}

func decodeCheckpoint(path string, data []byte) (checkpoint, error) {
	bad := func(reason string) (checkpoint, error) {
		return checkpoint{}, &CorruptError{Path: path, Position: -1, Reason: reason}
	}
	lines := strings.Split(string(data), "\n")
	head := strings.Fields(lines[0])
	if len(head) != 2 || head[0] != checkpointHead {
		return bad(fmt.Sprintf("first line %q is not %q and a version", lines[0], checkpointHead))
	}
	v, err := strconv.Atoi(head[1])
	if err != nil || v < 1 {
		return bad(fmt.Sprintf("version %q", head[1]))
	}
	if v > FormatVersion {
		return checkpoint{}, &VersionError{Path: path, Found: v, Supported: FormatVersion}
	}
	if len(lines) != 3 || lines[2] != "" {
		return bad("want two lines")
	}
	f := strings.Fields(lines[1])
	if len(f) != 5 {
		return bad(fmt.Sprintf("second line %q: want 5 fields", lines[1]))
	}
	var n [5]int64
	for i, s := range f {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil || n[i] < 0 {
			return bad(fmt.Sprintf("field %d %q", i+1, s))
		}
	}
	if n[4] > 1 || n[2] < n[0] {
		return bad(fmt.Sprintf("second line %q is inconsistent", lines[1]))
	}
	return checkpoint{base: n[0], clean: n[1], next: n[2], live: n[3], swap: n[4] == 1}, nil
}

// readCheckpoint returns the checkpoint of dir; ok is false when there is none.
func readCheckpoint(dir string) (c checkpoint, ok bool, err error) {
	path := filepath.Join(dir, CheckpointFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, fmt.Errorf("statelog: read checkpoint: %w", err)
	}
	c, err = decodeCheckpoint(path, data)
	return c, err == nil, err
}

// writeCheckpoint replaces the checkpoint of dir atomically.
func writeCheckpoint(dir string, c checkpoint) error {
	return writeFileAtomic(dir, CheckpointFile, encodeCheckpoint(c))
}

// writeFileAtomic replaces dir/name (atomicfile.WriteFile).
func writeFileAtomic(dir, name string, data []byte) error {
	if err := atomicfile.WriteFile(dir, name, data, 0o600); err != nil {
		return fmt.Errorf("statelog: write %s: %w", name, err)
	}
	return nil
}

func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("statelog: sync dir: %w", err)
	}
	return nil
}

func segName(base int64, ext string) string { return fmt.Sprintf("%020d%s", base, ext) }

// parseSegName returns the base offset of a "<20 digits><ext>" name.
func parseSegName(name, ext string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, ext)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// LockDir creates dir when missing and takes an exclusive flock on dir/name (LOCK_EX |
// LOCK_NB), held until the returned file is closed. Another holder, in this process
// or another, makes it fail at once with an error wrapping locked.
func LockDir(dir, name string, locked error) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("statelog: create %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("statelog: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use by another process or store", locked, dir)
		}
		return nil, fmt.Errorf("statelog: lock %s: %w", dir, err)
	}
	return f, nil
}
