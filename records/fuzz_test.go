package records

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const fuzzLimit = 1 << 20

func seedBatches(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	for i, c := range allCodecs {
		b, err := BuildBatch(BatchSpec{BaseOffset: int64(i * 10), Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, sampleRecords(i+1))
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	out = append(out,
		BuildControlBatch(ControlBatchSpec{BaseOffset: 3, ProducerID: 7, ProducerEpoch: 1, Type: ControlCommit}),
		BuildControlBatch(ControlBatchSpec{BaseOffset: 4, ProducerID: 7, ProducerEpoch: 1, Type: ControlAbort, CoordinatorEpoch: 2}),
		BuildControlBatch(ControlBatchSpec{BaseOffset: 5, Type: ControlMirrorPIDReset}),
	)
	return out
}

// FuzzIterator walks arbitrary bytes: no panics, batches tile the buffer
// exactly up to Pos, and a clean end means the whole buffer was consumed.
func FuzzIterator(f *testing.F) {
	seeds := seedBatches(f)
	var all []byte
	for _, s := range seeds {
		f.Add(s)
		all = append(all, s...)
	}
	f.Add(all)
	f.Add(all[:len(all)-7])
	f.Add([]byte{})
	f.Add(make([]byte, 70))
	f.Fuzz(func(t *testing.T, buf []byte) {
		it := NewIterator(buf)
		end := 0
		for it.Next() {
			b := it.Batch()
			require.Equal(t, buf[end:end+len(b)], []byte(b))
			end += len(b)
			require.Equal(t, int(b.BatchLength())+12, len(b))
			require.Equal(t, int8(2), b.Magic())
			_ = b.VerifyCRC()
			_ = b.NextOffset()
			pb, err := ParseBatch(buf[end-len(b):])
			require.NoError(t, err)
			require.Equal(t, []byte(b), []byte(pb))
		}
		require.Equal(t, end, it.Pos())
		if it.Err() == nil && !it.Partial() {
			require.Equal(t, len(buf), end)
		}
		if it.Err() != nil {
			require.ErrorIs(t, it.Err(), ErrCorrupt)
			require.False(t, it.Partial())
		}
	})
}

// FuzzRecords decodes an arbitrary record section under every codec
// attribute; whatever decodes must survive an uncompressed re-encode and
// decode unchanged, and, when its offset deltas allow, a BuildBatch with
// the same codec.
func FuzzRecords(f *testing.F) {
	for _, s := range seedBatches(f) {
		b := Batch(s)
		f.Add(int8(b.Attributes().Compression()), b.NumRecords(), []byte(s[HeaderSize:]))
	}
	f.Add(int8(0), int32(0), []byte{})
	f.Add(int8(2), int32(1), []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, codec int8, n int32, payload []byte) {
		hdr := buildBatch(BatchSpec{}, Attributes(codec)&AttrCompressionMask, 0, 0, n, payload)
		recs, err := Batch(hdr).RecordsLimit(fuzzLimit)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Len(t, recs, int(n))
		var raw []byte
		for i := range recs {
			raw = appendRecord(raw, &recs[i])
		}
		again, err := Batch(buildBatch(BatchSpec{}, 0, 0, 0, n, raw)).Records()
		require.NoError(t, err)
		require.Equal(t, recs, again)

		c := Compression(codec) & Compression(AttrCompressionMask)
		if c > CompressionZstd {
			return
		}
		built, err := BuildBatch(BatchSpec{Compression: c}, recs)
		if err != nil {
			return // offset deltas BuildBatch will not write
		}
		again, err = Batch(built).Records()
		require.NoError(t, err)
		require.Equal(t, len(recs), len(again))
		for i := range recs {
			r := recs[i]
			if len(recs) > 1 && allZeroDeltas(recs) {
				r.OffsetDelta = int32(i)
			}
			require.Equal(t, r, again[i])
		}
	})
}

func allZeroDeltas(recs []Record) bool {
	for _, r := range recs {
		if r.OffsetDelta != 0 {
			return false
		}
	}
	return true
}

// FuzzControlType reads the control type of arbitrary batches; the type
// and the end-transaction marker must agree, and a decodable marker must
// rebuild to a batch with the same type and epoch.
func FuzzControlType(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		b, err := ParseBatch(buf)
		if err != nil {
			return
		}
		typ, err := b.ControlType()
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		mt, epoch, err := b.EndTxnMarker()
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, typ, mt)
		rebuilt := Batch(BuildControlBatch(ControlBatchSpec{Type: mt, CoordinatorEpoch: epoch, ProducerID: b.ProducerID()}))
		gt, ge, err := rebuilt.EndTxnMarker()
		require.NoError(t, err)
		require.Equal(t, mt, gt)
		require.Equal(t, epoch, ge)
	})
}

// FuzzDecodeStateRecord: whatever decodes re-encodes to bytes that decode
// to the same record.
func FuzzDecodeStateRecord(f *testing.F) {
	for _, r := range stateRecordCases() {
		k, v := EncodeStateRecord(r)
		f.Add(k, v, v == nil)
	}
	f.Add([]byte{0, 2}, []byte{0, 0}, false)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		r, err := DecodeStateRecord(key, value)
		if err != nil {
			var re *RecordError
			require.ErrorAs(t, err, &re)
			return
		}
		require.NoError(t, r.Validate())
		k2, v2 := EncodeStateRecord(r)
		require.Equal(t, value == nil, v2 == nil)
		r2, err := DecodeStateRecord(k2, v2)
		require.NoError(t, err)
		require.Equal(t, r, r2)
	})
}

// FuzzDecodeControllerRecord: same property for controller records.
func FuzzDecodeControllerRecord(f *testing.F) {
	for _, r := range []ControllerRecord{
		{TopicState: &MirrorTopicStateChangeRecord{TopicID: testTopicID, TopicName: "t", MirrorName: "m", DesiredState: 3}},
		{Mirror: &ClusterMirrorRecord{MirrorName: "m", Configs: []ConfigEntry{{Name: "a", Value: strp("b")}, {Name: "c"}}}},
		{MirrorTombstone: "m"},
	} {
		k, v := EncodeControllerRecord(r)
		f.Add(k, v, v == nil)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		r, err := DecodeControllerRecord(key, value)
		if err != nil {
			var re *RecordError
			require.ErrorAs(t, err, &re)
			return
		}
		require.NoError(t, r.Validate())
		k2, v2 := EncodeControllerRecord(r)
		r2, err := DecodeControllerRecord(k2, v2)
		require.NoError(t, err)
		require.Equal(t, r, r2)
	})
}

// FuzzParseUUID: accepted text is exactly the canonical form.
func FuzzParseUUID(f *testing.F) {
	f.Add("AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("_____________________w")
	f.Add(testTopicID.String())
	f.Add("AAAAAAAAAAAAAAAAAAAAAQ==")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUUID(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadUUID)
			return
		}
		require.Equal(t, s, u.String())
	})
}
