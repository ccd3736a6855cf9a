package fetcher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

func idemBatch(t testing.TB, base int64, pid int64, pepoch int16, seq int32, n int) []byte {
	t.Helper()
	return buildBatch(t, records.BatchSpec{BaseOffset: base, ProducerID: pid, ProducerEpoch: pepoch, BaseSequence: seq, BaseTimestamp: 1_700_000_000_000 + base}, n, 8)
}

// TestLogProducerState: the log keeps each producer's epoch and last five
// batches through Append and AppendAsLeader, across a reopen (rebuilt by
// OpenFileLog's scan), rebuilt by Truncate, expired by MIRROR_PID_RESET and
// emptied by TruncateFullyAndStartAt.
func TestLogProducerState(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		_, err := l.BumpLeaderEpoch(-1)
		require.NoError(t, err)
		// Producer 5: seven batches of 2 (offsets 0-13), replicated; the last
		// five are kept. Producer 6 through AppendAsLeader, then a new epoch.
		for i := int64(0); i < 7; i++ {
			require.NoError(t, l.Append(idemBatch(t, 2*i, 5, 1, int32(2*i), 2)))
		}
		off, err := l.AppendAsLeader(idemBatch(t, 0, 6, 0, 0, 3))
		require.NoError(t, err)
		require.Equal(t, int64(14), off)
		_, err = l.AppendAsLeader(idemBatch(t, 0, 6, 1, 0, 1)) // offset 17, epoch 1
		require.NoError(t, err)
		require.NoError(t, l.Append(dataBatch(t, 18, 0, 1))) // no producer
		l = reopen(l)
		r := l.(ProducerStateReader)
		p5, ok := r.ProducerState(5)
		require.True(t, ok)
		require.Equal(t, int16(1), p5.Epoch)
		require.Len(t, p5.Batches, ProducerBatchesRetained)
		require.Equal(t, ProducerBatch{FirstSeq: 4, LastSeq: 5, BaseOffset: 4}, p5.Batches[0])
		require.Equal(t, int32(13), p5.LastSeq())
		p6, ok := r.ProducerState(6)
		require.True(t, ok)
		require.Equal(t, ProducerState{Epoch: 1, Batches: []ProducerBatch{{FirstSeq: 0, LastSeq: 0, BaseOffset: 17}}, LastTimestamp: 1_700_000_000_000}, p6)
		_, ok = r.ProducerState(-1)
		require.False(t, ok)

		// Truncate rebuilds from the kept batches.
		require.NoError(t, l.Truncate(10))
		r = l.(ProducerStateReader)
		p5, _ = r.ProducerState(5)
		require.Equal(t, int32(9), p5.LastSeq())
		require.Len(t, p5.Batches, 5)
		_, ok = r.ProducerState(6)
		require.False(t, ok, "producer 6 was truncated away")

		// The barrier expires every producer before it, also after a reopen.
		_, err = l.AppendAsLeader(ctrlBatch(0, 0, -1, -1, records.ControlMirrorPIDReset))
		require.NoError(t, err)
		_, err = l.AppendAsLeader(idemBatch(t, 0, 7, 0, 0, 1))
		require.NoError(t, err)
		l = reopen(l)
		r = l.(ProducerStateReader)
		_, ok = r.ProducerState(5)
		require.False(t, ok)
		_, ok = r.ProducerState(7)
		require.True(t, ok)

		require.NoError(t, l.TruncateFullyAndStartAt(100))
		_, ok = l.(ProducerStateReader).ProducerState(7)
		require.False(t, ok)
	})
}

// TestProducerStatesSequenceWrap: sequences wrap from MaxInt32 to 0.
func TestProducerStatesSequenceWrap(t *testing.T) {
	var p ProducerStates
	p.ApplyBatch(idemBatch(t, 0, 1, 0, 2147483646, 3))
	s, ok := p.Get(1)
	require.True(t, ok)
	require.Equal(t, int32(0), s.LastSeq())
}

// TestProducerStatesExpire: once the count reaches the sweep size, producers
// whose last batch is older than ProducerExpiration are forgotten, except
// those with an open transaction; recent ones stay.
func TestProducerStatesExpire(t *testing.T) {
	var p ProducerStates
	now := time.Now().UnixMilli()
	old := now - ProducerExpiration.Milliseconds() - 1000
	apply := func(pid int64, ts int64, txn bool) {
		p.apply(pid, 0, 0, 0, pid, ts, txn, false, 0)
	}
	apply(1, old, true)  // open transaction: kept
	apply(2, now, false) // recent: kept
	for pid := int64(10); pid < 10+minSweep-3; pid++ {
		apply(pid, old, false)
	}
	require.Len(t, p.m, minSweep-1, "no sweep below the sweep size")
	apply(5000, now, false) // the minSweep-th producer: sweep
	require.Len(t, p.m, 3)
	for _, pid := range []int64{1, 2, 5000} {
		_, ok := p.Get(pid)
		require.True(t, ok, "producer %d", pid)
	}
	// The transaction's marker ends it: the next sweep may drop it.
	p.apply(1, 0, -1, 0, 6000, now, true, true, records.ControlCommit)
	require.False(t, p.m[1].inTxn)
}

// BenchmarkAppendProducerState: the cost of keeping producer state on
// append, idempotent batches (tracked) against batches without a producer.
func BenchmarkAppendProducerState(b *testing.B) {
	for _, idem := range []bool{false, true} {
		b.Run(map[bool]string{false: "no-producer", true: "idempotent"}[idem], func(b *testing.B) {
			l := NewMemoryLog(MemoryLogOptions{})
			batches := make([][]byte, 1024)
			for i := range batches {
				spec := records.BatchSpec{BaseOffset: int64(i), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
				if idem {
					spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = int64(i%8), 0, int32(i/8)
				}
				bt, err := records.BuildBatch(spec, []records.Record{{Value: []byte("v")}})
				require.NoError(b, err)
				batches[i] = bt
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := i % len(batches)
				if j == 0 && i > 0 {
					b.StopTimer()
					require.NoError(b, l.TruncateFullyAndStartAt(0))
					b.StartTimer()
				}
				if err := l.Append(batches[j]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
