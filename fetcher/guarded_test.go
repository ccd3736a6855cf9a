package fetcher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// TestLogChangesMovesOnWrites: every write to a MemoryLog or a FileLog moves
// LogChanges, reads do not; other Log implementations are not tracked.
func TestLogChangesMovesOnWrites(t *testing.T) {
	m := NewMemoryLog(MemoryLogOptions{})
	f, err := OpenFileLog(t.TempDir(), FileLogOptions{})
	require.NoError(t, err)
	defer f.Close()
	batch, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []records.Record{{Value: []byte("v")}})
	require.NoError(t, err)
	for _, l := range []Log{m, f} {
		g := LogChanges()
		_, _, _ = l.HighWatermark(), l.LogEndOffset(), l.LatestEpoch()
		_, err := l.Read(0, 100)
		require.NoError(t, err)
		require.Equal(t, g, LogChanges(), "%T: reads", l)
		require.NoError(t, l.Append(batch))
		require.Greater(t, LogChanges(), g, "%T: append", l)
		g = LogChanges()
		_, err = l.BumpLeaderEpoch(-1)
		require.NoError(t, err)
		require.Greater(t, LogChanges(), g, "%T: leader epoch", l)
		g = LogChanges()
		require.NoError(t, l.Truncate(0))
		require.Greater(t, LogChanges(), g, "%T: truncate", l)
		require.True(t, TracksChanges(l))
	}
	require.False(t, TracksChanges(struct{ Log }{m}))
}

// TestOffsetsReadWithoutTheLock: the offsets of a MemoryLog and of a FileLog
// (reopened, with data) are answered while a writer holds the log's lock (a
// stop holds it across an fsync), with what the last finished write left,
// and a write's offsets are seen as soon as it ends.
func TestOffsetsReadWithoutTheLock(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFileLog(dir, FileLogOptions{})
	require.NoError(t, err)
	batchAt := func(base int64) []byte {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: base, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]records.Record{{Value: []byte("a")}, {Value: []byte("b")}})
		require.NoError(t, err)
		return b
	}
	require.NoError(t, f.Append(batchAt(0)))
	require.NoError(t, f.Close())
	f, err = OpenFileLog(dir, FileLogOptions{})
	require.NoError(t, err)
	defer f.Close()
	m := NewMemoryLog(MemoryLogOptions{StartOffset: 7})

	type logWithLock interface {
		Log
		lockForTest() func()
	}
	for _, tc := range []struct {
		name             string
		l                logWithLock
		start, end, next int64
	}{{"MemoryLog", memLocker{m}, 7, 7, 9}, {"FileLog", fileLocker{f}, 0, 2, 4}} {
		l := tc.l
		require.Equal(t, tc.start, l.LogStartOffset(), tc.name)
		require.Equal(t, tc.end, l.LogEndOffset(), "%s: reopened or new", tc.name)
		unlock := l.lockForTest()
		got := make(chan [3]int64, 1)
		go func() { got <- [3]int64{l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark()} }()
		select {
		case offs := <-got:
			require.Equal(t, [3]int64{tc.start, tc.end, tc.end}, offs, "%s: read while a writer holds the lock", tc.name)
		case <-time.After(10 * time.Second):
			unlock()
			t.Fatalf("%s: reading the offsets waited for the writer's lock", tc.name)
		}
		unlock()
		require.NoError(t, l.Append(batchAt(tc.end)))
		require.Equal(t, tc.next, l.LogEndOffset(), "%s: after an append", tc.name)
		require.Equal(t, tc.next, l.HighWatermark(), "%s: after an append", tc.name)
		require.NoError(t, l.Truncate(tc.end))
		require.Equal(t, tc.end, l.LogEndOffset(), "%s: after a truncation", tc.name)
	}
}

type memLocker struct{ *MemoryLog }

func (m memLocker) lockForTest() func() { m.mu.Lock(); return m.mu.Unlock }

type fileLocker struct{ *FileLog }

func (f fileLocker) lockForTest() func() { f.mu.Lock(); return f.mu.Unlock }
