package fetcher

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// FuzzFileLogRecover writes arbitrary bytes as the only segment of a log:
// opening never panics nor fails, and the recovered log is a prefix of the
// bytes made of whole CRC-valid batches, stable across a reopen, that accepts
// an append at its end.
func FuzzFileLogRecover(f *testing.F) {
	var seq []byte
	for i := int64(0); i < 6; i++ {
		seq = append(seq, dataBatch(f, i*3, int32(i/2), 3)...)
	}
	txn := cat(dataBatch(f, 0, 0, 2), txnBatch(f, 2, 1, 9, 0, 2), ctrlBatch(4, 1, 9, 0, records.ControlAbort), ctrlBatch(5, 2, -1, -1, records.ControlMirrorPIDReset))
	f.Add(seq)
	f.Add(txn)
	f.Add(seq[:len(seq)-10])
	f.Add(seq[:records.HeaderSize+3])
	f.Add([]byte{})
	f.Add([]byte("garbage"))
	flipped := bytes.Clone(seq)
	flipped[len(flipped)/2] ^= 1
	f.Add(flipped)
	gap := cat(dataBatch(f, 0, 0, 2), dataBatch(f, 100, 1, 2), dataBatch(f, 50, 1, 2))
	f.Add(gap)
	f.Add(append(bytes.Clone(txn), make([]byte, 100)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := fuzzDir(t)
		require.NoError(t, os.WriteFile(filepath.Join(dir, segName(0, ".log")), data, 0o644))
		opts := FileLogOptions{IndexIntervalBytes: 64, Fsync: FsyncNever}
		l, err := OpenFileLog(dir, opts)
		require.NoError(t, err)
		got := readAll(t, l)
		require.True(t, bytes.HasPrefix(data, got), "recovered log is not a prefix")
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
