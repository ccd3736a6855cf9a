package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/stretchr/testify/require"
)

func TestRecordsRoundTripAllCodecs(t *testing.T) {
	recs := sampleRecords(50)
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			buf := mustBuild(t, BatchSpec{BaseOffset: 3, Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
			b, err := ParseBatch(buf)
			require.NoError(t, err)
			require.Equal(t, c, b.Attributes().Compression())
			got, err := b.Records()
			require.NoError(t, err)
			require.Equal(t, recs, got)
		})
	}
}

func TestBuildBatchOffsetDeltas(t *testing.T) {
	// All zero: assigned 0..n-1.
	buf := mustBuild(t, BatchSpec{}, []Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
	got, err := Batch(buf).Records()
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1, 2}, []int32{got[0].OffsetDelta, got[1].OffsetDelta, got[2].OffsetDelta})
	require.Equal(t, int32(2), Batch(buf).LastOffsetDelta())

	// Given gaps (a compacted batch) are kept.
	buf = mustBuild(t, BatchSpec{}, []Record{{OffsetDelta: 0}, {OffsetDelta: 5}, {OffsetDelta: 9}})
	require.Equal(t, int32(9), Batch(buf).LastOffsetDelta())
	require.Equal(t, int32(3), Batch(buf).NumRecords())

	_, err = BuildBatch(BatchSpec{}, []Record{{OffsetDelta: 2}, {OffsetDelta: 1}})
	require.Error(t, err)

	// Empty batch: legal (the cleaner keeps them for producer state).
	buf = mustBuild(t, BatchSpec{BaseOffset: 8}, nil)
	require.Len(t, buf, HeaderSize)
	got, err = Batch(buf).Records()
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = BuildBatch(BatchSpec{Compression: 6}, nil)
	require.Error(t, err)
}

func TestSnappyRawAndXerial(t *testing.T) {
	recs := sampleRecords(20)
	var raw []byte
	for i := range recs {
		raw = appendRecord(raw, &recs[i])
	}
	hdr := func(payload []byte) []byte {
		spec := BatchSpec{}
		return buildBatch(spec, Attributes(CompressionSnappy), 19, 0, int32(len(recs)), payload)
	}
	// Raw snappy, as franz-go and librdkafka write it.
	got, err := Batch(hdr(snappy.Encode(nil, raw))).Records()
	require.NoError(t, err)
	require.Equal(t, recs, got)

	// xerial framing with small chunks, as Java writes it.
	x := append([]byte(nil), xerialMagic...)
	x = binary.BigEndian.AppendUint32(x, 1)
	x = binary.BigEndian.AppendUint32(x, 1)
	for rest := raw; len(rest) > 0; {
		n := min(len(rest), 100)
		enc := snappy.Encode(nil, rest[:n])
		x = binary.BigEndian.AppendUint32(x, uint32(len(enc)))
		x = append(x, enc...)
		rest = rest[n:]
	}
	got, err = Batch(hdr(x)).Records()
	require.NoError(t, err)
	require.Equal(t, recs, got)

	// Truncated xerial chunk.
	_, err = Batch(hdr(x[:len(x)-3])).Records()
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestDecompressionBombRefused(t *testing.T) {
	big := bytes.Repeat([]byte{'z'}, 4<<20)
	rec := []Record{{Value: big}}
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			buf := mustBuild(t, BatchSpec{Compression: c}, rec)
			require.Less(t, len(buf), 1<<20, "compresses well")
			_, err := Batch(buf).RecordsLimit(1 << 20)
			require.ErrorIs(t, err, ErrTooLarge)
			require.ErrorIs(t, err, ErrCorrupt)
			got, err := Batch(buf).RecordsLimit(8 << 20)
			require.NoError(t, err)
			require.Equal(t, big, got[0].Value)
		})
	}
}

func TestRecordsCorruption(t *testing.T) {
	good := mustBuild(t, BatchSpec{BaseOffset: 77}, sampleRecords(3))
	cases := map[string]func(b []byte){
		"negative count": func(b []byte) { binary.BigEndian.PutUint32(b[57:], 0xffffffff) },
		"count too high": func(b []byte) { binary.BigEndian.PutUint32(b[57:], 4) },
		"count too low":  func(b []byte) { binary.BigEndian.PutUint32(b[57:], 2) },
		"huge count":     func(b []byte) { binary.BigEndian.PutUint32(b[57:], 1<<30) },
		"bad codec":      func(b []byte) { b[22] |= 5 },
		"record length":  func(b []byte) { b[61] = 0x7e },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			b := bytes.Clone(good)
			mutate(b)
			_, err := Batch(b).Records()
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, int64(77), ce.BaseOffset)
		})
	}
	// Garbage in each codec is an error, not a panic.
	for _, c := range allCodecs[1:] {
		b := buildBatch(BatchSpec{}, Attributes(c), 0, 0, 1, []byte("definitely not compressed data"))
		_, err := Batch(b).Records()
		require.ErrorIs(t, err, ErrCorrupt, c.String())
	}
}

func TestCodecsStartNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, c := range allCodecs {
		buf := mustBuild(t, BatchSpec{Compression: c}, sampleRecords(10))
		_, err := Batch(buf).Records()
		require.NoError(t, err)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}
