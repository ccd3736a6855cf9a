package metasync

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/localdest"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// fakeSource is a SourceAdmin over fixed topics and configs.
type fakeSource struct {
	topics  []SourceTopic
	configs map[string]map[string]string
}

func (f *fakeSource) ClusterID(context.Context) (string, error)         { return "src", nil }
func (f *fakeSource) ListTopics(context.Context) ([]SourceTopic, error) { return f.topics, nil }
func (f *fakeSource) TopicConfigs(_ context.Context, topics []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, t := range topics {
		out[t] = dest.CloneConfigs(f.configs[t])
	}
	return out, nil
}
func (f *fakeSource) ListGroups(context.Context) ([]string, error) { return nil, nil }
func (f *fakeSource) GroupOffsets(context.Context, string) (map[dest.TopicPartition]int64, error) {
	return nil, nil
}
func (f *fakeSource) Close() error { return nil }

func uuid(b byte) records.UUID { var u records.UUID; u[15] = b; return u }

// A mirror with its own topics.exclude and topic.properties.exclude discovers no
// internal topic and syncs no storage or placement config: a tiered source topic is
// created with the rest of its configs and without tiered storage.
func TestSyncNeverMirrorsInternalTopicsNorStorageConfigs(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{
		topics: []SourceTopic{
			{Name: "__consumer_offsets", TopicID: uuid(1), Partitions: 50, Internal: true},
			{Name: "__remote_log_metadata", TopicID: uuid(2), Partitions: 50},
			{Name: "__share_group_state", TopicID: uuid(3), Partitions: 50},
			{Name: "secret", TopicID: uuid(4), Partitions: 1},
			{Name: "tiered", TopicID: uuid(5), Partitions: 2},
		},
		configs: map[string]map[string]string{"tiered": {
			"remote.storage.enable": "true", "local.retention.ms": "60000", "local.retention.bytes": "1048576",
			"remote.log.copy.disable": "false", "leader.replication.throttled.replicas": "*",
			"retention.ms": "604800000", "segment.bytes": "1000000", "cleanup.policy": "delete",
		}},
	}
	ctl, err := controller.OpenController(ctx, &controller.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{controller.KeyBootstrapServers: "127.0.0.1:1",
		controller.KeyTopicsInclude: ".*", controller.KeyTopicsExclude: "secret",
		controller.KeyTopicPropertiesExcl: "segment.bytes"}))
	d := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	s, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Source: src, Destination: d})
	require.NoError(t, err)
	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	require.Equal(t, 1, st.TopicsDiscovered)
	require.Equal(t, 1, st.TopicsCreated)
	for _, topic := range []string{"__consumer_offsets", "__remote_log_metadata", "__share_group_state", "secret"} {
		_, known := ctl.Topic(topic)
		require.False(t, known, topic)
		_, created := d.Topic(topic)
		require.False(t, created, topic)
	}
	spec, ok := d.Topic("tiered")
	require.True(t, ok)
	require.Equal(t, map[string]string{"retention.ms": "604800000", "cleanup.policy": "delete"}, spec.Configs)
}

// A remote.storage.enable=true copied from the source before it was never synced is
// turned off on the mirror topic, so that its partitions can be recovered.
func TestSyncTurnsOffTieredStorageCopiedFromTheSource(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{
		topics:  []SourceTopic{{Name: "tiered", TopicID: uuid(5), Partitions: 1}},
		configs: map[string]map[string]string{"tiered": {"remote.storage.enable": "true", "retention.ms": "1000"}},
	}
	ctl, err := controller.OpenController(ctx, &controller.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{controller.KeyBootstrapServers: "127.0.0.1:1"}))
	_, err = ctl.StartTopics(ctx, "m", []controller.TopicMeta{{Name: "tiered", TopicID: uuid(5), NumPartitions: 1}}, nil, nil)
	require.NoError(t, err)
	d := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	require.NoError(t, d.CreateTopic(ctx, dest.TopicSpec{Name: "tiered", TopicID: uuid(5), Partitions: 1,
		Configs: map[string]string{"remote.storage.enable": "true", "retention.ms": "1000"}})) // what the old sync created
	s, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Source: src, Destination: d})
	require.NoError(t, err)
	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	spec, _ := d.Topic("tiered")
	require.Equal(t, "false", spec.Configs["remote.storage.enable"])
	require.Equal(t, 1, st.ConfigsChanged)

	// A value the destination set itself (the source has none) is the operator's: left alone.
	src.configs["tiered"] = map[string]string{"retention.ms": "1000"}
	require.NoError(t, d.AlterTopicConfigs(ctx, "tiered", map[string]string{"remote.storage.enable": "true"}))
	_, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	spec, _ = d.Topic("tiered")
	require.Equal(t, "true", spec.Configs["remote.storage.enable"])
}

// An internal topic an earlier version started (topics.exclude had replaced the
// built-in exclusion) is stopped by the next sync cycle.
func TestSyncStopsInternalTopicsStartedBefore(t *testing.T) {
	ctx := context.Background()
	bs := "127.0.0.1:1"
	log := &controller.MemoryControllerLog{}
	_, err := log.Append(ctx, []records.ControllerRecord{
		{Mirror: &records.ClusterMirrorRecord{MirrorName: "m", Configs: []records.ConfigEntry{
			{Name: controller.KeyBootstrapServers, Value: &bs}}}},
		{TopicState: &records.MirrorTopicStateChangeRecord{TopicID: uuid(2), TopicName: "__remote_log_metadata",
			MirrorName: "m", DesiredState: int8(statemachine.DesiredMirroring)}},
		{TopicState: &records.MirrorTopicStateChangeRecord{TopicID: uuid(5), TopicName: "orders",
			MirrorName: "m", DesiredState: int8(statemachine.DesiredMirroring)}},
	})
	require.NoError(t, err)
	ctl, err := controller.OpenController(ctx, log)
	require.NoError(t, err)
	src := &fakeSource{topics: []SourceTopic{{Name: "__remote_log_metadata", TopicID: uuid(2), Partitions: 50},
		{Name: "orders", TopicID: uuid(5), Partitions: 1}}}
	d := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	s, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Source: src, Destination: d})
	require.NoError(t, err)
	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	require.Equal(t, 1, st.InternalTopicsStopped)
	ts, _ := ctl.Topic("__remote_log_metadata")
	require.Equal(t, statemachine.DesiredStopped, ts.Desired)
	ts, _ = ctl.Topic("orders")
	require.Equal(t, statemachine.DesiredMirroring, ts.Desired)
	_, created := d.Topic("__remote_log_metadata")
	require.False(t, created)
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, st.InternalTopicsStopped, "stopped once")
}
