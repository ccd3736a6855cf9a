package statelog

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

type rec struct {
	off        int64
	key, value string
	tomb       bool
}

func replayAll(t *testing.T, l *Log) []rec {
	t.Helper()
	var out []rec
	require.NoError(t, l.Replay(context.Background(), func(off int64, k, v []byte) error {
		out = append(out, rec{off, string(k), string(v), v == nil})
		return nil
	}))
	return out
}

func kv(k, v string) KV { return KV{Key: []byte(k), Value: []byte(v)} }

func mustOpen(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	require.NoError(t, err)
	return l
}

func TestAppendReplayReopen(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	first, err := l.Append([]KV{kv("a", "1"), kv("b", "2")})
	require.NoError(t, err)
	require.Equal(t, int64(0), first)
	first, err = l.Append([]KV{{Key: []byte("a")}})
	require.NoError(t, err)
	require.Equal(t, int64(2), first)
	want := []rec{{0, "a", "1", false}, {1, "b", "2", false}, {2, "a", "", true}}
	require.Equal(t, want, replayAll(t, l))
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Close(), ErrClosed)

	l = mustOpen(t, dir, Options{})
	defer l.Close()
	require.Equal(t, want, replayAll(t, l))
	require.Equal(t, int64(3), l.NextOffset())
	_, err = l.Append(nil)
	require.Error(t, err)
}

// TestAcknowledgedWithoutClose: every acknowledged append is on disk without Close (the
// process is killed): a second Open of the directory sees it.
func TestAcknowledgedWithoutClose(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	for i := range 10 {
		_, err := l.Append([]KV{kv(fmt.Sprint(i), "v")})
		require.NoError(t, err)
	}
	l2 := mustOpen(t, dir, Options{}) // as a restarted process would, l never closed
	require.Len(t, replayAll(t, l2), 10)
	require.NoError(t, l2.Close())
	require.NoError(t, l.f.Close())
}

func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{CompactMinRecords: 100})
	// 10 keys written 30 times each, key 9 deleted at the end
	for round := range 30 {
		batch := make([]KV, 0, 10)
		for k := range 10 {
			batch = append(batch, kv(fmt.Sprint(k), fmt.Sprint(round)))
		}
		_, err := l.Append(batch)
		require.NoError(t, err)
	}
	_, err := l.Append([]KV{{Key: []byte("9")}})
	require.NoError(t, err)
	st := l.Stats()
	require.NoError(t, st.CompactErr)
	require.Positive(t, st.Compactions)
	require.Less(t, st.Records, int64(300))
	check := func(l *Log) {
		latest := map[string]rec{}
		for _, r := range replayAll(t, l) {
			latest[r.key] = r
		}
		for k := range 9 {
			require.Equal(t, "29", latest[fmt.Sprint(k)].value, "key %d", k)
			require.Equal(t, int64(290+k), latest[fmt.Sprint(k)].off, "offsets are kept")
		}
		r, ok := latest["9"]
		require.True(t, !ok || r.tomb, "key 9 deleted")
		require.Equal(t, int64(301), l.NextOffset(), "offsets are never reused")
	}
	check(l)
	require.NoError(t, l.Close())
	l = mustOpen(t, dir, Options{CompactMinRecords: 100})
	check(l)
	first, err := l.Append([]KV{kv("x", "y")})
	require.NoError(t, err)
	require.Equal(t, int64(301), first)
	require.NoError(t, l.Close())
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	require.Len(t, names, 2, "one segment and the checkpoint: %v", names)
}

// TestCompactionLeavesNoTombstone: all keys deleted: the compacted segment is empty and
// named by the next offset.
func TestCompactionLeavesNoTombstone(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{CompactMinRecords: 4})
	_, err := l.Append([]KV{kv("a", "1"), kv("b", "1")})
	require.NoError(t, err)
	_, err = l.Append([]KV{{Key: []byte("a")}, {Key: []byte("b")}})
	require.NoError(t, err)
	require.Empty(t, replayAll(t, l))
	require.Equal(t, int64(4), l.NextOffset())
	require.NoError(t, l.Close())
	_, err = os.Stat(filepath.Join(dir, segName(4, segmentExt)))
	require.NoError(t, err)
	l = mustOpen(t, dir, Options{CompactMinRecords: 4})
	defer l.Close()
	require.Equal(t, int64(4), l.NextOffset())
}

// TestInterruptedCompaction replays the crash points of a compaction: output written but
// not switched to (removed on open), and switched to but not renamed (finished on open).
func TestInterruptedCompaction(t *testing.T) {
	for _, swapped := range []bool{false, true} {
		t.Run(fmt.Sprint("swapped=", swapped), func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, Options{})
			for i := range 5 {
				_, err := l.Append([]KV{kv("k", fmt.Sprint(i))})
				require.NoError(t, err)
			}
			// what compaction would write: only offset 4
			data, err := buildCompacted([]records.Record{{Key: []byte("k"), Value: []byte("4")}}, []int64{4})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, segName(4, cleanedExt)), data, 0o644))
			if swapped {
				require.NoError(t, writeCheckpoint(dir, checkpoint{base: 4, clean: int64(len(data)), next: 5, live: 1, swap: true}))
			}
			require.NoError(t, l.f.Close())
			l = mustOpen(t, dir, Options{})
			defer l.Close()
			got := replayAll(t, l)
			if swapped {
				require.Equal(t, []rec{{4, "k", "4", false}}, got)
			} else {
				require.Len(t, got, 5)
			}
			require.Equal(t, int64(5), l.NextOffset())
			names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			require.Len(t, names, 1)
			cleaned, _ := filepath.Glob(filepath.Join(dir, "*.cleaned"))
			require.Empty(t, cleaned)
		})
	}
}

// segmentWith returns a directory whose log holds n one-record appends, not closed
// (no clean prefix past what compaction or Close recorded), and the segment path.
func segmentWith(t *testing.T, n int, closeIt bool) (string, string) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	for i := range n {
		_, err := l.Append([]KV{kv(fmt.Sprint(i), "value")})
		require.NoError(t, err)
	}
	path := l.segPath
	if closeIt {
		require.NoError(t, l.Close())
	} else {
		require.NoError(t, l.f.Close())
	}
	return dir, path
}

func TestTornTailIsCut(t *testing.T) {
	cases := map[string]func(t *testing.T, path string, size int64){
		"half a batch": func(t *testing.T, path string, size int64) {
			require.NoError(t, os.Truncate(path, size-10))
		},
		"half a header": func(t *testing.T, path string, size int64) {
			batch := size / 3
			require.NoError(t, os.Truncate(path, size-batch+20))
		},
		"zeros appended": func(t *testing.T, path string, size int64) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write(make([]byte, 4096))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		},
		"last batch garbled": func(t *testing.T, path string, size int64) {
			flipByte(t, path, size-3)
		},
	}
	for name, tear := range cases {
		t.Run(name, func(t *testing.T) {
			dir, path := segmentWith(t, 3, false)
			fi, err := os.Stat(path)
			require.NoError(t, err)
			tear(t, path, fi.Size())
			l := mustOpen(t, dir, Options{})
			defer l.Close()
			got := replayAll(t, l)
			if name == "zeros appended" {
				require.Len(t, got, 3)
			} else {
				require.Len(t, got, 2, "only the torn last write is cut")
			}
			require.Positive(t, l.Stats().CutBytes)
			first, err := l.Append([]KV{kv("z", "z")})
			require.NoError(t, err)
			require.Equal(t, int64(len(got)), first)
		})
	}
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, pos)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, pos)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestCorruptionIsAnError(t *testing.T) {
	t.Run("middle batch", func(t *testing.T) {
		dir, path := segmentWith(t, 3, false)
		flipByte(t, path, 70) // inside the first batch's records
		_, err := Open(dir, Options{})
		var ce *CorruptError
		require.ErrorAs(t, err, &ce)
		require.ErrorIs(t, err, ErrCorrupt)
		require.Equal(t, int64(0), ce.Position)
	})
	t.Run("last batch of a clean log", func(t *testing.T) {
		dir, path := segmentWith(t, 3, true)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		flipByte(t, path, fi.Size()-3)
		_, err = Open(dir, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("shorter than the clean prefix", func(t *testing.T) {
		dir, path := segmentWith(t, 3, true)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(path, fi.Size()-1))
		_, err = Open(dir, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("bad checkpoint", func(t *testing.T) {
		dir, _ := segmentWith(t, 1, true)
		require.NoError(t, os.WriteFile(filepath.Join(dir, CheckpointFile), []byte("kmirror-statelog 1\nx\n"), 0o644))
		_, err := Open(dir, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("segment without checkpoint", func(t *testing.T) {
		dir, _ := segmentWith(t, 1, true)
		require.NoError(t, os.Remove(filepath.Join(dir, CheckpointFile)))
		_, err := Open(dir, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("missing segment", func(t *testing.T) {
		dir, path := segmentWith(t, 1, true)
		require.NoError(t, os.Remove(path))
		_, err := Open(dir, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
	})
}

func TestNewerVersionRefused(t *testing.T) {
	dir, _ := segmentWith(t, 1, true)
	require.NoError(t, os.WriteFile(filepath.Join(dir, CheckpointFile), []byte("kmirror-statelog 2\n0 0 0 0 0\nwhatever\n"), 0o644))
	_, err := Open(dir, Options{})
	var ve *VersionError
	require.ErrorAs(t, err, &ve)
	require.ErrorIs(t, err, ErrNewerVersion)
	require.Equal(t, 2, ve.Found)
}

// TestDiskFull fills a small tmpfs: the failing append returns ENOSPC, and every
// acknowledged record is still there after a reopen. It needs to mount a tmpfs (root);
// TestWriteFailureBreaksWhenNotUndone covers a failed write everywhere.
func TestDiskFull(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "state")
	l := mustOpen(t, dir, Options{CompactMinRecords: 1 << 30})
	acked := 0
	var err error
	for i := 0; i < 10_000; i++ {
		if _, err = l.Append([]KV{kv(fmt.Sprint(i), string(make([]byte, 1000)))}); err != nil {
			break
		}
		acked++
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Positive(t, acked)
	require.Len(t, replayAll(t, l), acked)
	require.NoError(t, l.f.Close())
	l = mustOpen(t, dir, Options{CompactMinRecords: 1 << 30})
	require.Len(t, replayAll(t, l), acked, "no acknowledged record lost, nothing of the failed one kept")
	require.NoError(t, l.f.Close())
}

func TestWriteFailureBreaksWhenNotUndone(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	_, err := l.Append([]KV{kv("a", "1")})
	require.NoError(t, err)
	require.NoError(t, l.f.Close()) // every write and the undo now fail
	_, err = l.Append([]KV{kv("b", "2")})
	require.Error(t, err)
	_, err = l.Append([]KV{kv("c", "3")})
	require.ErrorIs(t, err, ErrBroken)
	l2 := mustOpen(t, dir, Options{})
	defer l2.Close()
	require.Equal(t, []rec{{0, "a", "1", false}}, replayAll(t, l2))
	require.ErrorIs(t, l.Close(), os.ErrClosed, "the file was closed underneath")
}
