package mirror

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// TestKafkaSourceEndToEnd mirrors a kfake cluster into a memory and a file destination
// with the default source and peer factories (KafkaSource, metasync.KafkaSourceAdmin, and an
// admin-RPC peer that kgo never lets reach kfake, which does not advertise the mirror
// APIs: LME -1). It checks byte equality against raw Fetch responses of kfake, pause and
// resume, stop (writable, LME, MIRROR_PID_RESET) and delete.
func TestKafkaSourceEndToEnd(t *testing.T) {
	for _, kind := range []string{"memory", "file"} {
		t.Run(kind, func(t *testing.T) {
			var dest *LocalDestination
			if kind == "memory" {
				dest = NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
			} else {
				var err error
				dest, err = OpenFileDestination(t.TempDir(), "dst", fetcher.FileLogOptions{})
				require.NoError(t, err)
			}
			t.Cleanup(func() { require.NoError(t, dest.Close()) })
			kafkaEndToEnd(t, dest)
		})
	}
}

func kafkaEndToEnd(t *testing.T, dest *LocalDestination) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("kfake-src"), kfake.SeedTopics(2, "events"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	produce := func(tag string, n int) {
		for _, comp := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression()} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.ProducerBatchCompression(comp),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
			require.NoError(t, err)
			var recs []*kgo.Record
			for p := int32(0); p < 2; p++ {
				for i := 0; i < n; i++ {
					recs = append(recs, &kgo.Record{Topic: "events", Partition: p, Key: []byte(tag),
						Value: []byte(strings.Repeat(fmt.Sprintf("%s-%d-", tag, i), 20))})
				}
			}
			require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
			cl.Close()
		}
	}
	produce("first", 30)

	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "50"}))
	mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"events"}, StartOptions{}))
	require.NoError(t, m.WaitForStates(ctx, "k", []string{"events"}, statemachine.Mirroring))
	spec, ok := dest.Topic("events")
	require.True(t, ok)
	require.Equal(t, int32(2), spec.Partitions)

	raw, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	caughtUp := func() {
		for p := int32(0); p < 2; p++ {
			waitCond(t, ctx, m, "caught up", func() bool {
				d := describeOn(t, m, "k", "events", p)
				return d.SourceOffset > 0 && d.DestinationOffset == d.SourceOffset
			})
			d := describeOn(t, m, "k", "events", p)
			l, err := dest.Log("events", p)
			require.NoError(t, err)
			require.Equal(t, rawFetch(t, raw, "events", spec.TopicID, p, d.SourceOffset), logBytes(t, l), "partition %d byte for byte", p)
			require.True(t, dest.ReadOnly("events", p))
		}
	}
	caughtUp()

	mustOK(t)(m.PauseMirrorTopics(ctx, "k", []string{"events"}, LifecycleOptions{Wait: true}))
	produce("second", 10)
	mustOK(t)(m.ResumeMirrorTopics(ctx, "k", []string{"events"}, LifecycleOptions{Wait: true}))
	caughtUp()

	ends := make([]int64, 2)
	latest := make([]int32, 2)
	for p := int32(0); p < 2; p++ {
		l, _ := dest.Log("events", p)
		ends[p], latest[p] = l.LogEndOffset(), l.LatestEpoch()
	}
	mustOK(t)(m.StopMirrorTopics(ctx, "k", nil, StopOptions{Patterns: []string{"ev.*"}, Wait: true}))
	for p := int32(0); p < 2; p++ {
		l, _ := dest.Log("events", p)
		require.False(t, dest.ReadOnly("events", p))
		require.Equal(t, ends[p]+1, l.LogEndOffset())
		eps := batchEpochs(t, l)
		require.Equal(t, int64(records.ControlMirrorPIDReset), eps[len(eps)-1][2])
		d := describeOn(t, m, "k", "events", p)
		require.Equal(t, statemachine.Stopped, d.State)
		require.Equal(t, latest[p], d.LastMirrorEpoch)
		require.Greater(t, l.LeaderEpoch(), latest[p])
	}
	mi, _ := m.ctrl.Mirror("k")
	require.Contains(t, mi.Config.TopicsExclude, "ev.*")
	require.NoError(t, m.DeleteClusterMirrors(ctx, []string{"k"})["k"])
	ts, ok := m.ctrl.Topic("events")
	require.True(t, ok)
	require.Equal(t, "", ts.Mirror)
}

func describeOn(t testing.TB, m *Mirror, name, topic string, p int32) PartitionDescription {
	t.Helper()
	ds, err := m.DescribeClusterMirrors(context.Background(), []string{name},
		DescribeOptions{TopicPartitions: map[string][]int32{topic: {p}}, IncludeStates: true, IncludeLags: true})
	require.NoError(t, err)
	return ds[0].Topics[0].Partitions[0]
}

// rawFetch reads partition p of topic from offset 0 to end with raw Fetch v13 requests
// and returns the record batches exactly as kfake serves them.
func rawFetch(t testing.TB, cl *kgo.Client, topic string, id records.UUID, p int32, end int64) []byte {
	t.Helper()
	var out []byte
	for off := int64(0); off < end; {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = 13, -1, 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		require.NoError(t, err)
		pr := resp.Topics[0].Partitions[0]
		require.Zero(t, pr.ErrorCode)
		it := records.NewIterator(pr.RecordBatches)
		progressed := false
		for it.Next() && off < end {
			b := it.Batch()
			if b.NextOffset() <= off {
				continue
			}
			out = append(out, b...)
			off = b.NextOffset()
			progressed = true
		}
		require.True(t, progressed, "no progress at offset %d", off)
	}
	return out
}

// TestAdminPeer: the wire Peer answers "no mirror" for a plain Kafka cluster (kgo never
// sends the mirror keys kfake does not advertise). That it finds the LME through an
// admin server in front of a Mirror is TestAdminPeerOverHandler (mirror/adminhandler).
func TestAdminPeer(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	cfg, err := ParseMirrorConfig(map[string]string{KeyBootstrapServers: strings.Join(src.ListenAddrs(), ",")})
	require.NoError(t, err)
	plain, err := NewKafkaPeer(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	ls, err := plain.ListClusterMirrors(ctx, ListFilter{SourceClusterIDs: []string{"x"}})
	require.NoError(t, err)
	require.Empty(t, ls)
	ds, err := plain.DescribeClusterMirrors(ctx, []string{"m"}, DescribeOptions{IncludeStates: true})
	require.NoError(t, err)
	require.Empty(t, ds)
}
