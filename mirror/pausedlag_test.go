package mirror

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// A describe tells the lag of a PAUSED partition: the source keeps growing while no
// fetcher follows it, and the describe asks the source for its high watermark.
func TestDescribeShowsLagOfPausedPartitions(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	produce := func(n int) {
		for range n {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte("v")}).FirstErr())
		}
	}
	produce(3)
	dest := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "50"}))
	mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"events"}, StartOptions{}))
	require.NoError(t, m.WaitForLag(ctx, "k", []string{"events"}, 0))

	mustOK(t)(m.PauseMirrorTopics(ctx, "k", []string{"events"}, LifecycleOptions{Wait: true}))
	produce(4)
	d := describeOn(t, m, "k", "events", 0)
	require.Equal(t, statemachine.Paused, d.State)
	require.Equal(t, int64(3), d.DestinationOffset)
	require.Equal(t, int64(7), d.SourceOffset)
	require.Equal(t, int64(4), d.Lag())
}
