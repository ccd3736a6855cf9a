package fetcher

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadOnlySurvivesTruncation: truncation rebuilds a log's state from its
// batches; the read-only flag of a mirror partition must survive it (a
// failback truncates a MIRRORING partition, which must keep refusing client
// writes).
func TestReadOnlySurvivesTruncation(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, _ func(Log) Log) {
		require.NoError(t, l.Append(dataBatch(t, 0, 0, 3)))
		require.NoError(t, l.Append(dataBatch(t, 3, 0, 3)))
		l.SetReadOnly(true)
		require.NoError(t, l.Truncate(3))
		require.True(t, l.ReadOnly())
		_, err := l.AppendAsLeader(dataBatch(t, 0, 0, 1))
		require.ErrorIs(t, err, ErrReadOnly)
		require.NoError(t, l.TruncateFullyAndStartAt(10))
		require.True(t, l.ReadOnly())
		_, err = l.AppendAsLeader(dataBatch(t, 0, 0, 1))
		require.ErrorIs(t, err, ErrReadOnly)
		require.Equal(t, int64(10), l.LogEndOffset())
	})
}
