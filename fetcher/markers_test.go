package fetcher

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

func TestAbortOpenTransactions(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		// 10 committed records, an open transaction of pid 7, then 20 records of an
		// idempotent producer and a second open transaction of pid 8: the failover case
		// of issue 11, where LSO truncation lost the 20.
		require.NoError(t, l.Append(dataBatch(t, 0, 0, 10)))
		require.NoError(t, l.Append(txnBatch(t, 10, 0, 7, 3, 1)))
		require.NoError(t, l.Append(dataBatch(t, 11, 0, 20)))
		require.NoError(t, l.Append(txnBatch(t, 31, 0, 8, 0, 2)))
		require.Equal(t, int64(10), l.LastStableOffset())
		_, err := l.BumpLeaderEpoch(0)
		require.NoError(t, err)
		l = reopen(l)

		aborted, err := AbortOpenTransactions(l, 1_700_000_000_000)
		require.NoError(t, err)
		require.Equal(t, []OpenTxn{{ProducerID: 7, ProducerEpoch: 3, FirstOffset: 10}, {ProducerID: 8, ProducerEpoch: 0, FirstOffset: 31}}, aborted)
		require.Equal(t, int64(35), l.LogEndOffset(), "every record kept, two markers appended")
		require.Equal(t, l.HighWatermark(), l.LastStableOffset())
		require.Empty(t, l.OpenTransactions())

		// The markers are ABORT control batches of the transactions' producers, at the
		// log's leader epoch, as a coordinator writes them.
		bs := allBatches(t, l)
		for i, want := range []struct {
			pid    int64
			pepoch int16
		}{{7, 3}, {8, 0}} {
			b := bs[len(bs)-2+i]
			require.True(t, b.Attributes().IsControl() && b.Attributes().IsTransactional())
			typ, err := b.ControlType()
			require.NoError(t, err)
			require.Equal(t, records.ControlAbort, typ)
			require.Equal(t, want.pid, b.ProducerID())
			require.Equal(t, want.pepoch, b.ProducerEpoch())
			require.Equal(t, l.LeaderEpoch(), b.PartitionLeaderEpoch())
			require.NoError(t, b.VerifyCRC())
		}

		// Idempotent, also after a reopen: nothing left to abort.
		l = reopen(l)
		aborted, err = AbortOpenTransactions(l, 1_700_000_000_001)
		require.NoError(t, err)
		require.Empty(t, aborted)
		require.Equal(t, int64(35), l.LogEndOffset())
	})
}

func TestWriteTxnMarkerRefusals(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.NoError(t, l.Append(txnBatch(t, 0, 0, 7, 3, 2)))
		l = reopen(l)

		// A producer with no open transaction.
		_, err := WriteTxnMarker(l, TxnMarker{ProducerID: 99, ProducerEpoch: 0})
		require.ErrorIs(t, err, ErrUnknownProducer)
		var me *MarkerError
		require.ErrorAs(t, err, &me)
		require.Nil(t, me.Open)
		require.Contains(t, err.Error(), "producer 99")

		// A marker with a stale producer epoch.
		_, err = WriteTxnMarker(l, TxnMarker{ProducerID: 7, ProducerEpoch: 2})
		require.ErrorIs(t, err, ErrProducerFenced)
		require.ErrorAs(t, err, &me)
		require.Equal(t, &OpenTxn{ProducerID: 7, ProducerEpoch: 3, FirstOffset: 0}, me.Open)
		require.Equal(t, int64(2), l.LogEndOffset(), "nothing appended")
		require.Equal(t, int64(0), l.LastStableOffset())

		// The right marker commits; a second one finds nothing open.
		off, err := WriteTxnMarker(l, TxnMarker{ProducerID: 7, ProducerEpoch: 3, Commit: true})
		require.NoError(t, err)
		require.Equal(t, int64(2), off)
		require.Equal(t, int64(3), l.LastStableOffset())
		_, err = WriteTxnMarker(l, TxnMarker{ProducerID: 7, ProducerEpoch: 3})
		require.ErrorIs(t, err, ErrUnknownProducer)
	})
}

func TestLogReadOnlyRefusesClientWrites(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.False(t, l.ReadOnly())
		l.SetReadOnly(true)
		require.True(t, l.ReadOnly())

		// Replication appends pass: the mirror writes a read-only partition.
		require.NoError(t, l.Append(dataBatch(t, 0, 0, 3)))
		// A client (data) batch as leader is refused and nothing is appended.
		_, err := l.AppendAsLeader(dataBatch(t, 0, 0, 1))
		require.ErrorIs(t, err, ErrReadOnly)
		require.Equal(t, int64(3), l.LogEndOffset())
		// The library's own control batches pass.
		off, err := l.AppendAsLeader(ctrlBatch(0, 0, -1, -1, records.ControlMirrorPIDReset))
		require.NoError(t, err)
		require.Equal(t, int64(3), off)

		l.SetReadOnly(false)
		off, err = l.AppendAsLeader(dataBatch(t, 0, 0, 2))
		require.NoError(t, err)
		require.Equal(t, int64(4), off)
		require.Equal(t, int64(6), l.LogEndOffset())
	})
}

// TestWriteTxnMarkerOnlyIfWritable: a client transaction's marker
// (OnlyIfWritable) is refused by a read-only log, nothing appended, while the
// library's own marker still passes; once writable it is written.
func TestWriteTxnMarkerOnlyIfWritable(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.NoError(t, l.Append(txnBatch(t, 0, 0, 7, 0, 2)))
		_, err := l.BumpLeaderEpoch(0)
		require.NoError(t, err)
		l.SetReadOnly(true)
		_, err = WriteTxnMarker(l, TxnMarker{ProducerID: 7, Commit: true, OnlyIfWritable: true})
		require.ErrorIs(t, err, ErrReadOnly)
		require.Equal(t, int64(2), l.LogEndOffset())
		require.Len(t, l.OpenTransactions(), 1)
		wa, ok := l.(WritableAppender)
		require.True(t, ok)
		_, err = wa.AppendAsLeaderIfWritable(dataBatch(t, 0, 0, 1))
		require.ErrorIs(t, err, ErrReadOnly)

		l.SetReadOnly(false)
		off, err := WriteTxnMarker(l, TxnMarker{ProducerID: 7, Commit: true, OnlyIfWritable: true})
		require.NoError(t, err)
		require.Equal(t, int64(2), off)
		require.Empty(t, l.OpenTransactions())

		// The library's own marker (STOPPING's aborts) passes a read-only log.
		require.NoError(t, l.Append(txnBatch(t, 3, 0, 8, 0, 1)))
		l.SetReadOnly(true)
		_, err = WriteTxnMarker(l, TxnMarker{ProducerID: 8})
		require.NoError(t, err)
		require.Empty(t, l.OpenTransactions())
	})
}
