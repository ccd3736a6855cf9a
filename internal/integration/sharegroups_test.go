package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkatest"
	kmirror "github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
)

// resetShareOffsets sets the start offset of an inactive share group on one partition
// with Kafka's own tool (kafka-share-groups.sh --reset-offsets --to-offset --execute)
// from the harness's jars.
func resetShareOffsets(t testing.TB, brokers []string, group, topic string, partition int32, offset int64) {
	t.Helper()
	cp := os.Getenv(kafkatest.EnvClasspath)
	if cp == "" {
		t.Skipf("%s is not set: no Kafka tools", kafkatest.EnvClasspath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-cp", cp, "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
		"--bootstrap-server", strings.Join(brokers, ","), "--group", group, "--reset-offsets",
		"--topic", fmt.Sprintf("%s:%d", topic, partition), "--to-offset", fmt.Sprint(offset), "--execute")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kafka-share-groups --reset-offsets: %s", out)
}

// describeShareOffsets reads the source's start offsets of group with
// DescribeShareGroupOffsets, to check what Kafka's tool did.
func describeShareOffsets(t testing.TB, cl *kgo.Client, group string) map[kmirror.TopicPartition]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	out := map[kmirror.TopicPartition]int64{}
	for _, g := range resp.Groups {
		require.NoError(t, kerr.ErrorForCode(g.ErrorCode))
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				require.NoError(t, kerr.ErrorForCode(p.ErrorCode))
				out[kmirror.TopicPartition{Topic: tp.Topic, Partition: p.Partition}] = p.StartOffset
			}
		}
	}
	return out
}

func syncNow(t testing.TB, f *facade) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, f.m.Sync(ctx))
}

// TestShareGroupOffsetSync mirrors a topic of cluster A (Kafka 4.4, share.version 2) into
// a facade destination while Kafka's own tool sets the start offsets of inactive share
// groups: the metadata sync copies them to the destination, follows them forwards, never
// backwards, and leaves out a group that groups.exclude names.
func TestShareGroupOffsetSync(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.Brokers(t, kafkatest.A)
	cl := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	kafkatest.CreateTopic(t, cl, topic, 2, 3, nil)
	pc := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, pc, topic, 0, "p0", 100, 50)
	produce(t, pc, topic, 1, "p1", 100, 50)
	group, excluded := topic+"-sg", topic+"-excluded"
	resetShareOffsets(t, brokers, group, topic, 0, 40)
	resetShareOffsets(t, brokers, group, topic, 1, 70)
	resetShareOffsets(t, brokers, excluded, topic, 0, 50)
	p0, p1 := kmirror.TopicPartition{Topic: topic, Partition: 0}, kmirror.TopicPartition{Topic: topic, Partition: 1}
	require.Equal(t, map[kmirror.TopicPartition]int64{p0: 40, p1: 70}, describeShareOffsets(t, cl, group))

	f := startFacade(t, brokers, "shares", -1, map[string]string{
		kmirror.KeyTopicsInclude: topic, kmirror.KeyGroupsExclude: ".*-excluded"})
	f.start(t, topic)
	f.waitCaughtUp(t, cl, topic, 0)
	f.waitCaughtUp(t, cl, topic, 1)
	syncNow(t, f)
	require.Equal(t, map[kmirror.TopicPartition]int64{p0: 40, p1: 70}, f.dest.ShareStartOffsets(group))
	require.Nil(t, f.dest.ShareStartOffsets(excluded), "groups.exclude")
	require.Empty(t, f.dest.CommittedOffsets(group), "a share group is not a consumer group")

	// Forwards is followed; backwards is not.
	resetShareOffsets(t, brokers, group, topic, 0, 90)
	resetShareOffsets(t, brokers, group, topic, 1, 20)
	syncNow(t, f)
	require.Equal(t, map[kmirror.TopicPartition]int64{p0: 90, p1: 70}, f.dest.ShareStartOffsets(group),
		"p0 follows the source to 90; p1 stays at 70 although the source went back to 20")
}

// TestShareGroupOffsetClamp reads share groups from cluster A through the default source
// admin (KafkaShareSource over kgo) into a destination that holds less than the source:
// a start offset above the destination log end is clamped to it, one below the log start
// is raised to it, and neither is ever applied as it is. A share group with a member on the
// source is not inactive and is left alone; the consumer-group sync reports no error for
// the share groups Kafka lists among all groups.
func TestShareGroupOffsetClamp(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.Brokers(t, kafkatest.A)
	cl := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	info := kafkatest.CreateTopic(t, cl, topic, 2, 3, nil)
	pc := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, pc, topic, 0, "p0", 100, 50)
	produce(t, pc, topic, 1, "p1", 100, 50)
	group := topic + "-sg"
	resetShareOffsets(t, brokers, group, topic, 0, 80) // above the destination's end (30)
	resetShareOffsets(t, brokers, group, topic, 1, 5)  // below the destination's start (20)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ctl, err := kmirror.OpenController(ctx, &kmirror.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "clamp", map[string]string{kmirror.KeyBootstrapServers: strings.Join(brokers, ",")}))
	_, err = ctl.StartTopics(ctx, "clamp", []kmirror.TopicMeta{{Name: topic, TopicID: records.UUID(info.ID), NumPartitions: 2}}, nil, nil)
	require.NoError(t, err)
	mc, _ := ctl.Mirror("clamp")
	_, sa, err := kmirror.DefaultSourceFactory("clamp", mc.Config)
	require.NoError(t, err)
	defer sa.Close()
	shares, ok := sa.(metasync.ShareGroupSource)
	require.True(t, ok, "the default source admin reads share groups")
	live := topic + "-live"
	resetShareOffsets(t, brokers, live, topic, 0, 10)
	joinShareGroup(t, cl, live, topic)
	inactive, err := shares.InactiveShareGroups(ctx)
	require.NoError(t, err)
	require.Contains(t, inactive, group)
	require.NotContains(t, inactive, live, "a group with a member is active")

	d := kmirror.NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	defer d.Close()
	require.NoError(t, d.CreateTopic(ctx, kmirror.TopicSpec{Name: topic, TopicID: records.UUID(info.ID), Partitions: 2}))
	fillMemoryLog(t, d, topic, 0, 0, 30)
	fillMemoryLog(t, d, topic, 1, 20, 30)
	syncer, err := metasync.NewSyncer(metasync.SyncConfig{Mirror: "clamp", Controller: ctl, Source: sa, Destination: d})
	require.NoError(t, err)
	st, err := syncer.SyncOnce(ctx)
	require.NoError(t, err)
	for _, e := range st.Errors {
		var se *metasync.SyncError
		require.ErrorAs(t, e, &se)
		require.Equal(t, "acls", se.Op, "only the ACL sync fails (A has no authorizer): %v", e)
	}
	require.Equal(t, 1, st.ShareGroupsSynced)
	require.Equal(t, map[kmirror.TopicPartition]int64{{Topic: topic, Partition: 0}: 30, {Topic: topic, Partition: 1}: 20},
		d.ShareStartOffsets(group), "80 clamped to the log end 30; 5 raised to the log start 20")
	require.Nil(t, d.ShareStartOffsets(live))
}

// joinShareGroup makes a member join share group on the source (ShareGroupHeartbeat at
// member epoch 0, what a share consumer sends first); Kafka drops it after the share
// session timeout.
func joinShareGroup(t testing.TB, cl *kgo.Client, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = group, "kmirror-test-member-0001", 0
	req.SubscribedTopicNames = []string{topic}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode), "share group heartbeat")
}

// fillMemoryLog makes a destination partition hold n one-record batches from start.
func fillMemoryLog(t testing.TB, d kmirror.Destination, topic string, p int32, start int64, n int) {
	t.Helper()
	l, err := d.Log(topic, p)
	require.NoError(t, err)
	if start > 0 {
		require.NoError(t, l.TruncateFullyAndStartAt(start))
	}
	for range n {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: l.LogEndOffset(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]records.Record{{Value: []byte("v")}})
		require.NoError(t, err)
		require.NoError(t, l.Append(b))
	}
}
