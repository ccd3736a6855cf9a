package dataplane

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// noDescriptorsDest is a memory destination whose logs from partition failFrom on
// cannot be opened, as when the process is out of file descriptors.
type noDescriptorsDest struct {
	*mirror.LocalDestination
	failFrom int32
}

func (d noDescriptorsDest) Log(topic string, p int32) (fetcher.Log, error) {
	if p >= d.failFrom {
		return nil, fmt.Errorf("open partition %s-%d: %w", topic, p, syscall.EMFILE)
	}
	return d.LocalDestination.Log(topic, p)
}

// TestCreateTopicsOutOfDescriptorsCreatesNothing: a CreateTopics whose third
// partition cannot be opened answers KAFKA_STORAGE_ERROR naming the cause, and leaves
// no half-created topic behind (before, the topic stayed registered with partitions
// that could never be opened); the name can be created again once logs open.
func TestCreateTopicsOutOfDescriptorsCreatesNothing(t *testing.T) {
	inner := mirror.NewMemoryDestination("c", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { _ = inner.Close() })
	dst := &noDescriptorsDest{LocalDestination: inner, failFrom: 2}
	dp, err := New(Config{Destination: dst, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dp.Close() })
	create := func() kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "orders", 4, 1
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := dp.Serve(context.Background(), req)
		require.NoError(t, err)
		return resp.(*kmsg.CreateTopicsResponse).Topics[0]
	}
	got := create()
	require.Equal(t, int16(codeKafkaStorageError), got.ErrorCode)
	require.Contains(t, *got.ErrorMessage, "too many open files")
	require.Contains(t, *got.ErrorMessage, "not created")
	_, ok := inner.Topic("orders")
	require.False(t, ok, "the half-created topic was removed")

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("orders")
	md.Topics = []kmsg.MetadataRequestTopic{mt}
	resp, err := dp.Serve(context.Background(), md)
	require.NoError(t, err)
	require.Equal(t, int16(admin.CodeUnknownTopicOrPartition), resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode)

	dst.failFrom = 1 << 30 // descriptors again
	got = create()
	require.Zero(t, got.ErrorCode, "created once its logs open")
	spec, ok := inner.Topic("orders")
	require.True(t, ok)
	require.Equal(t, int32(4), spec.Partitions)
}
