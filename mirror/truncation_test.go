package mirror

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// deleteRecords raises the log start of a kfake partition to offset (retention).
func deleteRecords(t *testing.T, ctx context.Context, src *kfake.Cluster, topic string, p int32, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = p, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, offset, resp.Topics[0].Partitions[0].LowWatermark)
}

// TestRestartStoppedReportsLostOffsets: restarting a STOPPED topic from a plain Kafka
// source truncates fully (spec §6.3 step 5). Partition 0's source log start was raised
// to 12 by retention, so the start result and the log name [0, 12) as discarded for
// good before the truncation happens; partition 1's source still has everything (a full
// truncation, nothing lost). Afterwards the log holds exactly what the source has.
func TestRestartStoppedReportsLostOffsets(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	// Two produce calls: offset 12 is a batch boundary, where retention cuts.
	produceTo(t, ctx, src, "t", 2, 12, "a")
	produceTo(t, ctx, src, "t", 2, 8, "b")
	var logs syncBuffer
	dest := &truncWatch{LocalDestination: NewMemoryDestination("dst", fetcher.MemoryLogOptions{}), logs: map[TopicPartition]fetcher.Log{}}
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
	res, err := m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{})
	mustOK(t)(res, err)
	require.Empty(t, res[0].Truncations, "a first start has nothing to truncate")
	for p := range int32(2) {
		waitCond(t, ctx, m, "caught up", func() bool { return describeOn(t, m, "k", "t", p).DestinationOffset == 20 })
	}
	mustOK(t)(m.StopMirrorTopics(ctx, "k", []string{"t"}, StopOptions{Wait: true}))
	ends := [2]int64{}
	for p := range int32(2) {
		l, err := dest.Log("t", p)
		require.NoError(t, err)
		ends[p] = l.LogEndOffset()
		require.Equal(t, int64(21), ends[p], "20 records and the MIRROR_PID_RESET barrier")
	}
	deleteRecords(t, ctx, src, "t", 0, 12)

	res, err = m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{AllowTruncation: true})
	mustOK(t)(res, err)
	require.Equal(t, []FullTruncation{
		{Partition: 0, LogStart: 0, LogEnd: ends[0], SourceLogStart: 12, LostFrom: 0, LostTo: 12},
		{Partition: 1, LogStart: 0, LogEnd: ends[1], SourceLogStart: 0, LostFrom: 0, LostTo: 0},
	}, res[0].Truncations)
	require.Equal(t, int64(12), res[0].Truncations[0].Lost())
	require.Equal(t, int64(0), res[0].Truncations[1].Lost())
	startLog := logs.String()
	require.Contains(t, startLog, "discarded for good")
	require.Contains(t, startLog, "partition=0 logStart=0 logEnd=21 sourceLogStart=12 notOnSourceFrom=0 notOnSourceTo=12 notOnSource=12")

	require.NoError(t, m.WaitForStates(ctx, "k", []string{"t"}, statemachine.Mirroring))
	for p := range int32(2) {
		waitCond(t, ctx, m, "mirrored again", func() bool { return describeOn(t, m, "k", "t", p).DestinationOffset == 20 })
	}
	l0, err := dest.Log("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(12), l0.LogStartOffset(), "what the source no longer has is gone, as reported")
	require.Contains(t, dest.truncations(), "t-0 truncate fully at 0 (end 21)")
	require.Contains(t, logs.String(), "PREPARING truncates the destination log fully")
}
