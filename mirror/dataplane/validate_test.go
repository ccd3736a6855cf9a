package dataplane

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// Byte positions of the v2 batch header fields the tests rewrite.
const (
	posLength, posMagic, posCRC, posAttrs, posLastDelta = 8, 16, 17, 21, 23
	posMaxTS, posNumRecords                             = 35, 57
)

// fixCRC recomputes b's CRC after a test rewrote it.
func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[posCRC:], records.Batch(b).ComputeCRC())
	return b
}

// withPayload is b with its record section replaced by payload and codec
// bits c, the length and CRC made valid.
func withPayload(b []byte, c records.Compression, payload []byte) []byte {
	out := append(append([]byte(nil), b[:records.HeaderSize]...), payload...)
	binary.BigEndian.PutUint32(out[posLength:], uint32(len(out)-12))
	a := binary.BigEndian.Uint16(out[posAttrs:])&^7 | uint16(c)
	binary.BigEndian.PutUint16(out[posAttrs:], a)
	return fixCRC(out)
}

// validationSite is a site with topic "t" (configs cfg) and a client.
func validationSite(t *testing.T, cfg map[string]string) (*site, func(req *kmsg.ProduceRequest) kmsg.ProduceResponseTopicPartition) {
	s := startSite(t, Config{})
	spec := mirror.TopicSpec{Name: "t", TopicID: records.UUID{7}, Partitions: 1, Configs: cfg}
	require.NoError(t, s.dst.CreateTopic(context.Background(), spec))
	_, err := s.log(t, "t", 0).BumpLeaderEpoch(-1)
	require.NoError(t, err)
	cl := s.client(t)
	return s, func(req *kmsg.ProduceRequest) kmsg.ProduceResponseTopicPartition {
		return request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0]
	}
}

// refused asserts that recs is refused with code, with an error message
// (Produce v8+), and that the log end did not move.
func refused(t *testing.T, cfg map[string]string, recs []byte, version int16, code int16) string {
	t.Helper()
	s, send := validationSite(t, cfg)
	req := produceReq("t", 0, recs)
	req.Version = version
	var p kmsg.ProduceResponseTopicPartition
	if version == 9 {
		p = send(req) // over the wire, as kgo sends it
	} else { // kgo would raise the version: serve it as given
		resp, err := s.dp.Serve(context.Background(), req)
		require.NoError(t, err)
		p = resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	require.Equal(t, code, p.ErrorCode)
	require.Equal(t, int64(-1), p.BaseOffset)
	require.Equal(t, int64(0), s.log(t, "t", 0).LogEndOffset(), "a refused batch appends nothing")
	msg := ""
	if version < 8 { // no ErrorMessage field before Produce v8
		require.Nil(t, p.ErrorMessage)
	} else {
		require.NotNil(t, p.ErrorMessage)
		require.NotEmpty(t, *p.ErrorMessage)
		msg = *p.ErrorMessage
	}
	// Nothing of the refused request is in the log: a valid batch after
	// it lands at offset 0.
	good, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()},
		[]records.Record{{Key: []byte("k"), Value: []byte("v")}})
	require.NoError(t, err)
	ok := send(produceReq("t", 0, good))
	require.Equal(t, [2]int64{0, 0}, [2]int64{int64(ok.ErrorCode), ok.BaseOffset})
	return msg
}

// TestProduceRefusesLyingRecordCount: a CRC-valid batch of one record whose
// header claims 2^31-1 records (count and last offset delta consistent with
// each other) is INVALID_RECORD, and three of them move nothing.
func TestProduceRefusesLyingRecordCount(t *testing.T) {
	b := dataBatch(t, 0, 0, 1, -1, -1, false)
	binary.BigEndian.PutUint32(b[posNumRecords:], 1<<31-1)
	binary.BigEndian.PutUint32(b[posLastDelta:], 1<<31-2)
	msg := refused(t, nil, fixCRC(b), 9, codeInvalidRecord)
	require.Contains(t, msg, "record count")
}

// TestProduceRefusesCountOffsetMismatch: a count that disagrees with the
// last offset delta is INVALID_RECORD.
func TestProduceRefusesCountOffsetMismatch(t *testing.T) {
	b := dataBatch(t, 0, 0, 2, -1, -1, false)
	binary.BigEndian.PutUint32(b[posLastDelta:], 5)
	refused(t, nil, fixCRC(b), 9, codeInvalidRecord)
}

// TestProduceRefusesFewerRecordsThanCounted: a count one above the records
// inside (header consistent) is INVALID_RECORD.
func TestProduceRefusesFewerRecordsThanCounted(t *testing.T) {
	b := dataBatch(t, 0, 0, 3, -1, -1, false)
	binary.BigEndian.PutUint32(b[posNumRecords:], 4)
	binary.BigEndian.PutUint32(b[posLastDelta:], 3)
	refused(t, nil, fixCRC(b), 9, codeInvalidRecord)
}

// TestProduceRefusesNonSequentialOffsetDeltas: records whose offset deltas
// are not 0..n-1 are INVALID_RECORD.
func TestProduceRefusesNonSequentialOffsetDeltas(t *testing.T) {
	b := dataBatch(t, 0, 0, 2, -1, -1, false)
	// First record: length, attributes, timestamp delta 0, offset delta 0
	// (zigzag 0); make it 1 (zigzag 2): deltas 1, 1.
	require.Equal(t, byte(0), b[records.HeaderSize+3])
	b[records.HeaderSize+3] = 2
	msg := refused(t, nil, fixCRC(b), 9, codeInvalidRecord)
	require.Contains(t, msg, "offset delta")
}

// TestProduceRefusesLyingRecordLength: a record length varint longer than
// the record, or shorter (bytes left over), is INVALID_RECORD.
func TestProduceRefusesLyingRecordLength(t *testing.T) {
	for _, d := range []int{+2, -2} { // zigzag: ±1 byte
		b := dataBatch(t, 0, 0, 1, -1, -1, false)
		b[records.HeaderSize] = byte(int(b[records.HeaderSize]) + d)
		refused(t, nil, fixCRC(b), 9, codeInvalidRecord)
	}
}

// TestProduceRefusesTrailingBytes: bytes after the last record, inside the
// batch and its CRC, are INVALID_RECORD.
func TestProduceRefusesTrailingBytes(t *testing.T) {
	b := dataBatch(t, 0, 0, 2, -1, -1, false)
	msg := refused(t, nil, withPayload(b, records.CompressionNone, append(append([]byte(nil), b[records.HeaderSize:]...), 0, 0)), 9, codeInvalidRecord)
	require.Contains(t, msg, "after the last")
}

// TestProduceRefusesTwoBatches: a partition's records must be exactly one
// batch (Kafka's rule for Produce v3+): INVALID_RECORD.
func TestProduceRefusesTwoBatches(t *testing.T) {
	b := dataBatch(t, 0, 0, 1, -1, -1, false)
	refused(t, nil, append(append([]byte(nil), b...), b...), 9, codeInvalidRecord)
}

// TestProduceRefusesOldMagic: magic 1 is INVALID_RECORD (only v2).
func TestProduceRefusesOldMagic(t *testing.T) {
	b := dataBatch(t, 0, 0, 1, -1, -1, false)
	b[posMagic] = 1
	refused(t, nil, b, 9, codeInvalidRecord)
}

// TestProduceRefusesNonZeroBaseOffset: a client batch starts at offset 0
// (INVALID_RECORD).
func TestProduceRefusesNonZeroBaseOffset(t *testing.T) {
	refused(t, nil, dataBatch(t, 5, 0, 1, -1, -1, false), 9, codeInvalidRecord)
}

// TestProduceRefusesBadCRC: CORRUPT_MESSAGE.
func TestProduceRefusesBadCRC(t *testing.T) {
	b := dataBatch(t, 0, 0, 1, -1, -1, false)
	b[len(b)-1] ^= 1
	refused(t, nil, b, 9, codeCorruptMessage)
}

// TestProduceRefusesGzipFlagOverPlainBytes: the gzip bit over bytes that
// are not gzip is INVALID_RECORD.
func TestProduceRefusesGzipFlagOverPlainBytes(t *testing.T) {
	b := dataBatch(t, 0, 0, 2, -1, -1, false)
	msg := refused(t, nil, withPayload(b, records.CompressionGzip, b[records.HeaderSize:]), 9, codeInvalidRecord)
	require.Contains(t, msg, "gzip")
}

// TestProduceRefusesUnknownCodec: codec bits 5, 6 and 7 are
// UNSUPPORTED_COMPRESSION_TYPE.
func TestProduceRefusesUnknownCodec(t *testing.T) {
	for _, c := range []records.Compression{5, 6, 7} {
		b := dataBatch(t, 0, 0, 1, -1, -1, false)
		refused(t, nil, withPayload(b, c, b[records.HeaderSize:]), 9, codeUnsupportedCompression)
	}
}

// TestProduceRefusesZstdBeforeV7: zstd on Produce v6 is
// UNSUPPORTED_COMPRESSION_TYPE; v7 accepts it.
func TestProduceRefusesZstdBeforeV7(t *testing.T) {
	b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		Compression: records.CompressionZstd, BaseTimestamp: 1}, []records.Record{{Value: []byte("z")}})
	require.NoError(t, err)
	refused(t, nil, b, 6, codeUnsupportedCompression)
	s, send := validationSite(t, nil)
	req := produceReq("t", 0, b)
	req.Version = 7
	require.Equal(t, int16(0), send(req).ErrorCode)
	require.Equal(t, int64(1), s.log(t, "t", 0).LogEndOffset())
}

// TestProduceRefusesDecompressionBomb: a zstd payload that inflates past the
// decode bound (64 MiB for a max.message.bytes up to 1 MiB) is
// MESSAGE_TOO_LARGE, though it is a few KiB on the wire.
func TestProduceRefusesDecompressionBomb(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	bomb := enc.EncodeAll(make([]byte, minDecodeLimit+1), nil)
	require.NoError(t, enc.Close())
	require.Less(t, len(bomb), 64<<10)
	b := dataBatch(t, 0, 0, 1, -1, -1, false)
	msg := refused(t, map[string]string{cfgMaxMessageBytes: "16384"}, withPayload(b, records.CompressionZstd, bomb), 9, codeMessageTooLarge)
	require.Contains(t, msg, "decompresses to more than")
}

// TestProduceRefusesClientControlBatch: only the transaction coordinator
// writes control batches; a client's is INVALID_RECORD.
func TestProduceRefusesClientControlBatch(t *testing.T) {
	refused(t, nil, marker(5, records.ControlCommit), 9, codeInvalidRecord)
}

// TestProduceRefusesTimestampBeforeMax: under CreateTime a record older
// than message.timestamp.before.max.ms is INVALID_TIMESTAMP.
func TestProduceRefusesTimestampBeforeMax(t *testing.T) {
	old := dataBatch(t, 0, 0, 1, -1, -1, false) // timestamp 1000 (1970)
	msg := refused(t, map[string]string{cfgTimestampBeforeMax: "86400000"}, old, 9, codeInvalidTimestamp)
	require.Contains(t, msg, "out of range")
}

// TestProduceRefusesTimestampAfterMax: a record more than
// message.timestamp.after.max.ms in the future is INVALID_TIMESTAMP; one
// within it is accepted.
func TestProduceRefusesTimestampAfterMax(t *testing.T) {
	at := func(ts int64) []byte {
		b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: ts},
			[]records.Record{{Value: []byte("f")}})
		require.NoError(t, err)
		return b
	}
	cfg := map[string]string{cfgTimestampAfterMax: "60000"}
	refused(t, cfg, at(time.Now().Add(time.Hour).UnixMilli()), 9, codeInvalidTimestamp)
	s, send := validationSite(t, cfg)
	require.Equal(t, int16(0), send(produceReq("t", 0, at(time.Now().UnixMilli()))).ErrorCode)
	require.Equal(t, int64(1), s.log(t, "t", 0).LogEndOffset())
}

// TestProduceRefusesClientLogAppendTime: a client may not set the
// LogAppendTime attribute (INVALID_TIMESTAMP).
func TestProduceRefusesClientLogAppendTime(t *testing.T) {
	b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1, LogAppendTime: true},
		[]records.Record{{Value: []byte("x")}})
	require.NoError(t, err)
	refused(t, nil, b, 9, codeInvalidTimestamp)
	refused(t, map[string]string{cfgTimestampType: timestampLogAppendTime}, b, 9, codeInvalidTimestamp)
}

// TestProduceRefusesKeylessRecordOnCompactedTopic: INVALID_RECORD.
func TestProduceRefusesKeylessRecordOnCompactedTopic(t *testing.T) {
	refused(t, map[string]string{cfgCleanupPolicy: "compact"}, dataBatch(t, 0, 0, 1, -1, -1, false), 9, codeInvalidRecord)
}

// TestProduceRefusesTopicMaxMessageBytes: the topic's max.message.bytes
// bounds the batch (MESSAGE_TOO_LARGE).
func TestProduceRefusesTopicMaxMessageBytes(t *testing.T) {
	refused(t, map[string]string{cfgMaxMessageBytes: "100"}, dataBatch(t, 0, 0, 20, -1, -1, false), 9, codeMessageTooLarge)
}

// TestProduceStampsLogAppendTime: on a LogAppendTime topic the leader sets
// the attribute and the max timestamp to its clock, recomputes the CRC and
// answers the time; the client's own bytes stay as they were.
func TestProduceStampsLogAppendTime(t *testing.T) {
	s, send := validationSite(t, map[string]string{cfgTimestampType: timestampLogAppendTime})
	b := dataBatch(t, 0, 0, 2, -1, -1, false)
	sent := append([]byte(nil), b...)
	before := time.Now().UnixMilli()
	p := send(produceReq("t", 0, b))
	after := time.Now().UnixMilli()
	require.Equal(t, int16(0), p.ErrorCode)
	require.Equal(t, sent, b)
	require.GreaterOrEqual(t, p.LogAppendTime, before)
	require.LessOrEqual(t, p.LogAppendTime, after)
	raw, err := s.log(t, "t", 0).Read(0, 1<<20)
	require.NoError(t, err)
	got, err := records.ParseBatch(raw)
	require.NoError(t, err)
	require.NoError(t, got.VerifyCRC())
	require.True(t, got.Attributes().LogAppendTime())
	require.Equal(t, p.LogAppendTime, got.MaxTimestamp())
	recs, err := got.Records()
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.True(t, bytes.Equal([]byte("v1"), recs[1].Value))
}

// TestProduceCreateTimeMaxTimestamp: under CreateTime the leader writes the
// records' largest timestamp into the header when the client's differs
// (CRC recomputed), and leaves a right one byte-exact.
func TestProduceCreateTimeMaxTimestamp(t *testing.T) {
	s, send := validationSite(t, nil)
	right := dataBatch(t, 0, 0, 1, -1, -1, false)
	require.Equal(t, int16(0), send(produceReq("t", 0, right)).ErrorCode)
	wrong := dataBatch(t, 0, 0, 1, -1, -1, false)
	binary.BigEndian.PutUint64(wrong[posMaxTS:], 99)
	require.Equal(t, int16(0), send(produceReq("t", 0, fixCRC(wrong))).ErrorCode)
	raw, err := s.log(t, "t", 0).Read(0, 1<<20)
	require.NoError(t, err)
	first, err := records.ParseBatch(raw)
	require.NoError(t, err)
	want := append([]byte(nil), right...)
	records.Batch(want).SetPartitionLeaderEpoch(first.PartitionLeaderEpoch())
	require.Equal(t, want, []byte(first))
	second, err := records.ParseBatch(raw[len(first):])
	require.NoError(t, err)
	require.NoError(t, second.VerifyCRC())
	require.Equal(t, int64(1000), second.MaxTimestamp())
}

// FuzzClientProduceValidation produces arbitrary records (with the batch
// length and CRC made valid when fix is set, so the fuzzer reaches the
// record checks) to a writable partition: no input may panic; an accepted
// batch is one whole CRC-valid batch whose count and last offset delta
// match the records inside and whose offsets moved the log end by its
// count (or an idempotent retry, answered with its earlier offset); a
// refused one appends nothing.
func FuzzClientProduceValidation(f *testing.F) {
	dst := mirror.NewMemoryDestination("fuzz-validate", fetcher.MemoryLogOptions{SyncEveryAppend: true})
	spec := mirror.TopicSpec{Name: "v", TopicID: records.UUID{3}, Partitions: 1}
	if err := dst.CreateTopic(context.Background(), spec); err != nil {
		f.Fatal(err)
	}
	l, err := dst.Log("v", 0)
	if err != nil {
		f.Fatal(err)
	}
	dp, err := New(Config{Destination: dst, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, MaxMessageBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = dp.Close() })
	for _, c := range []records.Compression{records.CompressionNone, records.CompressionGzip, records.CompressionSnappy, records.CompressionLZ4, records.CompressionZstd} {
		b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Compression: c, BaseTimestamp: 5},
			[]records.Record{{Key: []byte("k"), Value: []byte("a")}, {Value: []byte("bb"), Headers: []records.Header{{Key: "h", Value: []byte("x")}}}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b[:len(b)-1], true)
	}
	lying := dataBatch(f, 0, 0, 1, -1, -1, false)
	binary.BigEndian.PutUint32(lying[posNumRecords:], 1<<31-1)
	binary.BigEndian.PutUint32(lying[posLastDelta:], 1<<31-2)
	f.Add(fixCRC(lying), false)
	f.Add(marker(5, records.ControlAbort), false)
	f.Add(dataBatch(f, 0, 0, 3, 9, 0, false), true)
	f.Fuzz(func(t *testing.T, recs []byte, fix bool) {
		recs = append([]byte(nil), recs...)
		if fix && len(recs) >= records.HeaderSize {
			binary.BigEndian.PutUint32(recs[posLength:], uint32(len(recs)-12))
			fixCRC(recs)
		}
		before := l.LogEndOffset()
		resp, err := dp.Serve(context.Background(), produceReq("v", 0, recs))
		if err != nil {
			t.Fatal(err)
		}
		p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		end := l.LogEndOffset()
		if p.ErrorCode != 0 {
			if end != before {
				t.Fatalf("refused with %d, yet the log end moved %d -> %d", p.ErrorCode, before, end)
			}
			return
		}
		if end == before { // an idempotent retry, answered with its first offset
			if b, err := records.ParseBatch(recs); err != nil || b.ProducerID() < 0 || p.BaseOffset < 0 || p.BaseOffset >= before {
				t.Fatalf("accepted at %d without an append (log end %d), not a retry: %v", p.BaseOffset, before, err)
			}
			return
		}
		if p.BaseOffset != before {
			t.Fatalf("accepted at %d, log end was %d", p.BaseOffset, before)
		}
		raw, err := l.Read(before, len(recs)+records.HeaderSize)
		if err != nil {
			t.Fatal(err)
		}
		b, err := records.ParseBatch(raw)
		if err != nil || len(b) != len(raw) {
			t.Fatalf("accepted records are not one whole batch: %v", err)
		}
		if err := b.VerifyCRC(); err != nil {
			t.Fatal(err)
		}
		rs, err := b.Records()
		if err != nil {
			t.Fatalf("accepted batch does not decode: %v", err)
		}
		n := int64(len(rs))
		if int64(b.NumRecords()) != n || int64(b.LastOffsetDelta())+1 != n || end-before != n {
			t.Fatalf("accepted batch: count %d, last delta %d, %d records, log end moved by %d", b.NumRecords(), b.LastOffsetDelta(), n, end-before)
		}
		for i, r := range rs {
			if r.OffsetDelta != int32(i) {
				t.Fatalf("record %d has offset delta %d", i, r.OffsetDelta)
			}
		}
	})
}

// TestMirroredBatchesNotValidated: the replication path (Log.Append, what
// the fetcher calls) is not the client path. A source batch a client could
// never send — compacted (2 records over 3 offsets), LogAppendTime, a
// timestamp far outside the topic's window — is appended and served back
// byte for byte, while the same batch through Produce is refused.
func TestMirroredBatchesNotValidated(t *testing.T) {
	s, send := validationSite(t, map[string]string{cfgTimestampBeforeMax: "1000"})
	src, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 5, LogAppendTime: true},
		[]records.Record{{Key: []byte("a"), OffsetDelta: 0}, {Key: []byte("c"), OffsetDelta: 2}})
	require.NoError(t, err)
	require.NotEqual(t, int16(0), send(produceReq("t", 0, append([]byte(nil), src...))).ErrorCode)
	require.Equal(t, int64(0), s.log(t, "t", 0).LogEndOffset())

	require.NoError(t, s.log(t, "t", 0).Append(append([]byte(nil), src...)))
	spec, _ := s.dst.Topic("t")
	resp := request[*kmsg.FetchResponse](t, s.client(t), fetchReq(spec, 0, 0, nil))
	got := resp.Topics[0].Partitions[0].RecordBatches
	require.Equal(t, src, got, "mirrored bytes are served as appended")
}
