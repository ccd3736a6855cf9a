package mirror

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// syncWithInternal adds an internal topic to a source's listing (kfake does not list
// __consumer_offsets).
type syncWithInternal struct{ SourceAdmin }

func (s syncWithInternal) ListTopics(ctx context.Context) ([]metasync.SourceTopic, error) {
	ts, err := s.SourceAdmin.ListTopics(ctx)
	return append(ts, metasync.SourceTopic{Name: "__consumer_offsets", TopicID: records.UUID{9, 9}, Partitions: 50, Internal: true}), err
}

func syncSaramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	return cfg
}

// syncCommitSource commits offsets for group on the source with a simple OffsetCommit
// (generation -1, no member), as an admin tool does.
func syncCommitSource(t *testing.T, addrs []string, group string, offs map[TopicPartition]int64) {
	t.Helper()
	client, err := sarama.NewClient(addrs, syncSaramaConfig())
	require.NoError(t, err)
	defer client.Close()
	coord, err := client.Coordinator(group)
	require.NoError(t, err)
	req := &sarama.OffsetCommitRequest{Version: 7, ConsumerGroup: group, ConsumerGroupGeneration: -1}
	for tp, off := range offs {
		req.AddBlock(tp.Topic, tp.Partition, off, 0, "")
	}
	resp, err := coord.CommitOffset(req)
	require.NoError(t, err)
	for topic, ps := range resp.Errors {
		for p, kerr := range ps {
			require.ErrorIs(t, kerr, sarama.ErrNoError, "%s-%d", topic, p)
		}
	}
}

// syncFillLog appends n single-record batches to a destination partition.
func syncFillLog(t *testing.T, d Destination, topic string, p int32, n int) {
	t.Helper()
	l, err := d.Log(topic, p)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: l.LogEndOffset(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []records.Record{{Value: []byte("v")}})
		require.NoError(t, err)
		require.NoError(t, l.Append(b))
	}
}

func syncErrTopics(errs []error, target error) []string {
	var out []string
	for _, e := range errs {
		var se *metasync.SyncError
		if errors.As(e, &se) && errors.Is(e, target) {
			out = append(out, se.Topic)
		}
	}
	return out
}

func TestSyncOnKfake(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t, kfake.ClusterID("source-cluster"))
	require.NoError(t, kc.CreateTopic("orders", 3, map[string]string{"retention.ms": "1000", "segment.bytes": "1048576", "min.insync.replicas": "1"}))
	for _, topic := range []string{"events", "logs", "payments", "audit"} {
		require.NoError(t, kc.CreateTopic(topic, 2, nil))
	}
	idOf := func(topic string) records.UUID { return records.UUID(kc.TopicInfo(topic).TopicID) }
	mc, err := ParseMirrorConfig(map[string]string{KeyBootstrapServers: kc.ListenAddrs()[0]})
	require.NoError(t, err)
	src, err := metasync.NewKafkaSourceAdmin(mc)
	require.NoError(t, err)
	defer src.Close()
	cid, err := src.ClusterID(ctx)
	require.NoError(t, err)
	require.Equal(t, "source-cluster", cid)

	ctl, _ := testController(t)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{
		KeyBootstrapServers: kc.ListenAddrs()[0], KeyTopicsInclude: ".*", KeyTopicsExclude: "audit",
		KeyGroupsExclude: "ignored", KeyTopicPropertiesExcl: "segment.*,min.insync.replicas",
	}))
	dest := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	s, err := metasync.NewSyncer(metasync.SyncConfig{Mirror: "m", Controller: ctl, Source: syncWithInternal{src}, Destination: dest})
	require.NoError(t, err)

	// Cycle 1: discovery and creation with the source ids, partition counts and configs.
	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	require.Equal(t, 4, st.TopicsDiscovered)
	require.Equal(t, 4, st.TopicsCreated)
	require.Equal(t, []string{"events", "logs", "orders", "payments"}, topicNames(ctl.Topics("m")))
	for _, ts := range ctl.Topics("m") {
		require.Equal(t, statemachine.DesiredMirroring, ts.Desired)
		require.Equal(t, idOf(ts.Topic), ts.TopicID)
	}
	orders, ok := dest.Topic("orders")
	require.True(t, ok)
	require.Equal(t, TopicSpec{Name: "orders", TopicID: idOf("orders"), Partitions: 3, Configs: map[string]string{"retention.ms": "1000"}}, orders,
		"segment.* and min.insync.replicas are excluded")
	_, ok = dest.Topic("audit")
	require.False(t, ok, "excluded topic not mirrored")
	_, ok = dest.Topic("__consumer_offsets")
	require.False(t, ok, "internal topic not mirrored")
	_, known := ctl.Topic("audit")
	require.False(t, known)

	// Changes at the source and on the controller.
	_, err = ctl.PauseTopics(ctx, "m", []string{"events"}, -1)
	require.NoError(t, err)
	_, err = ctl.StopTopics(ctx, "m", []string{"logs"}, nil, -1)
	require.NoError(t, err)
	adm, err := sarama.NewClusterAdmin(kc.ListenAddrs(), syncSaramaConfig())
	require.NoError(t, err)
	defer adm.Close()
	require.NoError(t, adm.CreatePartitions("orders", 5, nil, false))
	require.NoError(t, adm.AlterConfig(sarama.TopicResource, "orders", map[string]*string{"retention.ms": ptr("2000"), "segment.bytes": ptr("2097152")}, false))
	require.NoError(t, kc.DeleteTopic("payments"))
	require.NoError(t, kc.CreateTopic("payments", 2, nil))

	// Destination data and offsets for the group sync.
	syncFillLog(t, dest, "orders", 0, 10)
	l1, err := dest.Log("orders", 1)
	require.NoError(t, err)
	require.NoError(t, l1.TruncateFullyAndStartAt(5))
	syncFillLog(t, dest, "orders", 2, 10)
	syncFillLog(t, dest, "events", 0, 10)
	syncFillLog(t, dest, "logs", 0, 10)
	require.NoError(t, dest.CommitOffsets("g", map[TopicPartition]int64{{Topic: "orders", Partition: 2}: 8, {Topic: "logs", Partition: 0}: 1}))
	committed := map[TopicPartition]int64{
		{Topic: "orders", Partition: 0}: 25, // beyond the mirrored data: clamped to the destination LEO 10
		{Topic: "orders", Partition: 1}: 2,  // below the destination log start 5
		{Topic: "orders", Partition: 2}: 6,  // the destination group is at 8: never rewound
		{Topic: "events", Partition: 0}: 4,  // PAUSED: not synced
		{Topic: "logs", Partition: 0}:   4,  // STOPPED: never overwritten
	}
	syncCommitSource(t, kc.ListenAddrs(), "g", committed)
	syncCommitSource(t, kc.ListenAddrs(), "busy", map[TopicPartition]int64{{Topic: "orders", Partition: 0}: 3})
	syncCommitSource(t, kc.ListenAddrs(), "ignored", map[TopicPartition]int64{{Topic: "orders", Partition: 0}: 3})
	dest.SetGroupActive("busy", true)
	got, err := src.GroupOffsets(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, committed, got)
	groups, err := src.ListGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"busy", "g", "ignored"}, groups)

	// Cycle 2.
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"payments"}, syncErrTopics(st.Errors, metasync.ErrSourceTopicRecreated), "errors: %v", st.Errors)
	require.Len(t, st.Errors, 1)
	require.Equal(t, 0, st.TopicsDiscovered)
	require.Equal(t, 0, st.TopicsCreated)
	require.Equal(t, 2, st.PartitionsGrown)
	require.Equal(t, 1, st.ConfigsChanged)
	require.Equal(t, 1, st.GroupsSynced)
	require.Equal(t, 2, st.OffsetsSynced)
	require.Equal(t, 1, st.GroupsSkipped)
	orders, _ = dest.Topic("orders")
	require.Equal(t, int32(5), orders.Partitions)
	require.Equal(t, map[string]string{"retention.ms": "2000"}, orders.Configs)
	payments, _ := dest.Topic("payments")
	require.NotEqual(t, idOf("payments"), payments.TopicID, "a recreated source topic is not recreated")
	require.Equal(t, map[TopicPartition]int64{{Topic: "orders", Partition: 0}: 10, {Topic: "orders", Partition: 1}: 5, {Topic: "orders", Partition: 2}: 8, {Topic: "logs", Partition: 0}: 1}, dest.CommittedOffsets("g"))
	require.Nil(t, dest.CommittedOffsets("busy"))
	require.Nil(t, dest.CommittedOffsets("ignored"))

	// Cycle 3: nothing changed, and a source group that went backwards is not followed.
	syncCommitSource(t, kc.ListenAddrs(), "g", map[TopicPartition]int64{{Topic: "orders", Partition: 0}: 3})
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, metasync.SyncStats{GroupsSkipped: 1, Errors: st.Errors}, st)
	require.Len(t, st.Errors, 1)
	require.Equal(t, int64(10), dest.CommittedOffsets("g")[TopicPartition{Topic: "orders", Partition: 0}])
}

func topicNames(ts []TopicState) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Topic)
	}
	return out
}

func TestSyncLocalSource(t *testing.T) {
	ctx := context.Background()
	// The source site is a kmirror destination (reverse mirroring).
	srcDest := NewMemoryDestination("site-a", fetcher.MemoryLogOptions{})
	require.NoError(t, srcDest.CreateTopic(ctx, TopicSpec{Name: "orders", TopicID: id(1), Partitions: 2, Configs: map[string]string{"retention.ms": "5", "mirror.support.unclean.leader.election": "true"}}))
	require.NoError(t, srcDest.CommitOffsets("g", map[TopicPartition]int64{{Topic: "orders", Partition: 0}: 3}))
	src := metasync.NewLocalSourceAdmin(srcDest, func() []string { return []string{"g"} })
	cid, err := src.ClusterID(ctx)
	require.NoError(t, err)
	require.Equal(t, "site-a", cid)
	ts, err := src.ListTopics(ctx)
	require.NoError(t, err)
	require.Equal(t, []metasync.SourceTopic{{Name: "orders", TopicID: id(1), Partitions: 2}}, ts)
	cfgs, err := src.TopicConfigs(ctx, []string{"orders", "nope"})
	require.Error(t, err)
	var te *metasync.SourceTopicError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "nope", te.Topic)
	require.Equal(t, map[string]map[string]string{"orders": {"retention.ms": "5", "mirror.support.unclean.leader.election": "true"}}, cfgs)

	ctl, _ := testController(t)
	require.NoError(t, ctl.CreateMirror(ctx, "back", map[string]string{KeyBootstrapServers: "site-a:9092", KeyTopicsInclude: "ord.*"}))
	dst := NewMemoryDestination("site-b", fetcher.MemoryLogOptions{})
	syncer, err := metasync.NewSyncer(metasync.SyncConfig{Mirror: "back", Controller: ctl, Source: src, Destination: dst})
	require.NoError(t, err)
	st, err := syncer.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	require.Equal(t, 1, st.TopicsCreated)
	got, _ := dst.Topic("orders")
	require.Equal(t, TopicSpec{Name: "orders", TopicID: id(1), Partitions: 2, Configs: map[string]string{"retention.ms": "5"}}, got, "mirror.* never synced by default")
	require.Equal(t, map[TopicPartition]int64{{Topic: "orders", Partition: 0}: 0}, dst.CommittedOffsets("g"), "clamped to the empty destination log")

	// The source grows a partition and the destination topic id collides.
	require.NoError(t, srcDest.CreatePartitions(ctx, "orders", 4))
	st, err = syncer.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.PartitionsGrown)

	other := NewMemoryDestination("site-c", fetcher.MemoryLogOptions{})
	require.NoError(t, other.CreateTopic(ctx, TopicSpec{Name: "orders", TopicID: id(7), Partitions: 1}))
	s2, err := metasync.NewSyncer(metasync.SyncConfig{Mirror: "back", Controller: ctl, Source: src, Destination: other})
	require.NoError(t, err)
	st, err = s2.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"orders"}, syncErrTopics(st.Errors, metasync.ErrDestinationTopicMismatch))
	require.Equal(t, 0, st.OffsetsSynced, "no offsets into a mismatched topic")

	// Source topic deleted: reported, not propagated.
	empty := metasync.NewLocalSourceAdmin(NewMemoryDestination("x", fetcher.MemoryLogOptions{}), nil)
	s3, err := metasync.NewSyncer(metasync.SyncConfig{Mirror: "back", Controller: ctl, Source: empty, Destination: dst})
	require.NoError(t, err)
	st, err = s3.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"orders"}, syncErrTopics(st.Errors, metasync.ErrSourceTopicMissing))
	_, ok := dst.Topic("orders")
	require.True(t, ok)
	groups, err := empty.ListGroups(ctx)
	require.NoError(t, err)
	require.Empty(t, groups)
}

func TestSyncConfigAndErrors(t *testing.T) {
	var cfg metasync.SyncConfig
	err := cfg.Validate()
	require.ErrorContains(t, err, "Mirror is required")
	require.ErrorContains(t, err, "Destination is required")
	ctl, _ := testController(t)
	dst := NewMemoryDestination("d", fetcher.MemoryLogOptions{})
	cfg = metasync.SyncConfig{Mirror: "m", Controller: ctl, Source: metasync.NewLocalSourceAdmin(dst, nil), Destination: dst}
	require.NoError(t, cfg.Validate())
	require.Nil(t, cfg.Logger, "Validate never changes the config")
	s, err := metasync.NewSyncer(cfg)
	require.NoError(t, err)
	_, err = s.SyncOnce(context.Background())
	require.Error(t, err, "unknown mirror")

}

func TestClampGroupOffset(t *testing.T) {
	for _, tc := range []struct{ committed, start, end, want int64 }{
		{5, 0, 10, 5},
		{25, 0, 10, 10},
		{2, 5, 10, 5},
		{0, 0, 0, 0},
		{7, 7, 7, 7},
	} {
		require.Equal(t, tc.want, metasync.ClampGroupOffset(tc.committed, tc.start, tc.end), "%+v", tc)
	}
}

// syncFlaky fails chosen SourceAdmin calls.
type syncFlaky struct {
	SourceAdmin
	failConfigs, failGroups, failOffsets bool
}

var errSyncInjected = errors.New("injected")

func (s *syncFlaky) TopicConfigs(ctx context.Context, topics []string) (map[string]map[string]string, error) {
	if s.failConfigs {
		return nil, errSyncInjected
	}
	return s.SourceAdmin.TopicConfigs(ctx, topics)
}

func (s *syncFlaky) ListGroups(ctx context.Context) ([]string, error) {
	if s.failGroups {
		return nil, errSyncInjected
	}
	return s.SourceAdmin.ListGroups(ctx)
}

func (s *syncFlaky) GroupOffsets(ctx context.Context, group string) (map[TopicPartition]int64, error) {
	if s.failOffsets {
		return nil, errSyncInjected
	}
	return s.SourceAdmin.GroupOffsets(ctx, group)
}

func TestSyncSourceFailures(t *testing.T) {
	ctx := context.Background()
	site := NewMemoryDestination("a", fetcher.MemoryLogOptions{})
	require.NoError(t, site.CreateTopic(ctx, TopicSpec{Name: "t", TopicID: id(1), Partitions: 1, Configs: map[string]string{"cleanup.policy": "compact"}}))
	require.NoError(t, site.CommitOffsets("g", map[TopicPartition]int64{{Topic: "t", Partition: 0}: 1}))
	src := &syncFlaky{SourceAdmin: metasync.NewLocalSourceAdmin(site, func() []string { return []string{"g"} }), failConfigs: true, failGroups: true}
	ctl, _ := testController(t)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1", KeyTopicsInclude: "t"}))
	dst := NewMemoryDestination("b", fetcher.MemoryLogOptions{})
	s, err := metasync.NewSyncer(metasync.SyncConfig{Mirror: "m", Controller: ctl, Source: src, Destination: dst})
	require.NoError(t, err)

	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.TopicsDiscovered)
	require.Equal(t, 0, st.TopicsCreated, "not created without its configs")
	require.Len(t, st.Errors, 1)
	require.ErrorIs(t, st.Errors[0], errSyncInjected)
	_, ok := dst.Topic("t")
	require.False(t, ok)

	src.failConfigs = false
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.TopicsCreated)
	got, _ := dst.Topic("t")
	require.Equal(t, map[string]string{"cleanup.policy": "compact"}, got.Configs, "configs applied at creation")
	require.Len(t, st.Errors, 1, "listing groups failed")
	var se *metasync.SyncError
	require.ErrorAs(t, st.Errors[0], &se)
	require.Equal(t, "group", se.Op)
	require.Contains(t, se.Error(), "group *")

	src.failGroups, src.failOffsets = false, true
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Len(t, st.Errors, 1)
	require.ErrorAs(t, st.Errors[0], &se)
	require.Equal(t, "g", se.Group)

	src.failOffsets = false
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	require.Equal(t, 1, st.OffsetsSynced)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.SyncOnce(cancelled)
	require.ErrorIs(t, err, context.Canceled)
}

func ExampleClampGroupOffset() {
	// The source group committed 25, but the destination has mirrored offsets [0, 10).
	fmt.Println(metasync.ClampGroupOffset(25, 0, 10))
	// The source group is at 2, but the destination log starts at 5.
	fmt.Println(metasync.ClampGroupOffset(2, 5, 10))
	// Output:
	// 10
	// 5
}
