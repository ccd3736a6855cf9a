package mirror

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
)

// BenchmarkSyncOnceSteadyState measures a sync cycle with nothing to change: 200
// mirrored topics of 4 partitions, 20 groups committed on every partition, all in memory.
func BenchmarkSyncOnceSteadyState(b *testing.B) {
	ctx := context.Background()
	site := NewMemoryDestination("a", fetcher.MemoryLogOptions{})
	var groups []string
	for i := 0; i < 200; i++ {
		require.NoError(b, site.CreateTopic(ctx, TopicSpec{Name: fmt.Sprintf("t%03d", i), TopicID: records.UUID{byte(i), byte(i >> 8), 1}, Partitions: 4, Configs: map[string]string{"retention.ms": "1000", "mirror.x": "y"}}))
	}
	for g := 0; g < 20; g++ {
		name := fmt.Sprintf("g%02d", g)
		groups = append(groups, name)
		offs := map[TopicPartition]int64{}
		for i := 0; i < 200; i++ {
			for p := int32(0); p < 4; p++ {
				offs[TopicPartition{Topic: fmt.Sprintf("t%03d", i), Partition: p}] = 0
			}
		}
		require.NoError(b, site.CommitOffsets(name, offs))
	}
	log := &MemoryControllerLog{}
	ctl, err := OpenController(ctx, log)
	require.NoError(b, err)
	require.NoError(b, ctl.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1", KeyTopicsInclude: "t.*"}))
	dst := NewMemoryDestination("b", fetcher.MemoryLogOptions{})
	s, err := metasync.NewSyncer(metasync.SyncConfig{Mirror: "m", Controller: ctl, Source: metasync.NewLocalSourceAdmin(site, func() []string { return groups }), Destination: dst})
	require.NoError(b, err)
	st, err := s.SyncOnce(ctx)
	require.NoError(b, err)
	require.Equal(b, 200, st.TopicsCreated)
	require.Equal(b, 20*800, st.OffsetsSynced)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := s.SyncOnce(ctx)
		if err != nil || st.OffsetsSynced != 0 || st.ConfigsChanged != 0 || len(st.Errors) != 0 {
			b.Fatalf("steady state changed something: %+v %v", st, err)
		}
	}
}
