package fetcher

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

func openFile(t testing.TB, dir string, opts FileLogOptions) *FileLog {
	t.Helper()
	l, err := OpenFileLog(dir, opts)
	require.NoError(t, err)
	return l
}

// dirContents maps every file name in dir (except the lock file) to its bytes.
func dirContents(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range ents {
		if e.Name() == LockFileName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	sort.Strings(m)
	return m
}

// appendN appends n batches of 3 records with growing epochs and returns the
// concatenated bytes.
func appendN(t testing.TB, l Log, n int) []byte {
	t.Helper()
	var all []byte
	for i := 0; i < n; i++ {
		b := dataBatch(t, l.LogEndOffset(), int32(i/7), 3)
		require.NoError(t, l.Append(b))
		all = append(all, b...)
	}
	return all
}

func readAll(t testing.TB, l Log) []byte {
	t.Helper()
	var out []byte
	for o := l.LogStartOffset(); o < l.LogEndOffset(); {
		chunk, err := l.Read(o, 1<<20)
		require.NoError(t, err)
		if len(chunk) == 0 {
			break
		}
		out = append(out, chunk...)
		it := records.NewIterator(chunk)
		for it.Next() {
			o = it.Batch().NextOffset()
		}
		require.NoError(t, it.Err())
	}
	return out
}

func TestFileLogLayoutAndRoll(t *testing.T) {
	root := t.TempDir()
	dir := PartitionDir(root, "orders", 3)
	require.Equal(t, filepath.Join(root, "orders-3"), dir)
	opts := FileLogOptions{SegmentBytes: 1000, IndexIntervalBytes: 300}
	l := openFile(t, dir, opts)
	all := appendN(t, l, 40)
	require.NoError(t, l.Close())

	segs := segmentFiles(t, dir)
	require.Greater(t, len(segs), 4)
	var joined []byte
	for i, p := range segs {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(data), 1000)
		// The file name is the base offset of its first batch (20 digits).
		b, err := records.ParseBatch(data)
		require.NoError(t, err)
		require.Equal(t, segName(b.BaseOffset(), ".log"), filepath.Base(p), "segment %d", i)
		joined = append(joined, data...)

		// The index: 8-byte entries (relative last offset, position), each
		// pointing at a batch whose last offset matches, increasing.
		idx, err := os.ReadFile(strings.TrimSuffix(p, ".log") + ".index")
		require.NoError(t, err)
		require.Zero(t, len(idx)%8)
		prevRel, prevPos := int32(-1), int32(-1)
		for e := 0; e < len(idx); e += 8 {
			rel := int32(binary.BigEndian.Uint32(idx[e:]))
			pos := int32(binary.BigEndian.Uint32(idx[e+4:]))
			require.Greater(t, rel, prevRel)
			require.Greater(t, pos, prevPos)
			ib, err := records.ParseBatch(data[pos:])
			require.NoError(t, err)
			require.Equal(t, b.BaseOffset()+int64(rel), ib.LastOffset())
			prevRel, prevPos = rel, pos
		}
		if len(data) > 2*300 {
			require.NotEmpty(t, idx, "segment %d of %d bytes has index entries", i, len(data))
		}
	}
	require.Equal(t, all, joined, "segments hold the raw batches unchanged")

	ck, err := os.ReadFile(filepath.Join(dir, CheckpointFileName))
	require.NoError(t, err)
	entries, err := epoch.DecodeCheckpoint(ck)
	require.NoError(t, err)
	require.Len(t, entries, 6)
	// No leader epoch was bumped and the log starts at its first segment:
	// the state file's absence says so, and none is written.
	_, err = os.Stat(filepath.Join(dir, StateFileName))
	require.ErrorIs(t, err, os.ErrNotExist)

	// Reopen: same files, same state, every offset readable.
	before := dirContents(t, dir)
	l = openFile(t, dir, opts)
	require.Equal(t, before, dirContents(t, dir))
	require.Equal(t, int64(120), l.LogEndOffset())
	require.Equal(t, all, readAll(t, l))
	for o := int64(0); o < 120; o++ {
		got, err := l.Read(o, 0)
		require.NoError(t, err)
		b, err := records.ParseBatch(got)
		require.NoError(t, err)
		require.Len(t, got, len(b))
		require.Equal(t, o/3*3, b.BaseOffset())
	}
	require.NoError(t, l.Close())
	require.Equal(t, before, dirContents(t, dir))
}

func TestFileLogIndexRebuilt(t *testing.T) {
	dir := t.TempDir()
	opts := FileLogOptions{IndexIntervalBytes: 100}
	l := openFile(t, dir, opts)
	appendN(t, l, 30)
	require.NoError(t, l.Close())
	before := dirContents(t, dir)
	idx := filepath.Join(dir, segName(0, ".index"))
	require.NotEmpty(t, before[segName(0, ".index")])
	require.NoError(t, os.WriteFile(idx, []byte("garbage!garbage!xx"), 0o644))
	l = openFile(t, dir, opts)
	require.Equal(t, before, dirContents(t, dir))
	require.NoError(t, l.Close())
	require.NoError(t, os.Remove(idx))
	l = openFile(t, dir, opts)
	require.Equal(t, before, dirContents(t, dir))
	require.NoError(t, l.Close())
}

func TestFileLogTornTail(t *testing.T) {
	for name, tail := range map[string]func(next []byte) []byte{
		"garbage": func([]byte) []byte {
			return []byte("\x00\x01garbage garbage garbage garbage garbage garbage garbage garbage garbage")
		},
		"half batch":  func(next []byte) []byte { return next[:len(next)/2] },
		"header only": func(next []byte) []byte { return next[:records.HeaderSize] },
		"few bytes":   func(next []byte) []byte { return next[:7] },
		"zeros":       func([]byte) []byte { return make([]byte, 4096) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := FileLogOptions{SegmentBytes: 2000, IndexIntervalBytes: 100}
			l := openFile(t, dir, opts)
			all := appendN(t, l, 25)
			end := l.LogEndOffset()
			require.NoError(t, l.Close())
			segs := segmentFiles(t, dir)
			last := segs[len(segs)-1]
			next := dataBatch(t, end, 9, 3)
			f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.Write(tail(next))
			require.NoError(t, err)
			require.NoError(t, f.Close())

			l = openFile(t, dir, opts)
			require.Equal(t, end, l.LogEndOffset())
			require.Equal(t, all, readAll(t, l))
			require.NoError(t, l.Append(next))
			require.Equal(t, append(all, next...), readAll(t, l))
			require.NoError(t, l.Close())
		})
	}
}

// A flipped byte in the last batch is below the flush point of a closed
// log: Open refuses it, RepairCorruption cuts that batch.
func TestFileLogCorruptLastBatch(t *testing.T) {
	dir := t.TempDir()
	opts := FileLogOptions{IndexIntervalBytes: 100}
	l := openFile(t, dir, opts)
	all := appendN(t, l, 10)
	lastLen := len(dataBatch(t, 27, 1, 3))
	require.NoError(t, l.Close())
	p := filepath.Join(dir, segName(0, ".log"))
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, all, data)
	data[len(data)-lastLen/2] ^= 0x5a // a byte in the middle of the last batch
	require.NoError(t, os.WriteFile(p, data, 0o644))

	_, err = OpenFileLog(dir, opts)
	var ce *CorruptSegmentError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CorruptSegmentError{File: p, Offset: 27, Position: int64(len(all) - lastLen), Reason: ce.Reason}, *ce)
	require.ErrorIs(t, err, records.ErrCorrupt)

	opts.RepairCorruption = true
	l = openFile(t, dir, opts)
	require.Equal(t, int64(27), l.LogEndOffset())
	require.Equal(t, all[:len(all)-lastLen], readAll(t, l))
	require.Equal(t, []Discard{{File: p, Position: int64(len(all) - lastLen), FromOffset: 27, ToOffset: 30, Bytes: int64(lastLen),
		Repaired: true, Reason: l.Discarded()[0].Reason}}, l.Discarded())
	require.NoError(t, l.Close())
	data, err = os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, all[:len(all)-lastLen], data, "the corrupt batch is cut from the file")
}

func TestFileLogLock(t *testing.T) {
	dir := t.TempDir()
	l := openFile(t, dir, FileLogOptions{})
	_, err := OpenFileLog(dir, FileLogOptions{})
	require.ErrorIs(t, err, ErrLocked)
	require.Contains(t, err.Error(), dir)
	require.NoError(t, l.Close())
	l = openFile(t, dir, FileLogOptions{})
	require.NoError(t, l.Close())
}

func TestFileLogOptionsValidate(t *testing.T) {
	for _, o := range []FileLogOptions{
		{SegmentBytes: -1}, {SegmentBytes: 1 << 32}, {IndexIntervalBytes: -1},
		{Fsync: 42}, {FsyncBytes: -3}, {StartOffset: -1},
	} {
		require.Error(t, o.Validate())
		_, err := OpenFileLog(t.TempDir(), o)
		require.Error(t, err)
	}
	require.NoError(t, FileLogOptions{}.Validate())
}

func TestFileLogStartOffset(t *testing.T) {
	dir := t.TempDir()
	l := openFile(t, dir, FileLogOptions{StartOffset: 500})
	require.Equal(t, int64(500), l.LogStartOffset())
	require.NoError(t, l.Append(dataBatch(t, 500, 0, 2)))
	require.NoError(t, l.Close())
	l = openFile(t, dir, FileLogOptions{StartOffset: 7}) // ignored: the log exists
	require.Equal(t, int64(500), l.LogStartOffset())
	require.Equal(t, int64(502), l.LogEndOffset())
	require.NoError(t, l.Close())
}

func TestFileLogFsyncPolicies(t *testing.T) {
	for _, p := range []FsyncPolicy{FsyncOnFlush, FsyncEveryAppend, FsyncEveryNBytes, FsyncNever} {
		dir := t.TempDir()
		opts := FileLogOptions{Fsync: p, FsyncBytes: 500, SegmentBytes: 1500}
		l := openFile(t, dir, opts)
		all := appendN(t, l, 20)
		require.NoError(t, l.Flush())
		require.NoError(t, l.Close())
		l = openFile(t, dir, opts)
		require.Equal(t, all, readAll(t, l), "policy %d", p)
		require.NoError(t, l.Close())
	}
}

// A crash in the middle of a truncation is completed by the next open.
func TestFileLogPendingTruncation(t *testing.T) {
	dir := t.TempDir()
	opts := FileLogOptions{SegmentBytes: 500}
	l := openFile(t, dir, opts)
	all := appendN(t, l, 20)
	_, err := l.BumpLeaderEpoch(4)
	require.NoError(t, err)
	require.NoError(t, l.Close())

	st := filepath.Join(dir, StateFileName)
	require.NoError(t, os.WriteFile(st, []byte("0\n5\n0\ntruncate 30\n"), 0o644))
	l = openFile(t, dir, opts)
	require.Equal(t, int64(30), l.LogEndOffset())
	require.Equal(t, int32(5), l.LeaderEpoch())
	require.Equal(t, all[:len(readAll(t, l))], readAll(t, l))
	require.NoError(t, l.Close())
	data, err := os.ReadFile(st)
	require.NoError(t, err)
	m, _, _, err := decodeStateFile(data)
	require.NoError(t, err)
	require.Equal(t, logMeta{leaderEpoch: 5, logStart: 0, pending: "none", pendingOff: -1}, m)

	require.NoError(t, os.WriteFile(st, []byte("0\n5\n0\nfull 77\n"), 0o644))
	l = openFile(t, dir, opts)
	require.Equal(t, int64(77), l.LogStartOffset())
	require.Equal(t, int64(77), l.LogEndOffset())
	require.Equal(t, []string{filepath.Join(dir, segName(77, ".log"))}, segmentFiles(t, dir))
	require.NoError(t, l.Close())

	require.NoError(t, os.WriteFile(st, []byte("1\n5\n0\nnone -1\n"), 0o644))
	_, err = OpenFileLog(dir, opts)
	require.ErrorIs(t, err, ErrCorruptState)
}

func TestFileLogConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	l := openFile(t, dir, FileLogOptions{SegmentBytes: 800, IndexIntervalBytes: 100})
	defer l.Close()
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			end := l.LogEndOffset()
			for o := l.LogStartOffset(); o < end; o++ {
				got, err := l.Read(o, 100)
				if errors.Is(err, ErrOffsetOutOfRange) {
					break // truncated meanwhile
				}
				if err != nil {
					errc <- err
					return
				}
				if len(got) == 0 {
					break
				}
				if _, err := records.ParseBatch(got); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	appendN(t, l, 60)
	require.NoError(t, l.Truncate(30))
	appendN(t, l, 10)
	close(done)
	require.NoError(t, <-errc)
	require.Equal(t, int64(60), l.LogEndOffset())
}

// TestFileLogCheckpointRebuilt: the leader-epoch checkpoint is written
// without fsync, so a crash may leave it stale, empty or torn; the open
// rebuilds it from the batches and loses nothing.
func TestFileLogCheckpointRebuilt(t *testing.T) {
	dir := t.TempDir()
	opts := FileLogOptions{SegmentBytes: 1000}
	l := openFile(t, dir, opts)
	all := appendN(t, l, 30)
	require.NoError(t, l.Close())
	path := filepath.Join(dir, CheckpointFileName)
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, damaged := range []string{"", "0\n5\n0 0\n", "not a checkpoint", "0\n1\n7 999\n"} {
		require.NoError(t, os.WriteFile(path, []byte(damaged), 0o644))
		l = openFile(t, dir, opts)
		require.Equal(t, all, readAll(t, l))
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "checkpoint rewritten from the batches after %q", damaged)
		require.NoError(t, l.Close())
	}
}

// TestFileLogNewLogWritesNoState: opening a new log writes no recovery point,
// no state file, no checkpoint and no index (their absence means the same), and reopening it again
// changes nothing; the first bump of the leader epoch writes the state.
func TestFileLogNewLogWritesNoState(t *testing.T) {
	dir := t.TempDir()
	opts := FileLogOptions{StartOffset: 40}
	l := openFile(t, dir, opts)
	require.NoError(t, l.Close())
	before := dirContents(t, dir)
	require.NotContains(t, before, RecoveryPointFileName)
	require.NotContains(t, before, StateFileName)
	require.NotContains(t, before, CheckpointFileName)
	require.Contains(t, before, segName(40, ".log"))
	require.NotContains(t, before, segName(40, ".index"), "an index is created with its first entry")
	l = openFile(t, dir, FileLogOptions{})
	require.Equal(t, int64(40), l.LogStartOffset(), "the log start is the segment's base")
	require.Equal(t, before, dirContents(t, dir))
	e, err := l.BumpLeaderEpoch(3)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l = openFile(t, dir, FileLogOptions{})
	require.Equal(t, e, l.LeaderEpoch())
	require.Equal(t, int64(40), l.LogStartOffset())
	require.NoError(t, l.Close())
}

// TestFileLogRecoveryPointInterval: Flush writes the recovery point only once
// RecoveryPointInterval passed (negative: every Flush), a roll and Close
// always do, and a reopen after a Flush whose recovery point lags (a crash
// before Close, copied here) verifies the data past it and keeps all of it.
func TestFileLogRecoveryPointInterval(t *testing.T) {
	rp := func(dir string) string {
		data, err := os.ReadFile(filepath.Join(dir, RecoveryPointFileName))
		if errors.Is(err, os.ErrNotExist) {
			return ""
		}
		require.NoError(t, err)
		return string(data)
	}
	t.Run("default", func(t *testing.T) {
		dir := t.TempDir()
		l := openFile(t, dir, FileLogOptions{})
		all := appendN(t, l, 5)
		require.NoError(t, l.Flush())
		require.Empty(t, rp(dir), "Flush within the interval writes no recovery point")
		crashed := t.TempDir()
		require.NoError(t, os.CopyFS(crashed, os.DirFS(dir)))
		require.NoError(t, os.Remove(filepath.Join(crashed, LockFileName)))
		c := openFile(t, crashed, FileLogOptions{})
		require.Equal(t, all, readAll(t, c), "the flushed data past the recovery point is kept")
		require.Empty(t, c.Discarded())
		require.NoError(t, c.Close())
		require.NoError(t, l.Close())
		require.NotEmpty(t, rp(dir), "Close writes it")
	})
	t.Run("every flush", func(t *testing.T) {
		dir := t.TempDir()
		l := openFile(t, dir, FileLogOptions{RecoveryPointInterval: -1})
		appendN(t, l, 5)
		require.NoError(t, l.Flush())
		first := rp(dir)
		require.NotEmpty(t, first)
		appendN(t, l, 5)
		require.NoError(t, l.Flush())
		require.NotEqual(t, first, rp(dir))
		require.NoError(t, l.Close())
	})
	t.Run("roll", func(t *testing.T) {
		dir := t.TempDir()
		l := openFile(t, dir, FileLogOptions{SegmentBytes: 1000})
		appendN(t, l, 20)
		require.NotEmpty(t, rp(dir), "a roll writes the recovery point")
		require.NoError(t, l.Close())
	})
}

// The state file's two slots: each write goes in place to the slot that does
// not hold the current record, a write torn in that slot leaves the state
// before it, a file of the older single-record layout is read and replaced,
// and a file with no valid slot is refused.
// stateOf reads and decodes the state file at path: its bytes, the current record and
// its slot.
func stateOf(t testing.TB, path string) ([]byte, logMeta, int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	m, _, slot, err := decodeStateFile(data)
	require.NoError(t, err)
	return data, m, slot
}

func TestFileLogStateSlots(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, StateFileName)
	require.NoError(t, os.WriteFile(st, []byte("0\n3\n0\nnone -1\n"), 0o644))
	l := openFile(t, dir, FileLogOptions{})
	require.Equal(t, int32(3), l.LeaderEpoch())
	appendN(t, l, 2)
	for want := int32(4); want <= 6; want++ {
		e, err := l.BumpLeaderEpoch(-1)
		require.NoError(t, err)
		require.Equal(t, want, e)
	}
	require.NoError(t, l.Close())
	data, err := os.ReadFile(st)
	require.NoError(t, err)
	require.Len(t, data, 2*stateSlotSize, "replaced by the two-slot layout at the first write")
	m, seq, slot, err := decodeStateFile(data)
	require.NoError(t, err)
	require.Equal(t, int32(6), m.leaderEpoch)
	require.Equal(t, uint64(3), seq, "one replacement, then two writes in place")
	require.Equal(t, 0, slot)
	_, prev, ok := decodeStateSlot(data[stateSlotSize:])
	require.True(t, ok)
	require.Equal(t, int32(5), prev.leaderEpoch, "the other slot holds the record before")

	// A torn write into the current slot: the state before it, and the next
	// write goes to the torn slot again.
	torn := append([]byte(nil), data...)
	torn[4] ^= 0x01
	require.NoError(t, os.WriteFile(st, torn, 0o644))
	l = openFile(t, dir, FileLogOptions{})
	require.Equal(t, int32(5), l.LeaderEpoch())
	_, err = l.BumpLeaderEpoch(-1)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	data, m, slot = stateOf(t, st)
	require.Equal(t, int32(6), m.leaderEpoch)
	require.Equal(t, 0, slot)

	// Zeros in one slot (a file cut in a crash) are no record either.
	zeroed := append([]byte(nil), data...)
	clear(zeroed[:stateSlotSize])
	require.NoError(t, os.WriteFile(st, zeroed, 0o644))
	l = openFile(t, dir, FileLogOptions{})
	require.Equal(t, int32(5), l.LeaderEpoch())
	require.NoError(t, l.Close())

	clear(zeroed)
	require.NoError(t, os.WriteFile(st, zeroed, 0o644))
	_, err = OpenFileLog(dir, FileLogOptions{})
	require.ErrorIs(t, err, ErrCorruptState)
}

// SyncData makes the appended batches durable without rewriting the
// recovery point; a crash after it reopens with the synced tail recovered
// past the older recovery point.
func TestFileLogSyncDataLeavesRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	opts := FileLogOptions{Fsync: FsyncOnFlush, RecoveryPointInterval: -1}
	l := openFile(t, dir, opts)
	appendN(t, l, 3)
	require.NoError(t, l.Flush())
	rp := filepath.Join(dir, RecoveryPointFileName)
	before, err := os.ReadFile(rp)
	require.NoError(t, err)

	appendN(t, l, 2)
	require.NoError(t, l.SyncData())
	require.Zero(t, l.unflushed)
	after, err := os.ReadFile(rp)
	require.NoError(t, err)
	require.Equal(t, before, after, "SyncData wrote the recovery point")
	want, end := readAll(t, l), l.LogEndOffset()

	l.closeFiles() // a crash: no Close
	l = openFile(t, dir, opts)
	require.Equal(t, end, l.LogEndOffset())
	require.Equal(t, want, readAll(t, l))
	require.NoError(t, l.Close())
}

// overwriteFile leaves exactly the new content, longer or shorter than the
// old, and creates the file when absent.
func TestOverwriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), CheckpointFileName)
	for _, content := range []string{"0\n2\n0 0\n3 10\n", "0\n3\n0 0\n3 10\n7 20\n", "0\n0\n"} {
		require.NoError(t, overwriteFile(p, []byte(content)))
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, content, string(got))
	}
}

// TestFileLogUnsyncedBump: a bump written without a sync keeps the last durable
// record in the other slot (a second such bump goes to the same slot again);
// SyncData makes it durable with the batches appended after it; and a crash that
// keeps those batches but loses the bump reopens the log at the epoch of its last
// batch, never below it.
func TestFileLogUnsyncedBump(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, StateFileName)
	l := openFile(t, dir, FileLogOptions{})
	appendN(t, l, 2)
	e0, err := l.BumpLeaderEpoch(-1)
	require.NoError(t, err)
	_, err = l.BumpLeaderEpoch(-1) // the two-slot layout, both slots written
	require.NoError(t, err)
	e0++
	durable, _, durableSlot := stateOf(t, st)

	_, err = l.BumpLeaderEpochUnsynced(-1)
	require.NoError(t, err)
	e2, err := l.BumpLeaderEpochUnsynced(-1)
	require.NoError(t, err)
	require.Equal(t, e0+2, e2)
	data, m, slot := stateOf(t, st)
	require.Equal(t, e2, m.leaderEpoch)
	require.Equal(t, 1-durableSlot, slot)
	_, kept, ok := decodeStateSlot(data[durableSlot*stateSlotSize : (durableSlot+1)*stateSlotSize])
	require.True(t, ok)
	require.Equal(t, e0, kept.leaderEpoch, "the durable record is kept while the bumps are not synced")

	barrier := records.BuildControlBatch(records.ControlBatchSpec{Type: records.ControlMirrorPIDReset, Timestamp: 1})
	_, err = l.AppendAsLeader(barrier)
	require.NoError(t, err)
	require.Equal(t, e2, l.LatestEpoch())

	// A crash that keeps the barrier and loses the bumps' slot.
	crash := t.TempDir()
	for name, b := range dirContents(t, dir) {
		require.NoError(t, os.WriteFile(filepath.Join(crash, name), b, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(crash, StateFileName), durable, 0o644))
	for range 2 { // and the epoch raised at the first open is written
		c := openFile(t, crash, FileLogOptions{})
		require.Equal(t, e2, c.LeaderEpoch(), "below the epoch of the log's last batch")
		require.NoError(t, c.Close())
	}

	require.NoError(t, l.SyncData())
	require.False(t, l.metaUnsynced)
	e3, err := l.BumpLeaderEpoch(-1)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	data, m, slot = stateOf(t, st)
	require.Equal(t, e3, m.leaderEpoch)
	require.Equal(t, durableSlot, slot, "once synced, the next write goes to the other slot")
	_, prev, ok := decodeStateSlot(data[(1-durableSlot)*stateSlotSize : (2-durableSlot)*stateSlotSize])
	require.True(t, ok)
	require.Equal(t, e2, prev.leaderEpoch)
}
