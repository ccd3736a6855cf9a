package mirror

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// BenchmarkStopFailover measures a failover of 10,000 mirrored partitions on memory logs:
// from the StopMirrorTopics request to every partition actually STOPPED (fetcher
// removed, leader epoch bumped, truncated to the LSO, LME persisted, MIRROR_PID_RESET
// appended, writable). The coordinator runs with its defaults (50 partitions, 10 ms
// append linger), so state writes are batched.
//
//	go test -run='^$' -bench=BenchmarkStopFailover -benchtime=3x ./mirror
func BenchmarkStopFailover(b *testing.B) {
	const partitions = 10_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		w := newWorld()
		w.coord = &coordinator.Config{}
		w.idle = 100 * time.Millisecond // LocalSource does not long-poll; KafkaSource does
		src, dst := w.newSite(b, "A"), w.newSite(b, "B")
		createTopic(b, src, "big", records.UUID{0xBE}, partitions)
		for p := int32(0); p < partitions; p++ {
			appendBatch(b, src.log(b, "big", p), 0, 1, "x")
		}
		ctx := testCtx(b)
		require.NoError(b, dst.m.CreateClusterMirror(ctx, "a-to-b", bootstrap(src)))
		mustOK(b)(dst.m.StartMirrorTopics(ctx, "a-to-b", []string{"big"}, StartOptions{}))
		require.NoError(b, dst.m.WaitForStates(ctx, "a-to-b", []string{"big"}, statemachine.Mirroring))
		b.StartTimer()
		mustOK(b)(dst.m.StopMirrorTopics(ctx, "a-to-b", []string{"big"}, StopOptions{Wait: true}))
		b.StopTimer()
		for p := int32(0); p < partitions; p += 997 {
			require.False(b, dst.dest.ReadOnly("big", p))
		}
		require.NoError(b, dst.m.Close())
		require.NoError(b, src.m.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(partitions), "partitions/op")
}
