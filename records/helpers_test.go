package records

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// crc32cRef is a bitwise CRC-32C (reflected polynomial 0x82F63B78),
// independent of hash/crc32, used to check the fast path.
func crc32cRef(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func sampleRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			TimestampDelta: int64(i * 3),
			OffsetDelta:    int32(i),
			Key:            []byte(fmt.Sprintf("key-%d", i)),
			Value:          []byte(fmt.Sprintf("value %d of the batch, value %d of the batch", i, i)),
		}
		if i%2 == 1 {
			recs[i].Headers = []Header{{Key: "h", Value: []byte("v")}, {Key: "null", Value: nil}}
		}
		if i%3 == 2 {
			recs[i].Key = nil
		}
	}
	return recs
}

func mustBuild(t testing.TB, spec BatchSpec, recs []Record) []byte {
	t.Helper()
	b, err := BuildBatch(spec, recs)
	require.NoError(t, err)
	return b
}

var allCodecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
