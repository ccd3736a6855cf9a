package fetcher

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// FuzzFileLogRecover writes arbitrary bytes as the only segment of a log,
// with a recovery point claiming its first flushed bytes were fsynced
// (flushed 0 is a log without a claim). Opening never panics; it either
// fails with an error Is(ErrCorruptLog) and leaves the directory unchanged,
// or recovers a prefix of the bytes made of whole CRC-valid batches that
// holds every flushed byte, stable across a reopen, that accepts an append at
// its end.
func FuzzFileLogRecover(f *testing.F) {
	var seq []byte
	for i := int64(0); i < 6; i++ {
		seq = append(seq, dataBatch(f, i*3, int32(i/2), 3)...)
	}
	txn := cat(dataBatch(f, 0, 0, 2), txnBatch(f, 2, 1, 9, 0, 2), ctrlBatch(4, 1, 9, 0, records.ControlAbort), ctrlBatch(5, 2, -1, -1, records.ControlMirrorPIDReset))
	f.Add(seq, uint16(0))
	f.Add(seq, uint16(len(seq)))
	f.Add(seq, uint16(len(seq)/2))
	f.Add(txn, uint16(0))
	f.Add(seq[:len(seq)-10], uint16(0))
	f.Add(seq[:len(seq)-10], uint16(len(seq)))
	f.Add(seq[:records.HeaderSize+3], uint16(0))
	f.Add([]byte{}, uint16(0))
	f.Add([]byte("garbage"), uint16(3))
	flipped := bytes.Clone(seq)
	flipped[len(flipped)/2] ^= 1
	f.Add(flipped, uint16(0))
	f.Add(flipped, uint16(len(seq)))
	gap := cat(dataBatch(f, 0, 0, 2), dataBatch(f, 100, 1, 2), dataBatch(f, 50, 1, 2))
	f.Add(gap, uint16(0))
	f.Add(append(bytes.Clone(txn), make([]byte, 100)...), uint16(len(txn)))
	f.Fuzz(func(t *testing.T, data []byte, flushed uint16) {
		dir := fuzzDir(t)
		require.NoError(t, os.WriteFile(filepath.Join(dir, segName(0, ".log")), data, 0o644))
		claim := int(flushed)
		if claim > 0 {
			rp := encodeRecoveryPoint(recoveryPoint{active: segMark{0, int64(claim), 0}})
			path := filepath.Join(dir, RecoveryPointFileName)
			require.NoError(t, os.WriteFile(path, rp, 0o644))
			// Older than the segment file: the claim is checked batch by
			// batch. Written a clock tick after the segment, it would say
			// the file was unchanged since it was fsynced, and the open
			// would rightly skip the CRCs below it (the fabricated bytes
			// were never appended, so nothing vouches for them).
			old := time.Now().Add(-time.Hour)
			require.NoError(t, os.Chtimes(path, old, old))
		}
		before := dirContents(t, dir)
		opts := FileLogOptions{IndexIntervalBytes: 64, Fsync: FsyncNever}
		l, err := OpenFileLog(dir, opts)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptLog)
			require.Equal(t, before, dirContents(t, dir), "a refused open modifies nothing")
			return
		}
		got := readAll(t, l)
		require.True(t, bytes.HasPrefix(data, got), "recovered log is not a prefix")
		require.GreaterOrEqual(t, len(got), claim, "flushed bytes were dropped")
		it := records.NewIterator(got)
		var end int64
		for it.Next() {
			require.NoError(t, it.Batch().VerifyCRC())
			end = it.Batch().NextOffset()
		}
		require.NoError(t, it.Err())
		require.False(t, it.Partial())
		require.Equal(t, end, l.LogEndOffset())
		ents, lso := l.Epochs().Entries(), l.LastStableOffset()
		require.NoError(t, l.Close())

		l, err = OpenFileLog(dir, opts)
		require.NoError(t, err)
		require.Equal(t, got, readAll(t, l))
		require.Equal(t, ents, l.Epochs().Entries())
		require.Equal(t, lso, l.LastStableOffset())
		require.NoError(t, l.Append(dataBatch(t, end, 1<<20, 1)))
		require.Equal(t, end+1, l.LogEndOffset())
		require.NoError(t, l.Close())
	})
}

// fuzzDir is a temporary directory on tmpfs when there is one (fsync is then
// free, which makes fuzzing much faster).
func fuzzDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "kmirror-fuzz-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}
