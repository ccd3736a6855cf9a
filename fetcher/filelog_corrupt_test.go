package fetcher

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

var corruptOpts = FileLogOptions{SegmentBytes: 1024, IndexIntervalBytes: 200}

// segBatches is one segment file of a test log and its batches.
type segBatches struct {
	path    string
	data    []byte
	batches []records.Batch
	pos     []int // position of each batch
}

// corruptLayout writes a closed log of 40 batches (120 offsets) over several
// segments and returns its segments.
func corruptLayout(t *testing.T, dir string) []segBatches {
	t.Helper()
	l := openFile(t, dir, corruptOpts)
	appendN(t, l, 40)
	require.NoError(t, l.Close())
	var out []segBatches
	for _, p := range segmentFiles(t, dir) {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		sb := segBatches{path: p, data: data}
		it := records.NewIterator(data)
		for pos := 0; it.Next(); pos += len(it.Batch()) {
			sb.batches = append(sb.batches, it.Batch())
			sb.pos = append(sb.pos, pos)
		}
		require.NoError(t, it.Err())
		out = append(out, sb)
	}
	require.GreaterOrEqual(t, len(out), 5)
	return out
}

func writeSeg(t *testing.T, sb segBatches, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(sb.path, data, 0o644))
}

func TestFileLogCorruptionRefused(t *testing.T) {
	type want struct {
		seg    int   // segment named by the error
		offset int64 // CorruptSegmentError.Offset
		pos    int64
		reason error
	}
	cases := map[string]func(t *testing.T, dir string, segs []segBatches) want{
		"rolled segment header": func(t *testing.T, dir string, segs []segBatches) want {
			s := segs[0] // batchLength of the second batch
			data := append([]byte(nil), s.data...)
			binary.BigEndian.PutUint32(data[s.pos[1]+8:], 1<<30)
			writeSeg(t, s, data)
			return want{0, s.batches[1].BaseOffset(), int64(s.pos[1]), records.ErrCorrupt}
		},
		"rolled segment payload": func(t *testing.T, dir string, segs []segBatches) want {
			s := segs[1] // a record byte of the last batch: only the CRC sees it
			data := append([]byte(nil), s.data...)
			data[len(data)-5] ^= 0x40
			writeSeg(t, s, data)
			last := len(s.batches) - 1
			return want{1, s.batches[last].BaseOffset(), int64(s.pos[last]), records.ErrCorrupt}
		},
		"missing middle segment": func(t *testing.T, dir string, segs []segBatches) want {
			require.NoError(t, os.Remove(segs[2].path))
			return want{2, segs[1].batches[len(segs[1].batches)-1].NextOffset(), 0, ErrSegmentMissing}
		},
		"rolled segment cut at a batch boundary": func(t *testing.T, dir string, segs []segBatches) want {
			s := segs[1]
			last := len(s.batches) - 1
			writeSeg(t, s, s.data[:s.pos[last]])
			return want{1, s.batches[last].BaseOffset(), int64(s.pos[last]), ErrSegmentMismatch}
		},
		"rolled segment cut inside a batch": func(t *testing.T, dir string, segs []segBatches) want {
			s := segs[0]
			writeSeg(t, s, s.data[:s.pos[2]+30])
			return want{0, s.batches[2].BaseOffset(), int64(s.pos[2]), records.ErrCorrupt}
		},
		"active segment below the flush point": func(t *testing.T, dir string, segs []segBatches) want {
			s := segs[len(segs)-1]
			data := append([]byte(nil), s.data...)
			data[s.pos[1]+len(s.batches[1])/2] ^= 1
			writeSeg(t, s, data)
			return want{len(segs) - 1, s.batches[1].BaseOffset(), int64(s.pos[1]), records.ErrCorrupt}
		},
		"active segment cut below the flush point": func(t *testing.T, dir string, segs []segBatches) want {
			s := segs[len(segs)-1]
			writeSeg(t, s, s.data[:s.pos[1]])
			return want{len(segs) - 1, s.batches[0].NextOffset(), int64(s.pos[1]), ErrSegmentMismatch}
		},
		"unexpected segment": func(t *testing.T, dir string, segs []segBatches) want {
			extra := filepath.Join(dir, segName(500, ".log"))
			require.NoError(t, os.WriteFile(extra, dataBatch(t, 500, 9, 1), 0o644))
			return want{-1, 500, 0, ErrSegmentUnexpected}
		},
		"legacy log, rolled segment header": func(t *testing.T, dir string, segs []segBatches) want {
			require.NoError(t, os.Remove(filepath.Join(dir, RecoveryPointFileName)))
			s := segs[1]
			data := append([]byte(nil), s.data...)
			data[s.pos[1]+16] = 7 // magic
			writeSeg(t, s, data)
			return want{1, s.batches[0].NextOffset(), int64(s.pos[1]), records.ErrCorrupt}
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			segs := corruptLayout(t, dir)
			w := damage(t, dir, segs)
			before := dirContents(t, dir)
			_, err := OpenFileLog(dir, corruptOpts)
			require.ErrorIs(t, err, ErrCorruptLog)
			require.ErrorIs(t, err, w.reason)
			var ce *CorruptSegmentError
			require.True(t, errors.As(err, &ce))
			file := filepath.Join(dir, segName(500, ".log"))
			if w.seg >= 0 {
				file = segs[w.seg].path
			}
			require.Equal(t, file, ce.File)
			require.Equal(t, w.offset, ce.Offset, "offset")
			require.Equal(t, w.pos, ce.Position, "position")
			require.Contains(t, err.Error(), file)
			require.Equal(t, before, dirContents(t, dir), "nothing deleted or shortened")
			// The log is not locked by the failed open.
			_, err = OpenFileLog(dir, corruptOpts)
			require.ErrorIs(t, err, ErrCorruptLog)
		})
	}
}

// A torn tail past the active segment's flush point is cut without an
// error, and reported.
func TestFileLogTornTailPastFlushPointCut(t *testing.T) {
	dir := t.TempDir()
	opts := corruptOpts
	opts.Fsync = FsyncNever // the tail of the active segment is never flushed
	l := openFile(t, dir, opts)
	all := appendN(t, l, 40)
	end := l.LogEndOffset()
	require.NoError(t, l.Close())
	segs := segmentFiles(t, dir)
	last := segs[len(segs)-1]
	data, err := os.ReadFile(last)
	require.NoError(t, err)
	next := dataBatch(t, end, 9, 3)
	torn := append(append([]byte(nil), data...), next[:len(next)-4]...)
	require.NoError(t, os.WriteFile(last, torn, 0o644))

	l = openFile(t, dir, opts)
	require.Equal(t, end, l.LogEndOffset())
	require.Equal(t, all, readAll(t, l))
	d := l.Discarded()
	require.Len(t, d, 1)
	require.Equal(t, last, d[0].File)
	require.Equal(t, int64(len(data)), d[0].Position)
	require.Equal(t, end, d[0].FromOffset)
	require.Equal(t, int64(len(next)-4), d[0].Bytes)
	require.False(t, d[0].Repaired)
	require.NoError(t, l.Close())
	got, err := os.ReadFile(last)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

// RepairCorruption cuts at the first bad offset, removes the later segments
// and reports exactly what went.
func TestFileLogRepairCorruption(t *testing.T) {
	dir := t.TempDir()
	segs := corruptLayout(t, dir)
	s := segs[1]
	data := append([]byte(nil), s.data...)
	binary.BigEndian.PutUint32(data[s.pos[1]+8:], 1<<30)
	writeSeg(t, s, data)
	cut := s.batches[1].BaseOffset()
	var removed []string
	var removedBytes int64
	for _, later := range segs[2:] {
		removed = append(removed, later.path)
		removedBytes += int64(len(later.data))
	}

	opts := corruptOpts
	opts.RepairCorruption = true
	l := openFile(t, dir, opts)
	require.Equal(t, cut, l.LogEndOffset())
	d := l.Discarded()
	require.Len(t, d, 1)
	require.True(t, d[0].Repaired)
	require.Equal(t, s.path, d[0].File)
	require.Equal(t, int64(s.pos[1]), d[0].Position)
	require.Equal(t, cut, d[0].FromOffset)
	require.Equal(t, int64(120), d[0].ToOffset)
	require.Equal(t, removed, d[0].Files)
	require.Equal(t, int64(len(data)-s.pos[1])+removedBytes, d[0].Bytes)
	require.ErrorIs(t, d[0].Reason, ErrCorruptLog)
	require.Equal(t, []string{segs[0].path, segs[1].path}, segmentFiles(t, dir))
	var want []byte
	want = append(want, segs[0].data...)
	want = append(want, s.data[:s.pos[1]]...)
	require.Equal(t, want, readAll(t, l))
	require.NoError(t, l.Append(dataBatch(t, cut, 5, 2)))
	require.NoError(t, l.Close())

	// The repaired log opens without the option and without loss.
	l = openFile(t, dir, corruptOpts)
	require.Equal(t, cut+2, l.LogEndOffset())
	require.Empty(t, l.Discarded())
	require.NoError(t, l.Close())
}

// Truncate modifies only the segments at and after the offset: damage in an
// earlier segment is reported, never cut.
func TestFileLogTruncateTouchesOnlyItsSegments(t *testing.T) {
	dir := t.TempDir()
	l := openFile(t, dir, corruptOpts)
	appendN(t, l, 40)
	segs := segmentFiles(t, dir)
	keep := map[string][]byte{}
	for _, p := range segs[:3] {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		keep[p] = b
	}
	// An offset in the fourth segment.
	b, err := os.ReadFile(segs[3])
	require.NoError(t, err)
	fourthBase := records.Batch(b).BaseOffset()
	require.NoError(t, l.Truncate(fourthBase+3))
	require.Equal(t, fourthBase+3, l.LogEndOffset())
	for p, b := range keep {
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, b, got, "%s untouched", p)
	}
	require.Equal(t, segs[:4], segmentFiles(t, dir))

	// The first segment is damaged under the open log: the next truncation
	// fails with the typed error and leaves it as it is.
	data := append([]byte(nil), keep[segs[0]]...)
	first, err := records.ParseBatch(data)
	require.NoError(t, err)
	binary.BigEndian.PutUint32(data[len(first)+8:], 1<<30)
	require.NoError(t, os.WriteFile(segs[0], data, 0o644))
	err = l.Truncate(fourthBase)
	require.ErrorIs(t, err, ErrCorruptLog)
	require.ErrorIs(t, err, ErrLogFailed)
	got, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.ErrorIs(t, l.Append(dataBatch(t, 500, 9, 1)), ErrLogFailed)
	require.ErrorIs(t, l.Close(), ErrLogFailed)
	_, err = OpenFileLog(dir, corruptOpts)
	require.ErrorIs(t, err, ErrCorruptLog)
}

// A log written before recovery points existed opens (its last segment
// recovered, the others checked whole) and gets one.
func TestFileLogOpensLegacyLog(t *testing.T) {
	dir := t.TempDir()
	l := openFile(t, dir, corruptOpts)
	all := appendN(t, l, 40)
	require.NoError(t, l.Close())
	rp := filepath.Join(dir, RecoveryPointFileName)
	require.NoError(t, os.Remove(rp))
	segs := segmentFiles(t, dir)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("torn tail"))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l = openFile(t, dir, corruptOpts)
	require.Equal(t, all, readAll(t, l))
	require.Len(t, l.Discarded(), 1)
	require.NoError(t, l.Close())
	_, err = os.Stat(rp)
	require.NoError(t, err)
	require.Equal(t, segs, segmentFiles(t, dir))
}
