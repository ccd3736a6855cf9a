package fetcher

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// FuzzFetchResponse feeds arbitrary record bytes (as a source could send) to
// the loop's response handling, then an arbitrary DivergingEpoch. It must
// never panic, never append a batch that fails its CRC or carries an epoch
// above the destination leader epoch, and a divergence may only shorten the log.
func FuzzFetchResponse(f *testing.F) {
	good := append(batch(f, 0, 0, 3, records.CompressionNone), batch(f, 3, 2, 2, records.CompressionLZ4)...)
	f.Add(good, int64(100), int8(3), int32(0), int64(2))
	f.Add(good[:len(good)-5], int64(100), int8(-1), int32(2), int64(9)) // trailing partial batch
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	f.Add(bad, int64(100), int8(3), int32(-1), int64(-1))                                                     // CRC mismatch in the second batch
	f.Add(append(batch(f, 0, 9, 1, records.CompressionNone), good...), int64(5), int8(9), int32(1), int64(0)) // fencing epoch
	f.Add(append(batch(f, 2, 0, 3, records.CompressionNone), batch(f, 1, 0, 1, records.CompressionNone)...), int64(10), int8(0), int32(0), int64(1))
	f.Add(emptyBatch(f, 0, 1, 7, 3), int64(8), int8(1), int32(1), int64(4))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, int64(1), int8(0), int32(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, hw int64, srcEpoch int8, divEpoch int32, divEnd int64) {
		cfg := Config{}.withDefaults()
		fe := &Fetcher{cfg: cfg, status: map[TopicPartition]Status{}}
		l := NewMemoryLog(MemoryLogOptions{SyncEveryAppend: true})
		_, err := l.BumpLeaderEpoch(4)
		require.NoError(t, err)
		ps := &partState{tp: TopicPartition{"f", 0}, log: l, sourceEpoch: int32(srcEpoch), maxBytes: 1 << 20, bo: cfg.NewBackOff()}
		req, res := FetchPartition{FetchOffset: 0}, FetchResult{HighWatermark: hw, Records: data}
		fe.appended(ps, req, res, checkAndAppend(ps, req, res))
		for _, b := range allBatches(t, l) {
			require.NoError(t, b.VerifyCRC())
			require.LessOrEqual(t, b.PartitionLeaderEpoch(), l.LeaderEpoch())
			if hw >= 0 {
				require.Less(t, b.BaseOffset(), hw)
			}
		}
		if ps.log == nil {
			return // failed or fenced: the loop drops it
		}
		leo := l.LogEndOffset()
		fe.diverged(ps, epoch.Divergence{Epoch: divEpoch, EndOffset: divEnd})
		require.LessOrEqual(t, l.LogEndOffset(), leo)
	})
}
