package fetcher

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemoryLogCrashDropsUnflushed(t *testing.T) {
	l := NewMemoryLog(MemoryLogOptions{})
	require.NoError(t, l.Append(dataBatch(t, 0, 1, 5)))
	require.NoError(t, l.Flush())
	require.NoError(t, l.Append(dataBatch(t, 5, 2, 5)))
	require.NoError(t, l.Append(txnBatch(t, 10, 2, 3, 0, 1)))
	require.Equal(t, int64(11), l.LogEndOffset())
	_, err := l.BumpLeaderEpoch(6)
	require.NoError(t, err)
	l.Crash()
	require.Equal(t, int64(5), l.LogEndOffset())
	require.Equal(t, int64(5), l.HighWatermark())
	require.Equal(t, ents(1, 0), l.Epochs().Entries())
	require.Empty(t, l.OpenTransactions())
	require.Equal(t, int32(7), l.LeaderEpoch(), "epoch bumps are durable at once")
	require.NoError(t, l.Append(dataBatch(t, 5, 2, 5)))

	// Truncation is durable at once; a crash keeps the truncated log.
	require.NoError(t, l.Flush())
	require.NoError(t, l.Truncate(5))
	l.Crash()
	require.Equal(t, int64(5), l.LogEndOffset())
	// A closed log is reopened by Crash.
	require.NoError(t, l.Close())
	l.Crash()
	require.NoError(t, l.Append(dataBatch(t, 5, 2, 1)))
}

func TestMemoryLogSyncEveryAppend(t *testing.T) {
	l := NewMemoryLog(MemoryLogOptions{SyncEveryAppend: true, StartOffset: 10})
	require.Equal(t, int64(10), l.LogStartOffset())
	require.NoError(t, l.Append(dataBatch(t, 10, 1, 5)))
	l.Crash()
	require.Equal(t, int64(15), l.LogEndOffset())
}

func TestMemoryLogFaultInjection(t *testing.T) {
	l := NewMemoryLog(MemoryLogOptions{FailAppendN: 2, FailFlushN: 1})
	require.NoError(t, l.Append(dataBatch(t, 0, 1, 5)))
	require.ErrorIs(t, l.Append(dataBatch(t, 5, 1, 5)), ErrInjected)
	require.Equal(t, int64(5), l.LogEndOffset(), "a failed append appends nothing")
	require.NoError(t, l.Append(dataBatch(t, 5, 1, 5)))
	require.ErrorIs(t, l.Flush(), ErrInjected)
	l.Crash()
	require.Equal(t, int64(0), l.LogEndOffset(), "a failed flush makes nothing durable")

	l.FailAppendAfter(1)
	_, err := l.AppendAsLeader(ctrlBatch(0, 0, -1, -1, 7))
	require.ErrorIs(t, err, ErrInjected)
	_, err = l.AppendAsLeader(ctrlBatch(0, 0, -1, -1, 7))
	require.NoError(t, err)
	l.FailFlushAfter(2)
	require.NoError(t, l.Flush())
	require.ErrorIs(t, l.Flush(), ErrInjected)
	require.NoError(t, l.Flush())
	l.Crash()
	require.Equal(t, int64(1), l.LogEndOffset())
}

// TestMemoryLogCrashAfterTruncateLeavesNoHole: batches that were never flushed are gone
// after Crash even when a later Truncate kept them, and the log end follows the surviving
// data instead of the truncation offset (no offsets without data).
func TestMemoryLogCrashAfterTruncateLeavesNoHole(t *testing.T) {
	l := NewMemoryLog(MemoryLogOptions{})
	for i := int64(0); i < 3; i++ {
		require.NoError(t, l.Append(dataBatch(t, 2*i, 0, 2)))
	}
	require.NoError(t, l.Truncate(4))
	require.Equal(t, int64(4), l.LogEndOffset())
	l.Crash()
	require.Equal(t, int64(0), l.LogStartOffset())
	require.Equal(t, int64(0), l.LogEndOffset(), "nothing was flushed")
	data, err := l.Read(0, 1<<20)
	require.NoError(t, err)
	require.Empty(t, data)
}
