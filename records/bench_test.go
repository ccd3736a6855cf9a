package records

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// lz4Corpus is 64 MiB of LZ4 batches of compressible records, 16 KiB to
// 1 MiB each, built once per test binary.
var lz4Corpus = sync.OnceValue(func() []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"order", "created", "customer", "amount", "currency", "EUR", "USD", "status", "shipped", "pending"}
	var out []byte
	off := int64(0)
	for len(out) < 64<<20 {
		// Records of ~1 KiB compress about 3x; 48..3000 records give
		// batches from ~16 KiB to ~1 MiB.
		n := 48 + rng.IntN(2950)
		recs := make([]Record, n)
		for i := range recs {
			v := make([]byte, 0, 1024)
			for len(v) < 1000 {
				v = fmt.Appendf(v, "%s=%d;", words[rng.IntN(len(words))], rng.IntN(1000))
			}
			recs[i] = Record{Key: fmt.Appendf(nil, "k%d", off+int64(i)), Value: v}
		}
		b, err := BuildBatch(BatchSpec{BaseOffset: off, Compression: CompressionLZ4, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			panic(err)
		}
		out = append(out, b...)
		off += int64(n)
	}
	return out
})

// BenchmarkIterateVerifyCRC is the mirror fast path: walk the batches of a
// 64 MiB buffer and verify every CRC-32C.
func BenchmarkIterateVerifyCRC(b *testing.B) {
	buf := lz4Corpus()
	var it Iterator
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	batches := 0
	for b.Loop() {
		it.Reset(buf)
		batches = 0
		for it.Next() {
			if err := it.Batch().VerifyCRC(); err != nil {
				b.Fatal(err)
			}
			batches++
		}
		if it.Err() != nil || it.Partial() {
			b.Fatal("bad corpus")
		}
	}
	b.ReportMetric(float64(batches), "batches/op")
}

// BenchmarkIterateOnly walks the headers without the CRC.
func BenchmarkIterateOnly(b *testing.B) {
	buf := lz4Corpus()
	var it Iterator
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		it.Reset(buf)
		for it.Next() {
		}
	}
}

// BenchmarkRecordsLZ4 decodes one ~1 MiB LZ4 batch (the verification path,
// not the mirror path).
func BenchmarkRecordsLZ4(b *testing.B) {
	it := NewIterator(lz4Corpus())
	var big Batch
	for it.Next() {
		if len(it.Batch()) > len(big) {
			big = it.Batch()
		}
	}
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := big.Records(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateClientBatch measures the data plane's per-Produce check
// of one client batch of 1000 records of ~1 KiB (1 MiB of records),
// uncompressed, LZ4 and zstd; bytes/s counts the batch's size on the wire.
func BenchmarkValidateClientBatch(b *testing.B) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4, CompressionZstd} {
		recs := make([]Record, 1000)
		for i := range recs {
			recs[i] = Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(make([]byte, 0, 1024), "%01000d", i)}
		}
		raw, err := BuildBatch(BatchSpec{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1}, recs)
		if err != nil {
			b.Fatal(err)
		}
		rules := ClientRules{NowMs: 2, BeforeMaxMs: NoTimestampBound, AfterMaxMs: NoTimestampBound, DecodeLimit: 64 << 20}
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateClientBatch(Batch(raw), rules); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
