package compacted

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

func dataBatch(t *testing.T, first int64, pid int64, txn bool, keys ...string) []byte {
	t.Helper()
	var rs []records.Record
	for _, k := range keys {
		rs = append(rs, records.Record{Key: []byte(k), Value: []byte("v" + k)})
	}
	spec := records.BatchSpec{BaseOffset: first, ProducerID: pid, Transactional: txn}
	if pid < 0 {
		spec.ProducerEpoch, spec.BaseSequence = -1, -1
	}
	b, err := records.BuildBatch(spec, rs)
	require.NoError(t, err)
	return b
}

func marker(offset, pid int64, typ records.ControlType) []byte {
	return records.BuildControlBatch(records.ControlBatchSpec{BaseOffset: offset, ProducerID: pid, Type: typ})
}

func collect(t *testing.T, f fetched, from, end int64) (passed, []replayed, error) {
	t.Helper()
	var got []replayed
	p, err := replayBatches(f, from, end, func(off int64, k, v []byte) error {
		got = append(got, replayed{Offset: off, Key: string(k), Value: string(v)})
		return nil
	})
	return p, got, err
}

// TestReplayBatches is the read_committed decision on one fetch response.
func TestReplayBatches(t *testing.T) {
	f := fetched{
		Aborted: []abortedTxn{{ProducerID: 8, FirstOffset: 3}},
		Batches: slices.Concat(
			dataBatch(t, 0, 7, true, "a", "b"),  // committed; "a" is below from
			marker(2, 7, records.ControlCommit), // COMMIT
			dataBatch(t, 3, 8, true, "x"),       // aborted
			marker(4, 8, records.ControlAbort),  // ABORT ends it
			dataBatch(t, 5, 9, false, "c"),      // not transactional
			dataBatch(t, 6, 8, true, "d"),       // a new transaction of producer 8: committed
			dataBatch(t, 7, 9, false, "late"),   // at end: not replayed
		),
	}
	p, got, err := collect(t, f, 1, 7)
	require.NoError(t, err)
	require.Equal(t, passed{Next: 7}, p)
	require.Equal(t, []replayed{{1, "b", "vb", false}, {5, "c", "vc", false}, {6, "d", "vd", false}}, got)

	// An aborted transaction spanning two fetches: the second response lists it again
	// (its last offset is past the fetch offset), so its rest is skipped as well.
	f2 := fetched{
		Aborted: []abortedTxn{{ProducerID: 8, FirstOffset: 3}},
		Batches: slices.Concat(dataBatch(t, 10, 8, true, "y"), marker(11, 8, records.ControlAbort), dataBatch(t, 12, 9, false, "e")),
	}
	p, got, err = collect(t, f2, 10, 20)
	require.NoError(t, err)
	require.Equal(t, int64(13), p.Next)
	require.Equal(t, []replayed{{12, "e", "ve", false}}, got)

	// Batches without records (a data batch and a control batch the cleaner emptied)
	// move the offset past their last offset.
	empty := dataBatch(t, 20, 9, true)
	emptyCtl, err := records.BuildBatch(records.BatchSpec{BaseOffset: 21, ProducerID: 9, Transactional: true, Control: true}, nil)
	require.NoError(t, err)
	p, got, err = collect(t, fetched{Batches: slices.Concat(empty, emptyCtl)}, 20, 30)
	require.NoError(t, err)
	require.Equal(t, passed{Next: 22}, p)
	require.Empty(t, got)
}

// TestReplayBatchesTruncated: a trailing incomplete batch stops the walk and is
// reported with its declared size and a typed error; the whole batches before it count.
func TestReplayBatchesTruncated(t *testing.T) {
	whole := dataBatch(t, 20, -1, false, "z")
	next := dataBatch(t, 21, -1, false, "w")
	p, got, err := collect(t, fetched{Batches: slices.Concat(whole, next[:len(next)-3])}, 20, 30)
	require.NoError(t, err)
	require.Equal(t, int64(21), p.Next)
	require.Equal(t, len(next), p.Incomplete)
	require.ErrorIs(t, p.Truncated, records.ErrIncomplete)
	require.Equal(t, []replayed{{20, "z", "vz", false}}, got)

	p, got, err = collect(t, fetched{Batches: next[:5]}, 21, 30)
	require.NoError(t, err)
	require.Equal(t, int64(21), p.Next)
	require.Equal(t, records.HeaderSize, p.Incomplete, "too short to read the length")
	require.ErrorIs(t, p.Truncated, records.ErrIncomplete)
	require.Empty(t, got)
}

// TestReplayBatchesCorrupt: a corrupt batch is a typed error naming its offset, never
// skipped: a flipped byte (CRC), a bad magic (a legacy message set), a bad length, and
// undecodable records behind a valid CRC.
func TestReplayBatchesCorrupt(t *testing.T) {
	good := dataBatch(t, 0, -1, false, "a")
	flip := slices.Clone(good)
	flip[len(flip)-1] ^= 0xff
	magic := slices.Clone(good)
	magic[16] = 1
	length := slices.Clone(good)
	length[8], length[9], length[10], length[11] = 0, 0, 0, 3
	for name, b := range map[string][]byte{"crc": flip, "magic": magic, "length": length} {
		_, got, err := collect(t, fetched{Batches: slices.Concat(good, b)}, 0, 10)
		require.ErrorIs(t, err, ErrReplay, name)
		require.ErrorIs(t, err, records.ErrCorrupt, name)
		var ce *records.CorruptError
		require.True(t, errors.As(err, &ce), name)
		require.Len(t, got, 1, "%s: the whole batch before it is replayed", name)
	}
	// A record count the bytes cannot hold, with a CRC that matches.
	bad := slices.Clone(good)
	bad[60] = 9 // numRecords low byte
	records.Batch(bad).SetBaseOffset(0)
	crc := records.Batch(bad).ComputeCRC()
	bad[17], bad[18], bad[19], bad[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	_, _, err := collect(t, fetched{Batches: bad}, 0, 10)
	require.ErrorIs(t, err, ErrReplay)
	require.ErrorIs(t, err, records.ErrCorrupt)
}

// TestReplayBatchesCompressed: the records of compressed batches are replayed with
// their offsets, whatever the codec.
func TestReplayBatchesCompressed(t *testing.T) {
	for _, c := range []records.Compression{records.CompressionGzip, records.CompressionSnappy, records.CompressionLZ4, records.CompressionZstd} {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: 5, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Compression: c},
			[]records.Record{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("t")}})
		require.NoError(t, err)
		p, got, err := collect(t, fetched{Batches: b}, 5, 10)
		require.NoError(t, err, c.String())
		require.Equal(t, int64(7), p.Next, c.String())
		require.Equal(t, []replayed{{5, "k", "v", false}, {6, "t", "", false}}, got, c.String())
	}
}
