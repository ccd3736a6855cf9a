package fetcher

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// TestAppendPreverifiedChecksAllButCRC: the loop's append path skips only the
// CRC (which the loop verified); every other check of Append still refuses.
func TestAppendPreverifiedChecksAllButCRC(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		pa, ok := l.(preverifiedAppender)
		require.True(t, ok, "%T must implement preverifiedAppender", l)
		good := dataBatch(t, 0, 0, 3)
		for name, in := range map[string][]byte{
			"empty":    nil,
			"garbage":  []byte("not a batch at all, clearly not one"),
			"half":     good[:len(good)/2],
			"trailing": cat(good, good[:20]),
			"magic":    append(append(bytes.Clone(good[:16]), 1), good[17:]...),
		} {
			require.ErrorIs(t, pa.appendPreverified(in), ErrInvalidBatch, name)
			require.Equal(t, int64(0), l.LogEndOffset(), name)
		}
		require.NoError(t, pa.appendPreverified(cat(good, dataBatch(t, 3, 0, 2))))
		require.Equal(t, int64(5), l.LogEndOffset())
		require.ErrorIs(t, pa.appendPreverified(dataBatch(t, 4, 0, 1)), ErrOffsetRegression)
		// The public Append still verifies the CRC.
		bad := dataBatch(t, 5, 0, 1)
		bad[len(bad)-1] ^= 0xff
		require.ErrorIs(t, l.Append(bad), records.ErrCorrupt)
		// A host type embedding one of our logs with its own Append keeps it.
		w := &appendCounter{Log: l}
		require.NoError(t, appendVerified(w, dataBatch(t, 5, 0, 1)))
		require.Equal(t, 1, w.n)
		l = reopen(l)
		require.Equal(t, int64(6), l.LogEndOffset())
		got, err := l.Read(0, 1<<20)
		require.NoError(t, err)
		require.Equal(t, cat(good, dataBatch(t, 3, 0, 2), dataBatch(t, 5, 0, 1)), got)
	})
}

// TestFileLogWritebackKeepsData: appends past writebackBytes start the
// writeback (the position advances) and change nothing that is read back or
// recovered, also after a truncation cut the segment below that position.
func TestFileLogWritebackKeepsData(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncOnFlush, FsyncEveryNBytes, FsyncNever} {
		dir := t.TempDir()
		l := openFile(t, dir, FileLogOptions{Fsync: policy, FsyncBytes: 8 << 20})
		var want []byte
		var off int64
		for len(want) < 3*writebackBytes {
			b := buildBatch(t, records.BatchSpec{BaseOffset: off, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 64, 1000)
			require.NoError(t, l.Append(b))
			want = append(want, b...)
			off += 64
		}
		s := l.active()
		if policy == FsyncNever {
			require.Zero(t, s.wbPos, "FsyncNever leaves writeback to the kernel")
		} else {
			require.Greater(t, s.wbPos, int64(2*writebackBytes), "policy %d", policy)
		}
		require.NoError(t, l.Truncate(64))
		want = want[:len(batchAt(t, want, 0))]
		b := buildBatch(t, records.BatchSpec{BaseOffset: 64, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 64, 1000)
		require.NoError(t, l.Append(b))
		want = append(want, b...)
		require.NoError(t, l.Close())
		l = openFile(t, dir, FileLogOptions{Fsync: policy})
		got, err := l.Read(0, 1<<30)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.NoError(t, l.Close())
	}
}

// TestFileLogWritebackRunsOnlyWhileQueued: a FileLog whose policy fsyncs
// later hands its writeback hints to its FileCache, whose goroutine exists
// only while hints are queued (an idle partition costs no goroutine); after
// Close the log holds no descriptor. FsyncNever leaves writeback to the
// kernel.
func TestFileLogWritebackRunsOnlyWhileQueued(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncOnFlush, FsyncEveryNBytes, FsyncNever} {
		files := NewFileCache(8)
		l := openFile(t, t.TempDir(), FileLogOptions{Fsync: policy, Files: files})
		for off := int64(0); off < 3*writebackBytes/1000; off += 64 {
			require.NoError(t, l.Append(buildBatch(t, records.BatchSpec{BaseOffset: off, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 64, 1000)))
		}
		runs := files.waitWritebackIdle()
		if policy == FsyncNever {
			require.Zero(t, runs, "FsyncNever leaves writeback to the kernel")
		} else {
			require.NotZero(t, runs, "policy %d", policy)
		}
		require.NoError(t, l.Close())
		files.waitWritebackIdle()
		require.Zero(t, files.Stats().Open, "policy %d: descriptors left open after Close", policy)
	}
}

// appendCounter wraps a Log and counts Append calls.
type appendCounter struct {
	Log
	n int
}

func (a *appendCounter) Append(b []byte) error {
	a.n++
	return a.Log.Append(b)
}

func batchAt(t *testing.T, buf []byte, pos int) records.Batch {
	t.Helper()
	b, err := records.ParseBatch(buf[pos:])
	require.NoError(t, err)
	return b
}
