package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBatchHeaderFields(t *testing.T) {
	spec := BatchSpec{
		BaseOffset: 1234, PartitionLeaderEpoch: 7, Compression: CompressionLZ4,
		LogAppendTime: true, Transactional: true, ProducerID: 99, ProducerEpoch: 3,
		BaseSequence: 42, BaseTimestamp: 1_700_000_000_000,
	}
	recs := sampleRecords(5)
	buf := mustBuild(t, spec, recs)
	b, err := ParseBatch(buf)
	require.NoError(t, err)
	require.Len(t, b, len(buf))
	require.Equal(t, int64(1234), b.BaseOffset())
	require.Equal(t, int32(len(buf)-12), b.BatchLength())
	require.Equal(t, int32(7), b.PartitionLeaderEpoch())
	require.Equal(t, int8(2), b.Magic())
	require.Equal(t, crc32cRef(buf[21:]), b.CRC())
	a := b.Attributes()
	require.Equal(t, CompressionLZ4, a.Compression())
	require.True(t, a.LogAppendTime())
	require.True(t, a.IsTransactional())
	require.False(t, a.IsControl())
	require.False(t, a.HasDeleteHorizon())
	require.Equal(t, int32(4), b.LastOffsetDelta())
	require.Equal(t, int64(1_700_000_000_000), b.BaseTimestamp())
	require.Equal(t, int64(1_700_000_000_012), b.MaxTimestamp())
	require.Equal(t, int64(99), b.ProducerID())
	require.Equal(t, int16(3), b.ProducerEpoch())
	require.Equal(t, int32(42), b.BaseSequence())
	require.Equal(t, int32(5), b.NumRecords())
	require.Equal(t, int64(1238), b.LastOffset())
	require.Equal(t, int64(1239), b.NextOffset())
	require.NoError(t, b.VerifyCRC())
}

func TestAttributesBits(t *testing.T) {
	a := Attributes(0x7f)
	require.Equal(t, Compression(7), a.Compression())
	require.True(t, a.LogAppendTime() && a.IsTransactional() && a.IsControl() && a.HasDeleteHorizon())
	require.False(t, Attributes(0).HasDeleteHorizon())
	require.Equal(t, "zstd", CompressionZstd.String())
	require.Equal(t, "unknown(7)", Compression(7).String())
}

func TestVerifyCRCDetectsEveryCoveredByte(t *testing.T) {
	buf := mustBuild(t, BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, sampleRecords(3))
	for i := 17; i < len(buf); i++ {
		c := bytes.Clone(buf)
		c[i] ^= 0x01
		err := Batch(c).VerifyCRC()
		require.Error(t, err, "byte %d", i)
		require.ErrorIs(t, err, ErrCorrupt)
		var ce *CorruptError
		require.True(t, errors.As(err, &ce))
		require.Equal(t, int64(0), ce.BaseOffset)
	}
}

func TestRestampTouchesOnlyItsField(t *testing.T) {
	buf := mustBuild(t, BatchSpec{BaseOffset: 10, PartitionLeaderEpoch: 1, Compression: CompressionZstd}, sampleRecords(4))
	orig := bytes.Clone(buf)
	b, err := ParseBatch(buf)
	require.NoError(t, err)
	b.SetBaseOffset(1 << 40)
	b.SetPartitionLeaderEpoch(77)
	require.Equal(t, int64(1<<40), b.BaseOffset())
	require.Equal(t, int32(77), b.PartitionLeaderEpoch())
	require.Equal(t, orig[8:12], []byte(buf[8:12]), "batch length untouched")
	require.Equal(t, orig[16:], []byte(buf[16:]), "everything from magic on untouched")
	require.NoError(t, b.VerifyCRC())
	require.Equal(t, int64(1<<40)+3, b.LastOffset())
}

func TestParseBatchErrors(t *testing.T) {
	good := mustBuild(t, BatchSpec{BaseOffset: 55}, sampleRecords(2))

	_, err := ParseBatch(good[:30])
	require.ErrorIs(t, err, ErrIncomplete)
	require.ErrorIs(t, err, ErrCorrupt)
	var ce *CorruptError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, int64(55), ce.BaseOffset)

	_, err = ParseBatch(good[:5])
	require.ErrorIs(t, err, ErrIncomplete)
	require.True(t, errors.As(err, &ce))
	require.Equal(t, int64(-1), ce.BaseOffset)

	bad := bytes.Clone(good)
	bad[16] = 1
	_, err = ParseBatch(bad)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotErrorIs(t, err, ErrIncomplete)
	require.Contains(t, err.Error(), "magic 1")

	bad = bytes.Clone(good)
	binary.BigEndian.PutUint32(bad[8:], 10)
	_, err = ParseBatch(bad)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "below the minimum")

	// Extra bytes after the batch are not part of it.
	withTail := append(bytes.Clone(good), 1, 2, 3)
	b, err := ParseBatch(withTail)
	require.NoError(t, err)
	require.Len(t, b, len(good))
	require.Equal(t, len(good), cap(b), "capacity clipped so appends cannot clobber the next batch")
}

func concatBatches(t testing.TB, n int) ([]byte, [][]byte) {
	var all []byte
	var each [][]byte
	off := int64(0)
	for i := range n {
		b := mustBuild(t, BatchSpec{BaseOffset: off, PartitionLeaderEpoch: int32(i), Compression: allCodecs[i%len(allCodecs)]}, sampleRecords(i+1))
		each = append(each, b)
		all = append(all, b...)
		off += int64(i + 1)
	}
	return all, each
}

func TestIterator(t *testing.T) {
	all, each := concatBatches(t, 6)
	it := NewIterator(all)
	var got int
	pos := 0
	for it.Next() {
		b := it.Batch()
		require.Equal(t, each[got], []byte(b))
		require.NoError(t, b.VerifyCRC())
		pos += len(b)
		require.Equal(t, pos, it.Pos())
		got++
	}
	require.Equal(t, 6, got)
	require.NoError(t, it.Err())
	require.False(t, it.Partial())
	require.False(t, it.Next(), "stays done")
	require.Nil(t, it.Batch())

	// Every truncation point: whole batches before it come out, the rest is
	// reported as partial, never as an error.
	for cut := 0; cut < len(all); cut++ {
		it.Reset(all[:cut])
		n, end := 0, 0
		for it.Next() {
			end += len(it.Batch())
			n++
		}
		require.NoError(t, it.Err(), "cut %d", cut)
		require.Equal(t, end, it.Pos())
		require.Equal(t, end != cut, it.Partial(), "cut %d", cut)
	}
}

func TestIteratorCorruptHeaderNamesPositionAndOffset(t *testing.T) {
	all, each := concatBatches(t, 3)
	start := len(each[0])
	all[start+16] = 9 // magic of the second batch
	it := NewIterator(all)
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.False(t, it.Partial())
	err := it.Err()
	require.ErrorIs(t, err, ErrCorrupt)
	var ce *CorruptError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, start, ce.Position)
	require.Equal(t, int64(1), ce.BaseOffset)
	require.Contains(t, err.Error(), "at byte")
	require.Equal(t, start, it.Pos())
}

func TestIterateVerifyZeroAllocs(t *testing.T) {
	all, _ := concatBatches(t, 10)
	var it Iterator
	allocs := testing.AllocsPerRun(100, func() {
		it.Reset(all)
		for it.Next() {
			if err := it.Batch().VerifyCRC(); err != nil {
				t.Fatal(err)
			}
		}
	})
	require.Zero(t, allocs)
}
