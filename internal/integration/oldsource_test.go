package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kafkatest"
	kmirror "github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// TestOlderSourceKafka39 mirrors from cluster C, a Kafka 3.9 broker (the oldest version the
// harness runs; kmirror needs Fetch v12, Kafka 2.7+), through the mirror facade with its
// default KafkaSource, KafkaSourceAdmin and peer into a memory destination: the data of
// every codec byte for byte, a consumer group's offsets, a topic config change, then the
// failover (stop: a MIRROR_PID_RESET barrier and a writable partition).
func TestOlderSourceKafka39(t *testing.T) {
	brokers := kafkatest.ClusterC(t)
	t.Logf("cluster C runs Kafka %q at %v", kafkatest.VersionC(), brokers)
	cl := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	group := topic + "-group"
	kafkatest.CreateTopic(t, cl, topic, 2, 1, map[string]string{"retention.ms": "604800000"})
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression()}
	for i, codec := range codecs {
		pc := kafkatest.NewClient(t, brokers, kgo.ProducerBatchCompression(codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
		for p := int32(0); p < 2; p++ {
			produce(t, pc, topic, p, fmt.Sprintf("codec%d", i), 60, 20)
		}
	}

	f := startFacade(t, brokers, "from-c", 300*time.Millisecond, map[string]string{
		kmirror.KeyTopicsInclude: topic, kmirror.KeyGroupsInclude: group})
	f.start(t, topic)
	for p := int32(0); p < 2; p++ {
		hw := f.waitCaughtUp(t, cl, topic, p)
		require.EqualValues(t, 5*60, hw)
		l, err := f.dest.Log(topic, p)
		require.NoError(t, err)
		src := readSource(t, cl, topic, p)
		dst := readLog(t, l)
		requireSameBatches(t, fmt.Sprintf("%s-%d", topic, p), src.Batches, dst)
		st := statsOf(dst)
		t.Logf("partition %d: %v", p, st)
		for c := records.Compression(0); c <= 4; c++ {
			require.Positive(t, st.Codecs[c], "partition %d has batches of codec %s", p, c)
		}
		require.True(t, f.dest.ReadOnly(topic, p), "a MIRRORING partition is read-only")
	}

	// Group offsets (below the mirrored log end, so not clamped) and a config change.
	commitSourceOffsets(t, cl, group, topic, map[int32]int64{0: 7, 1: 123})
	alterSourceTopicConfig(t, cl, topic, "retention.ms", "86400000")
	want := map[kmirror.TopicPartition]int64{{Topic: topic, Partition: 0}: 7, {Topic: topic, Partition: 1}: 123}
	waitFor(t, waitTimeout, "group offsets and the topic config to sync", func() (bool, string) {
		got := f.dest.CommittedOffsets(group)
		spec, _ := f.dest.Topic(topic)
		ok := equalOffsets(got, want) && spec.Configs["retention.ms"] == "86400000"
		return ok, fmt.Sprintf("offsets %v, retention.ms %q", got, spec.Configs["retention.ms"])
	})

	// Failover.
	ends := make([]int64, 2)
	for p := int32(0); p < 2; p++ {
		l, _ := f.dest.Log(topic, p)
		ends[p] = l.LogEndOffset()
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := f.m.StopMirrorTopics(ctx, f.name, []string{topic}, kmirror.StopOptions{Wait: true})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	for p := int32(0); p < 2; p++ {
		d := f.describe(t, topic, p)
		require.Equal(t, statemachine.Stopped, d.State)
		l, _ := f.dest.Log(topic, p)
		require.Equal(t, ends[p]+1, l.LogEndOffset(), "partition %d: one barrier batch after the mirrored data", p)
		dst := readLog(t, l)
		ct, err := dst[len(dst)-1].ControlType()
		require.NoError(t, err)
		require.Equal(t, records.ControlMirrorPIDReset, ct)
		require.False(t, f.dest.ReadOnly(topic, p))
		off, err := f.dest.Produce(ctx, topic, p, clientWrite(t, "after-failover"))
		require.NoError(t, err)
		require.Equal(t, ends[p]+1, off, "partition %d: a client write lands after the barrier", p)
	}
}

// equalOffsets reports whether got holds exactly want.
func equalOffsets(got, want map[kmirror.TopicPartition]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for tp, off := range want {
		if g, ok := got[tp]; !ok || g != off {
			return false
		}
	}
	return true
}

// TestOlderSourceRestart stops cluster C's broker while kmirror mirrors from it and starts
// it again (kafkatest.StopBroker/StartBroker on C): the mirror reconnects and catches up,
// byte for byte, with what was produced after the restart.
func TestOlderSourceRestart(t *testing.T) {
	brokers := kafkatest.ClusterC(t)
	cl := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	kafkatest.CreateTopic(t, cl, topic, 1, 1, nil)
	pc := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, pc, topic, 0, "before", 100, 25)
	f := startFacade(t, brokers, "restart-c", -1, map[string]string{kmirror.KeyTopicsInclude: topic})
	f.start(t, topic)
	f.waitCaughtUp(t, cl, topic, 0)
	require.NotEmpty(t, kafkatest.SegmentFiles(t, kafkatest.C, 1, topic, 0), "C's data directory holds the partition")

	kafkatest.StopBroker(t, kafkatest.C, 1)
	kafkatest.StartBroker(t, kafkatest.C, 1)
	kafkatest.WaitForLeaders(t, cl, topic)
	produce(t, pc, topic, 0, "after", 100, 25)
	require.EqualValues(t, 200, f.waitCaughtUp(t, cl, topic, 0))
	l, err := f.dest.Log(topic, 0)
	require.NoError(t, err)
	requireSameBatches(t, topic, readSource(t, cl, topic, 0).Batches, readLog(t, l))
	require.Equal(t, statemachine.Mirroring, f.describe(t, topic, 0).State)
}
