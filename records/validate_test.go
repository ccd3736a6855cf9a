package records

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func clientBatch(t testing.TB, spec BatchSpec, recs ...Record) Batch {
	t.Helper()
	if spec.ProducerID == 0 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = -1, -1, -1
	}
	b, err := BuildBatch(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return Batch(b)
}

func rules() ClientRules {
	return ClientRules{NowMs: 10_000, BeforeMaxMs: NoTimestampBound, AfterMaxMs: NoTimestampBound, DecodeLimit: 1 << 20}
}

// TestValidateClientBatchKinds: each refusal matches its sentinel.
func TestValidateClientBatchKinds(t *testing.T) {
	two := []Record{{Value: []byte("a")}, {Value: []byte("b")}}
	recrc := func(b Batch) Batch { binary.BigEndian.PutUint32(b[offCRC:], b.ComputeCRC()); return b }
	for name, c := range map[string]struct {
		b    Batch
		r    func(*ClientRules)
		kind error
	}{
		"ok":          {clientBatch(t, BatchSpec{BaseTimestamp: 9000}, two...), nil, nil},
		"crc":         {func() Batch { b := clientBatch(t, BatchSpec{}, two...); b[len(b)-1] ^= 1; return b }(), nil, ErrCorrupt},
		"base offset": {clientBatch(t, BatchSpec{BaseOffset: 3}, two...), nil, ErrInvalidRecord},
		"control":     {Batch(BuildControlBatch(ControlBatchSpec{ProducerID: 1, Type: ControlAbort})), nil, ErrInvalidRecord},
		"count": {func() Batch {
			b := clientBatch(t, BatchSpec{}, two...)
			binary.BigEndian.PutUint32(b[offNumRecords:], 3)
			return recrc(b)
		}(), nil, ErrInvalidRecord},
		"codec 6":      {func() Batch { b := clientBatch(t, BatchSpec{}, two...); b[offAttributes+1] |= 6; return recrc(b) }(), nil, ErrUnsupportedCompression},
		"client LAT":   {clientBatch(t, BatchSpec{LogAppendTime: true}, two...), nil, ErrInvalidTimestamp},
		"too old":      {clientBatch(t, BatchSpec{BaseTimestamp: 1}, two...), func(r *ClientRules) { r.BeforeMaxMs = 100 }, ErrInvalidTimestamp},
		"too new":      {clientBatch(t, BatchSpec{BaseTimestamp: 20_000}, two...), func(r *ClientRules) { r.AfterMaxMs = 100 }, ErrInvalidTimestamp},
		"no ts":        {clientBatch(t, BatchSpec{BaseTimestamp: -1}, two[0]), func(r *ClientRules) { r.BeforeMaxMs, r.AfterMaxMs = 0, 0 }, nil},
		"ts overflow":  {clientBatch(t, BatchSpec{BaseTimestamp: math.MaxInt64}, Record{TimestampDelta: 5}), nil, ErrInvalidTimestamp},
		"min ts":       {clientBatch(t, BatchSpec{BaseTimestamp: math.MinInt64}, two[0]), func(r *ClientRules) { r.BeforeMaxMs = math.MaxInt64 - 1 }, ErrInvalidTimestamp},
		"keyless":      {clientBatch(t, BatchSpec{}, two...), func(r *ClientRules) { r.Compacted = true }, ErrInvalidRecord},
		"bomb":         {clientBatch(t, BatchSpec{Compression: CompressionGzip}, Record{Value: make([]byte, 2<<20)}), nil, ErrDecodeLimit},
		"bad gzip":     {func() Batch { b := clientBatch(t, BatchSpec{}, two...); b[offAttributes+1] |= 1; return recrc(b) }(), nil, ErrInvalidRecord},
		"txn, no pid":  {clientBatch(t, BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Transactional: true}, two...), nil, ErrInvalidRecord},
		"pid, no seq":  {clientBatch(t, BatchSpec{ProducerID: 4, ProducerEpoch: 0, BaseSequence: -1}, two...), nil, ErrInvalidRecord},
		"gap in delta": {clientBatch(t, BatchSpec{}, Record{OffsetDelta: 1}, Record{OffsetDelta: 2}), nil, ErrInvalidRecord},
	} {
		r := rules()
		if c.r != nil {
			c.r(&r)
		}
		_, err := ValidateClientBatch(c.b, r)
		if c.kind == nil {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.Is(err, c.kind) || !errors.As(err, &ve) {
			t.Errorf("%s: got %v, want %v", name, err, c.kind)
		}
	}
}

// TestStampClientBatch: LogAppendTime sets the attribute and the time and
// keeps the CRC valid; a right CreateTime header is left alone.
func TestStampClientBatch(t *testing.T) {
	b := clientBatch(t, BatchSpec{BaseTimestamp: 9000}, Record{Value: []byte("a")}, Record{TimestampDelta: 7, Value: []byte("b")})
	info, err := ValidateClientBatch(b, rules())
	if err != nil || info.MaxTimestamp != 9007 {
		t.Fatal(info, err)
	}
	if StampClientBatch(b, info, false) {
		t.Fatal("a right CreateTime header changed")
	}
	r := rules()
	r.LogAppendTime = true
	info, err = ValidateClientBatch(b, r)
	if err != nil || info.MaxTimestamp != r.NowMs {
		t.Fatal(info, err)
	}
	if !StampClientBatch(b, info, true) || !b.Attributes().LogAppendTime() || b.MaxTimestamp() != r.NowMs || b.VerifyCRC() != nil {
		t.Fatalf("stamp: attrs %v, max %d, crc %v", b.Attributes(), b.MaxTimestamp(), b.VerifyCRC())
	}
}

// FuzzValidateClientBatch: no input panics, and an accepted batch decodes
// to exactly its count of records with offset deltas 0..n-1.
func FuzzValidateClientBatch(f *testing.F) {
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		f.Add([]byte(clientBatch(f, BatchSpec{Compression: c, BaseTimestamp: 9000}, Record{Key: []byte("k"), Value: []byte("v")}, Record{Value: []byte("w")})))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= HeaderSize { // reach past the CRC
			data = append([]byte(nil), data...)
			binary.BigEndian.PutUint32(data[offBatchLength:], uint32(len(data)-lengthFieldEnd))
			binary.BigEndian.PutUint32(data[offCRC:], Batch(data).ComputeCRC())
		}
		b, err := ParseBatch(data)
		if err != nil {
			return
		}
		if _, err := ValidateClientBatch(b, rules()); err != nil {
			return
		}
		rs, err := b.RecordsLimit(1 << 20)
		if err != nil {
			t.Fatalf("accepted batch does not decode: %v", err)
		}
		if len(rs) != int(b.NumRecords()) || int(b.LastOffsetDelta())+1 != len(rs) {
			t.Fatalf("accepted: count %d, last delta %d, %d records", b.NumRecords(), b.LastOffsetDelta(), len(rs))
		}
		for i, r := range rs {
			if r.OffsetDelta != int32(i) {
				t.Fatalf("record %d offset delta %d", i, r.OffsetDelta)
			}
		}
	})
}
