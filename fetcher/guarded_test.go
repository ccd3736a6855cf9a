package fetcher

import (
	"testing"

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
