package twosites

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkShutdownAtScale measures how long a kmirrord site mirroring
// KMIRROR_SHUTDOWN_PARTITIONS partitions (default 10,000) of one topic from
// another kmirrord takes to exit after SIGTERM, then restarts it and checks
// that every partition came back MIRRORING, caught up, with the bytes the
// source serves. It reports sigterm-s (SIGTERM to process exit) and
// restart-s (restart to every partition MIRRORING again).
//
//	go test -run '^$' -bench ShutdownAtScale -benchtime 1x -timeout 60m ./internal/twosites/
func BenchmarkShutdownAtScale(b *testing.B) {
	n := int32(10000)
	if v, err := strconv.Atoi(os.Getenv("KMIRROR_SHUTDOWN_PARTITIONS")); err == nil && v > 0 {
		n = int32(v)
	}
	const topic = "scale"
	src := newSite(b, "SRC")
	defer src.term()
	createTopicSlow(b, src.addr, topic, n)
	produceEach(b, src.addr, topic, n)
	dst := newSite(b, "DST")
	dst.createMirror("scale", src)
	dst.ctl("--start", "--mirror", "scale", "--topics", topic, "--timeout", "1800000")
	dst.waitCaughtUp(topic, int(n))
	want := fetchFirstBatches(b, src.addr, topic, n)
	for i := 0; i < b.N; i++ {
		from := dst.mark()
		start := time.Now()
		require.NoError(b, dst.cmd.Process.Signal(syscall.SIGTERM))
		<-dst.exited
		stop := time.Since(start)
		require.NoError(b, dst.exit, "kmirrord exit after SIGTERM")
		stopped := dst.logs(from, func(l logLine) bool { return l.str("msg") == "kmirrord stopped" })
		require.NotEmpty(b, stopped)
		b.ReportMetric(stop.Seconds(), "sigterm-s")
		for _, k := range []string{"server_ms", "dataplane_ms", "mirror_ms", "destination_ms"} {
			b.ReportMetric(float64(stopped[0].num(k)), "stop-"+k)
		}

		start = time.Now()
		dst.start()
		dst.waitCaughtUp(topic, int(n))
		b.ReportMetric(time.Since(start).Seconds(), "restart-s")
		got := fetchFirstBatches(b, dst.addr, topic, n)
		for p := range n {
			require.Equal(b, want[p], got[p], "partition %d after the restart", p)
		}
	}
	dst.term()
}

// waitCaughtUp waits (up to 30 minutes) until describe shows every one of the n
// partitions of topic in mirror "scale" MIRRORING with its one record.
func (s *site) waitCaughtUp(topic string, n int) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Minute)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		out := s.ctl("--describe", "--mirror", "scale", "--output", "json", "--timeout", "600000")
		var descs []struct {
			Partitions []partitionDesc `json:"partitions"`
		}
		require.NoError(s.t, json.Unmarshal([]byte(out), &descs))
		good := 0
		for _, d := range descs {
			for _, p := range d.Partitions {
				if p.Topic == topic && p.State == "MIRRORING" && p.DestinationOffset == 1 {
					good++
				}
			}
		}
		if good == n {
			return
		}
		require.True(s.t, time.Now().Before(deadline), "%d of %d partitions caught up", good, n)
		<-tick.C // describe polls the remote process, as waitPartitionsFor does
	}
}

// createTopicSlow is createTopic with minutes for the answer: the site opens
// every partition's log before it answers.
func createTopicSlow(b *testing.B, addr, topic string, n int32) {
	b.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, n, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	req.TimeoutMillis = 600000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	resp, err := kgoClient(b, addr, kgo.RequestTimeoutOverhead(10*time.Minute)).Request(ctx, req)
	require.NoError(b, err)
	topics := resp.(*kmsg.CreateTopicsResponse).Topics
	require.Len(b, topics, 1)
	require.Equal(b, int16(0), topics[0].ErrorCode, "create topic %s", topic)
}

// produceEach writes one record to each partition.
func produceEach(b *testing.B, addr, topic string, n int32) {
	b.Helper()
	cl := kgoClient(b, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProduceRequestTimeout(5*time.Minute), kgo.RequestTimeoutOverhead(5*time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rs := make([]*kgo.Record, 0, n)
	for p := range n {
		rs = append(rs, &kgo.Record{Partition: p, Value: []byte("v" + strconv.Itoa(int(p)))})
	}
	require.NoError(b, cl.ProduceSync(ctx, rs...).FirstErr())
}

// fetchFirstBatches fetches every partition of topic from offset 0, 500
// partitions a request, and returns each one's record batch bytes.
func fetchFirstBatches(b *testing.B, addr, topic string, n int32) map[int32][]byte {
	b.Helper()
	cl := kgoClient(b, addr)
	id := topicID(b, cl, topic)
	out := map[int32][]byte{}
	for first := int32(0); first < n; first += 500 {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 64<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		for p := first; p < min(first+500, n); p++ {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 0, 1<<16
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		resp := request[*kmsg.FetchResponse](b, cl, req)
		require.Equal(b, int16(0), resp.ErrorCode)
		for _, t := range resp.Topics {
			for _, fp := range t.Partitions {
				require.Equal(b, int16(0), fp.ErrorCode, "fetch %s-%d", topic, fp.Partition)
				require.NotEmpty(b, fp.RecordBatches, "partition %d", fp.Partition)
				out[fp.Partition] = fp.RecordBatches
			}
		}
	}
	require.Len(b, out, int(n))
	return out
}
