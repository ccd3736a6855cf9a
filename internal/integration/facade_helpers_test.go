package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	kmirror "github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// facade is a mirror.Mirror over a memory destination, with the default source factory
// (fetcher.KafkaSource and KafkaSourceAdmin) and the default peer (the KIP's admin RPCs,
// which a plain Kafka cluster does not advertise: no last mirrored epoch, mirror from
// scratch).
type facade struct {
	m    *kmirror.Mirror
	dest *kmirror.LocalDestination
	name string
}

// startFacade creates mirror name from brokers with configs on top of a short fetch wait,
// and a periodic metadata sync every syncEvery. Everything is closed when the test ends.
func startFacade(t testing.TB, brokers []string, name string, syncEvery time.Duration, configs map[string]string) *facade {
	t.Helper()
	dest := kmirror.NewMemoryDestination("dst-"+name, fetcher.MemoryLogOptions{})
	m, err := kmirror.New(kmirror.Config{Destination: dest, SyncInterval: syncEvery, FetchIdleWait: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Close())
		require.NoError(t, dest.Close())
	})
	cfg := map[string]string{kmirror.KeyBootstrapServers: strings.Join(brokers, ","), kmirror.KeyFetchWaitMaxMs: "100"}
	for k, v := range configs {
		cfg[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, m.CreateClusterMirror(ctx, name, cfg))
	return &facade{m: m, dest: dest, name: name}
}

// start starts topics and waits until every partition is MIRRORING.
func (f *facade) start(t testing.TB, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := f.m.StartMirrorTopics(ctx, f.name, topics, kmirror.StartOptions{})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err, "start %s", r.Topic)
	}
	require.NoError(t, f.m.WaitForStates(ctx, f.name, topics, statemachine.Mirroring))
}

// describe returns the description of topic/partition (states and lags).
func (f *facade) describe(t testing.TB, topic string, partition int32) kmirror.PartitionDescription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds, err := f.m.DescribeClusterMirrors(ctx, []string{f.name}, kmirror.DescribeOptions{
		TopicPartitions: map[string][]int32{topic: {partition}}, IncludeStates: true, IncludeLags: true})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Len(t, ds[0].Topics, 1)
	require.Len(t, ds[0].Topics[0].Partitions, 1)
	return ds[0].Topics[0].Partitions[0]
}

// waitCaughtUp waits until the destination log of topic/partition ends at the source high
// watermark, and returns that offset.
func (f *facade) waitCaughtUp(t testing.TB, src *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	var hw int64
	waitFor(t, waitTimeout, fmt.Sprintf("the mirror of %s-%d to catch up", topic, partition), func() (bool, string) {
		var err error
		hw, err = sourceHighWatermark(src, fetcher.TopicPartition{Topic: topic, Partition: partition})
		if err != nil {
			return false, err.Error()
		}
		l, err := f.dest.Log(topic, partition)
		if err != nil {
			return false, err.Error()
		}
		return l.LogEndOffset() == hw, fmt.Sprintf("source high watermark %d, destination log end %d", hw, l.LogEndOffset())
	})
	return hw
}

// commitSourceOffsets commits offsets for group on the source as a simple (generation -1,
// memberless) commit, which Kafka accepts for a group without members.
func commitSourceOffsets(t testing.TB, cl *kgo.Client, group, topic string, offsets map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, off := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, off, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, t2 := range resp.Topics {
		for _, p := range t2.Partitions {
			require.NoError(t, kerr.ErrorForCode(p.ErrorCode), "commit %s %s-%d", group, t2.Topic, p.Partition)
		}
	}
}

// alterSourceTopicConfig sets one config of topic on the source (IncrementalAlterConfigs).
func alterSourceTopicConfig(t testing.TB, cl *kgo.Client, topic, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Resources, 1)
	require.NoError(t, kerr.ErrorForCode(resp.Resources[0].ErrorCode), "alter %s %s=%s", topic, key, value)
}
