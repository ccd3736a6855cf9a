package fetcher

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// dataBatch builds a non-transactional batch of n records at base.
func dataBatch(t testing.TB, base int64, ep int32, n int) []byte {
	t.Helper()
	return buildBatch(t, records.BatchSpec{BaseOffset: base, PartitionLeaderEpoch: ep, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000 + base}, n, 16)
}

// txnBatch builds a transactional batch of n records of producer pid.
func txnBatch(t testing.TB, base int64, ep int32, pid int64, pepoch int16, n int) []byte {
	t.Helper()
	return buildBatch(t, records.BatchSpec{BaseOffset: base, PartitionLeaderEpoch: ep, Transactional: true, ProducerID: pid, ProducerEpoch: pepoch, BaseSequence: 0, BaseTimestamp: 1_700_000_000_000 + base}, n, 16)
}

func buildBatch(t testing.TB, spec records.BatchSpec, n, valueSize int) []byte {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte(spec.BaseOffset + int64(i))}, valueSize)
		recs[i] = records.Record{Key: fmt.Appendf(nil, "k%d", spec.BaseOffset+int64(i)), Value: v}
	}
	b, err := records.BuildBatch(spec, recs)
	require.NoError(t, err)
	return b
}

func ctrlBatch(base int64, ep int32, pid int64, pepoch int16, typ records.ControlType) []byte {
	return records.BuildControlBatch(records.ControlBatchSpec{BaseOffset: base, PartitionLeaderEpoch: ep, ProducerID: pid, ProducerEpoch: pepoch, Timestamp: 1_700_000_000_000, Type: typ})
}

func ents(pairs ...int64) []epoch.Entry {
	var out []epoch.Entry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, epoch.Entry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// batchesOf splits a Read result into (base offset, leader epoch) pairs and
// checks every batch is whole and CRC-valid.
func batchesOf(t testing.TB, buf []byte) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for pos := 0; pos < len(buf); {
		b, err := records.ParseBatch(buf[pos:])
		require.NoError(t, err)
		require.NoError(t, b.VerifyCRC())
		out = append(out, [2]int64{b.BaseOffset(), int64(b.PartitionLeaderEpoch())})
		pos += len(b)
	}
	return out
}

// impl is one Log implementation under the conformance suite.
type impl struct {
	name string
	open func(t *testing.T) Log
	// reopen simulates a restart: Close+OpenFileLog, Crash for MemoryLog
	// (after a Flush, so nothing is lost).
	reopen func(t *testing.T, l Log) Log
}

func impls() []impl {
	return []impl{
		{
			name: "memory",
			open: func(t *testing.T) Log { return NewMemoryLog(MemoryLogOptions{}) },
			reopen: func(t *testing.T, l Log) Log {
				require.NoError(t, l.Flush())
				l.(*MemoryLog).Crash()
				return l
			},
		},
		{
			name: "file",
			open: func(t *testing.T) Log {
				l, err := OpenFileLog(t.TempDir(), FileLogOptions{SegmentBytes: 1024, IndexIntervalBytes: 200})
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.Close() })
				return l
			},
			reopen: func(t *testing.T, l Log) Log {
				fl := l.(*FileLog)
				require.NoError(t, fl.Close())
				nl, err := OpenFileLog(fl.Dir(), fl.opts)
				require.NoError(t, err)
				t.Cleanup(func() { _ = nl.Close() })
				return nl
			},
		},
	}
}

// forEach runs a conformance case against every implementation, once
// without and once with a reopen at the point the case chooses.
func forEach(t *testing.T, fn func(t *testing.T, l Log, reopen func(Log) Log)) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			fn(t, im.open(t), func(l Log) Log { return l })
		})
		t.Run(im.name+"/reopened", func(t *testing.T) {
			fn(t, im.open(t), func(l Log) Log { return im.reopen(t, l) })
		})
	}
}

func TestLogAppendRead(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.Equal(t, int64(0), l.LogEndOffset())
		got, err := l.Read(0, 1000)
		require.NoError(t, err)
		require.Empty(t, got)
		require.ErrorIs(t, l.Append(nil), ErrInvalidBatch)

		var want [][2]int64
		var all []byte
		half := 0
		for i := int64(0); i < 20; i++ {
			b := dataBatch(t, i*5, 1, 5)
			all = append(all, b...)
			want = append(want, [2]int64{i * 5, 1})
			if i == 9 {
				half = len(all)
			}
		}
		require.NoError(t, l.Append(all[:half]))
		require.NoError(t, l.Append(all[half:]))
		require.Equal(t, int64(100), l.LogEndOffset())
		require.Equal(t, int64(100), l.HighWatermark())
		require.Equal(t, int64(100), l.LastStableOffset())
		l = reopen(l)
		require.Equal(t, int64(0), l.LogStartOffset())
		require.Equal(t, int64(100), l.LogEndOffset())
		require.Equal(t, int64(100), l.HighWatermark())

		// Read from every offset returns the batch containing it first.
		for o := int64(0); o < 100; o++ {
			got, err := l.Read(o, 1)
			require.NoError(t, err)
			require.Equal(t, [][2]int64{{o / 5 * 5, 1}}, batchesOf(t, got), "offset %d", o)
		}
		// maxBytes bounds the result but never below one batch.
		got, err = l.Read(0, 1<<20)
		require.NoError(t, err)
		require.Equal(t, want[:len(batchesOf(t, got))], batchesOf(t, got))
		require.True(t, bytes.HasPrefix(all, got))
		got, err = l.Read(0, len(all[:half])/10*3+2)
		require.NoError(t, err)
		require.Len(t, batchesOf(t, got), 3)

		got, err = l.Read(100, 1000)
		require.NoError(t, err)
		require.Empty(t, got)
		_, err = l.Read(101, 1000)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		_, err = l.Read(-1, 1000)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
	})
}

func TestLogReadAllBytesEqual(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		var all []byte
		for i := int64(0); i < 30; i++ {
			b := dataBatch(t, i*3, int32(i/10), 3)
			require.NoError(t, l.Append(b))
			all = append(all, b...)
		}
		l = reopen(l)
		var got []byte
		for o := int64(0); o < l.LogEndOffset(); {
			chunk, err := l.Read(o, 500)
			require.NoError(t, err)
			require.NotEmpty(t, chunk)
			require.LessOrEqual(t, len(chunk), 500)
			got = append(got, chunk...)
			it := records.NewIterator(chunk)
			for it.Next() {
				o = it.Batch().NextOffset()
			}
			require.NoError(t, it.Err())
		}
		require.Equal(t, all, got)
	})
}

func TestLogGaps(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.NoError(t, l.Append(cat(dataBatch(t, 0, 0, 5), dataBatch(t, 10, 0, 5))))
		require.NoError(t, l.Append(dataBatch(t, 40, 2, 2)))
		l = reopen(l)
		require.Equal(t, int64(42), l.LogEndOffset())
		for o, base := range map[int64]int64{0: 0, 4: 0, 5: 10, 9: 10, 14: 10, 15: 40, 39: 40, 41: 40} {
			got, err := l.Read(o, 1)
			require.NoError(t, err)
			require.Equal(t, base, batchesOf(t, got)[0][0], "offset %d", o)
		}
		require.Equal(t, ents(0, 0, 2, 40), l.Epochs().Entries())
	})
}

func TestLogRegressionRefused(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.NoError(t, l.Append(dataBatch(t, 0, 0, 5)))
		l = reopen(l)
		for _, in := range [][]byte{
			dataBatch(t, 0, 0, 5),                              // same offsets again
			dataBatch(t, 4, 0, 5),                              // overlap
			cat(dataBatch(t, 5, 0, 5), dataBatch(t, 9, 0, 1)),  // overlap inside one call
			cat(dataBatch(t, 10, 0, 5), dataBatch(t, 5, 0, 1)), // regression inside one call
		} {
			err := l.Append(in)
			require.ErrorIs(t, err, ErrOffsetRegression)
			var re *RegressionError
			require.True(t, errors.As(err, &re))
			require.Equal(t, int64(5), l.LogEndOffset(), "nothing appended")
		}
		got, err := l.Read(0, 1<<20)
		require.NoError(t, err)
		require.Equal(t, dataBatch(t, 0, 0, 5), got)
	})
}

func TestLogInvalidInputRefused(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		good := dataBatch(t, 0, 0, 3)
		bad := bytes.Clone(good)
		bad[len(bad)-1] ^= 0xff
		for name, in := range map[string][]byte{
			"garbage":  []byte("not a batch at all, clearly not one"),
			"crc":      bad,
			"half":     good[:len(good)/2],
			"trailing": cat(good, good[:20]),
			"good+bad": cat(dataBatch(t, 0, 0, 3), dataBatch(t, 3, 0, 1)[:70]),
			"magic":    append(append(bytes.Clone(good[:16]), 1), good[17:]...),
		} {
			err := l.Append(in)
			require.ErrorIs(t, err, ErrInvalidBatch, name)
			require.Equal(t, int64(0), l.LogEndOffset(), name)
		}
		require.ErrorIs(t, l.Append(bad), records.ErrCorrupt)
		l = reopen(l)
		require.Equal(t, int64(0), l.LogEndOffset())
	})
}

func TestLogTruncate(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		for i := int64(0); i < 6; i++ {
			require.NoError(t, l.Append(dataBatch(t, i*5, int32(1+i/2), 5)))
		}
		// epochs 1@0, 2@10, 3@20; LEO 30
		require.Equal(t, ents(1, 0, 2, 10, 3, 20), l.Epochs().Entries())
		require.NoError(t, l.Truncate(30)) // no-op at LEO
		require.NoError(t, l.Truncate(99)) // no-op beyond
		require.Equal(t, int64(30), l.LogEndOffset())

		require.NoError(t, l.Truncate(20))
		require.Equal(t, int64(20), l.LogEndOffset())
		require.Equal(t, int64(20), l.HighWatermark())
		require.Equal(t, ents(1, 0, 2, 10), l.Epochs().Entries())
		l = reopen(l)
		require.Equal(t, int64(20), l.LogEndOffset())
		require.Equal(t, ents(1, 0, 2, 10), l.Epochs().Entries())

		// A batch straddling the offset is kept whole.
		require.NoError(t, l.Truncate(12))
		require.Equal(t, int64(15), l.LogEndOffset())
		e, end := l.EndOffsetForEpoch(2)
		require.Equal(t, int32(2), e)
		require.Equal(t, int64(15), end)

		require.NoError(t, l.Truncate(10))
		require.Equal(t, int64(10), l.LogEndOffset())
		require.Equal(t, ents(1, 0), l.Epochs().Entries())
		got, err := l.Read(10, 1000)
		require.NoError(t, err)
		require.Empty(t, got)
		_, err = l.Read(11, 1000)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)

		// Appending continues; a new epoch at the same offset.
		require.NoError(t, l.Append(dataBatch(t, 10, 7, 5)))
		require.Equal(t, ents(1, 0, 7, 10), l.Epochs().Entries())
		l = reopen(l)
		require.Equal(t, ents(1, 0, 7, 10), l.Epochs().Entries())
		got, err = l.Read(10, 1)
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{10, 7}}, batchesOf(t, got))
		require.ErrorIs(t, l.Truncate(-1), ErrOffsetOutOfRange)
	})
}

func TestLogTruncateIntoGap(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.NoError(t, l.Append(dataBatch(t, 0, 0, 5)))
		require.NoError(t, l.Append(dataBatch(t, 20, 1, 5)))
		require.NoError(t, l.Truncate(12))
		require.Equal(t, int64(12), l.LogEndOffset())
		l = reopen(l)
		require.Equal(t, int64(12), l.LogEndOffset())
		require.Equal(t, ents(0, 0), l.Epochs().Entries())
		require.ErrorIs(t, l.Append(dataBatch(t, 11, 1, 1)), ErrOffsetRegression)
		require.NoError(t, l.Append(dataBatch(t, 12, 1, 1)))
		got, err := l.Read(5, 1000)
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{12, 1}}, batchesOf(t, got))
	})
}

func TestLogTruncateFully(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.NoError(t, l.Append(cat(dataBatch(t, 0, 3, 5), txnBatch(t, 5, 3, 9, 0, 2))))
		require.NotEmpty(t, l.OpenTransactions())
		require.NoError(t, l.TruncateFullyAndStartAt(100))
		check := func(l Log) {
			require.Equal(t, int64(100), l.LogStartOffset())
			require.Equal(t, int64(100), l.LogEndOffset())
			require.Equal(t, int64(100), l.HighWatermark())
			require.Equal(t, int64(100), l.LastStableOffset())
			require.Empty(t, l.OpenTransactions())
			require.Equal(t, int32(-1), l.LatestEpoch())
			_, err := l.Read(50, 1000)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
		}
		check(l)
		l = reopen(l)
		check(l)
		require.ErrorIs(t, l.Append(dataBatch(t, 99, 3, 1)), ErrOffsetRegression)
		require.NoError(t, l.Append(dataBatch(t, 100, 4, 2)))
		require.Equal(t, ents(4, 100), l.Epochs().Entries())

		// Truncating at or below the log start empties the log too, and may
		// move the start down (restart at the source's log start).
		require.NoError(t, l.Truncate(40))
		require.Equal(t, int64(40), l.LogStartOffset())
		require.Equal(t, int64(40), l.LogEndOffset())
		l = reopen(l)
		require.Equal(t, int64(40), l.LogStartOffset())
		require.Equal(t, int64(40), l.LogEndOffset())
		require.ErrorIs(t, l.TruncateFullyAndStartAt(-5), ErrOffsetOutOfRange)
	})
}

func TestLogEpochCache(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.Equal(t, int32(-1), l.LatestEpoch())
		require.NoError(t, l.Append(cat(dataBatch(t, 0, 0, 2), dataBatch(t, 2, 0, 2), dataBatch(t, 4, 3, 2))))
		require.NoError(t, l.Append(dataBatch(t, 6, -1, 2))) // no epoch: not assigned
		require.NoError(t, l.Append(dataBatch(t, 8, 5, 2)))
		l = reopen(l)
		require.Equal(t, int32(5), l.LatestEpoch())
		require.Equal(t, ents(0, 0, 3, 4, 5, 8), l.Epochs().Entries())
		e, end := l.EndOffsetForEpoch(5)
		require.Equal(t, int32(5), e)
		require.Equal(t, int64(10), end)
		e, end = l.EndOffsetForEpoch(4)
		require.Equal(t, int32(3), e)
		require.Equal(t, int64(8), end)
		e, end = l.EndOffsetForEpoch(0)
		require.Equal(t, int32(0), e)
		require.Equal(t, int64(4), end)

		// Epochs is a clone.
		c := l.Epochs()
		c.TruncateFromEnd(0)
		require.Equal(t, 3, l.Epochs().Len())
	})
}

func TestLogTransactions(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.NoError(t, l.Append(dataBatch(t, 0, 0, 5)))
		require.NoError(t, l.Append(txnBatch(t, 5, 0, 7, 1, 5)))  // pid 7 opens at 5
		require.NoError(t, l.Append(txnBatch(t, 10, 0, 8, 0, 5))) // pid 8 opens at 10
		require.NoError(t, l.Append(txnBatch(t, 15, 0, 7, 1, 5))) // pid 7 continues
		require.Equal(t, int64(5), l.LastStableOffset())
		require.Equal(t, []OpenTxn{{ProducerID: 7, ProducerEpoch: 1, FirstOffset: 5}, {ProducerID: 8, ProducerEpoch: 0, FirstOffset: 10}}, l.OpenTransactions())
		l = reopen(l)
		require.Equal(t, int64(5), l.LastStableOffset())
		require.Equal(t, []OpenTxn{{ProducerID: 7, ProducerEpoch: 1, FirstOffset: 5}, {ProducerID: 8, ProducerEpoch: 0, FirstOffset: 10}}, l.OpenTransactions())

		require.NoError(t, l.Append(ctrlBatch(20, 0, 7, 1, records.ControlCommit)))
		require.Equal(t, int64(10), l.LastStableOffset())
		require.Equal(t, []OpenTxn{{ProducerID: 8, ProducerEpoch: 0, FirstOffset: 10}}, l.OpenTransactions())
		require.NoError(t, l.Append(ctrlBatch(21, 0, 8, 0, records.ControlAbort)))
		require.Equal(t, int64(22), l.LastStableOffset())
		require.Equal(t, l.HighWatermark(), l.LastStableOffset())
		require.Empty(t, l.OpenTransactions())
		l = reopen(l)
		require.Empty(t, l.OpenTransactions())
		require.Equal(t, int64(22), l.LastStableOffset())

		// Truncating away the markers reopens the transactions.
		require.NoError(t, l.Truncate(21))
		require.Equal(t, []OpenTxn{{ProducerID: 8, ProducerEpoch: 0, FirstOffset: 10}}, l.OpenTransactions())
		require.NoError(t, l.Truncate(20))
		require.Equal(t, []OpenTxn{{ProducerID: 7, ProducerEpoch: 1, FirstOffset: 5}, {ProducerID: 8, ProducerEpoch: 0, FirstOffset: 10}}, l.OpenTransactions())
		require.Equal(t, int64(5), l.LastStableOffset())
		l = reopen(l)
		require.Equal(t, []OpenTxn{{ProducerID: 7, ProducerEpoch: 1, FirstOffset: 5}, {ProducerID: 8, ProducerEpoch: 0, FirstOffset: 10}}, l.OpenTransactions())

		// MIRROR_PID_RESET expires every producer entry before it.
		require.NoError(t, l.Append(ctrlBatch(20, 0, -1, -1, records.ControlMirrorPIDReset)))
		require.Empty(t, l.OpenTransactions())
		require.Equal(t, int64(21), l.LastStableOffset())
		l = reopen(l)
		require.Empty(t, l.OpenTransactions())

		// A new transaction after the barrier.
		require.NoError(t, l.Append(txnBatch(t, 21, 0, 7, 2, 1)))
		require.Equal(t, []OpenTxn{{ProducerID: 7, ProducerEpoch: 2, FirstOffset: 21}}, l.OpenTransactions())
	})
}

func TestLogAppendAsLeader(t *testing.T) {
	forEach(t, func(t *testing.T, l Log, reopen func(Log) Log) {
		require.Equal(t, int32(-1), l.LeaderEpoch())
		e, err := l.BumpLeaderEpoch(-1)
		require.NoError(t, err)
		require.Equal(t, int32(0), e)
		e, err = l.BumpLeaderEpoch(8)
		require.NoError(t, err)
		require.Equal(t, int32(9), e)
		e, err = l.BumpLeaderEpoch(2) // min below current: +1
		require.NoError(t, err)
		require.Equal(t, int32(10), e)
		l = reopen(l)
		require.Equal(t, int32(10), l.LeaderEpoch(), "leader epoch is durable")

		require.NoError(t, l.Append(txnBatch(t, 0, 4, 7, 0, 5)))
		abort := ctrlBatch(999, 0, 7, 0, records.ControlAbort)
		orig := bytes.Clone(abort)
		base, err := l.AppendAsLeader(abort)
		require.NoError(t, err)
		require.Equal(t, int64(5), base)
		require.Equal(t, orig, abort, "argument not modified")
		require.Empty(t, l.OpenTransactions())
		base, err = l.AppendAsLeader(ctrlBatch(0, 0, -1, -1, records.ControlMirrorPIDReset))
		require.NoError(t, err)
		require.Equal(t, int64(6), base)
		require.Equal(t, int64(7), l.LogEndOffset())
		require.Equal(t, ents(4, 0, 10, 5), l.Epochs().Entries())
		l = reopen(l)
		got, err := l.Read(5, 1<<20)
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{5, 10}, {6, 10}}, batchesOf(t, got))
		b, err := records.ParseBatch(got)
		require.NoError(t, err)
		ct, err := b.ControlType()
		require.NoError(t, err)
		require.Equal(t, records.ControlAbort, ct)

		_, err = l.AppendAsLeader(cat(abort, abort))
		require.ErrorIs(t, err, ErrInvalidBatch)
		_, err = l.AppendAsLeader([]byte("junk"))
		require.ErrorIs(t, err, ErrInvalidBatch)
		require.Equal(t, int64(7), l.LogEndOffset())
	})
}

func TestLogClosed(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			l := im.open(t)
			require.NoError(t, l.Close())
			require.ErrorIs(t, l.Close(), ErrClosed)
			require.ErrorIs(t, l.Append(dataBatch(t, 0, 0, 1)), ErrClosed)
			_, err := l.AppendAsLeader(dataBatch(t, 0, 0, 1))
			require.ErrorIs(t, err, ErrClosed)
			require.ErrorIs(t, l.Truncate(0), ErrClosed)
			require.ErrorIs(t, l.TruncateFullyAndStartAt(0), ErrClosed)
			_, err = l.Read(0, 1)
			require.ErrorIs(t, err, ErrClosed)
			_, err = l.BumpLeaderEpoch(1)
			require.ErrorIs(t, err, ErrClosed)
			require.ErrorIs(t, l.Flush(), ErrClosed)
		})
	}
}
