package metasync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/localdest"
	"github.com/kmirror/kmirror/records"
)

// shareAlter sets the start offsets of share group on the source (AlterShareGroupOffsets,
// what kafka-share-groups.sh --reset-offsets sends).
func shareAlter(t *testing.T, cl *kgo.Client, group string, offs map[dest.TopicPartition]int64) {
	t.Helper()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	byTopic := map[string][]kmsg.AlterShareGroupOffsetsRequestTopicPartition{}
	for tp, off := range offs {
		p := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		p.Partition, p.StartOffset = tp.Partition, off
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	for topic, ps := range byTopic {
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic, rt.Partitions = topic, ps
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			require.NoError(t, kerr.ErrorForCode(p.ErrorCode), "%s-%d", rt.Topic, p.Partition)
		}
	}
}

// fillDest appends n one-record batches to a destination partition.
func fillDest(t *testing.T, d dest.Destination, topic string, p int32, n int) {
	t.Helper()
	l, err := d.Log(topic, p)
	require.NoError(t, err)
	for range n {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: l.LogEndOffset(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]records.Record{{Value: []byte("v")}})
		require.NoError(t, err)
		require.NoError(t, l.Append(b))
	}
}

func TestShareGroupSyncOnKfake(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t)
	require.NoError(t, kc.CreateTopic("orders", 2, nil))
	require.NoError(t, kc.CreateTopic("held", 1, nil))
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for _, tp := range []dest.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}, {Topic: "held", Partition: 0}} {
		for range 30 {
			recs = append(recs, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte("v")})
		}
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())

	ctl, err := controller.OpenController(ctx, &controller.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{controller.KeyBootstrapServers: kc.ListenAddrs()[0],
		controller.KeyTopicsInclude: ".*", controller.KeyGroupsExclude: "skip.*"}))
	mc, _ := ctl.Mirror("m")
	src, err := NewKafkaSourceAdmin(mc.Config)
	require.NoError(t, err)
	defer src.Close()
	d := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	s, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Source: src, Destination: d})
	require.NoError(t, err)

	st, err := s.SyncOnce(ctx) // discovery and creation
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	require.Equal(t, 2, st.TopicsCreated)
	_, err = ctl.PauseTopics(ctx, "m", []string{"held"}, -1)
	require.NoError(t, err)
	fillDest(t, d, "orders", 0, 10) // the destination lags: 10 of 30 mirrored
	l1, err := d.Log("orders", 1)
	require.NoError(t, err)
	require.NoError(t, l1.TruncateFullyAndStartAt(5))
	fillDest(t, d, "orders", 1, 10)
	fillDest(t, d, "held", 0, 10)

	p0, p1, held := dest.TopicPartition{Topic: "orders", Partition: 0}, dest.TopicPartition{Topic: "orders", Partition: 1}, dest.TopicPartition{Topic: "held", Partition: 0}
	shareAlter(t, cl, "sg", map[dest.TopicPartition]int64{p0: 25, p1: 2, held: 3})
	shareAlter(t, cl, "skip-me", map[dest.TopicPartition]int64{p0: 3})
	shareAlter(t, cl, "busy", map[dest.TopicPartition]int64{p0: 3})
	d.SetGroupActive("busy", true)
	shareAlter(t, cl, "live", map[dest.TopicPartition]int64{p0: 3})
	shareJoin(t, cl, "live", "orders") // a member on the source: not inactive

	groups, err := src.InactiveShareGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"busy", "sg", "skip-me"}, groups)
	starts, err := src.ShareStartOffsets(ctx, "sg")
	require.NoError(t, err)
	require.Equal(t, map[dest.TopicPartition]int64{p0: 25, p1: 2, held: 3}, starts)

	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	require.Equal(t, 1, st.ShareGroupsSynced)
	require.Equal(t, 2, st.ShareOffsetsSynced)
	require.Equal(t, 1, st.ShareGroupsSkipped)
	require.Equal(t, map[dest.TopicPartition]int64{p0: 10, p1: 5}, d.ShareStartOffsets("sg"),
		"25 above the destination log end is clamped to 10, 2 below its log start to 5; the PAUSED topic is not synced")
	for _, g := range []string{"skip-me", "busy", "live"} {
		require.Nil(t, d.ShareStartOffsets(g), g)
	}
	require.Empty(t, d.CommittedOffsets("sg"), "share offsets are not consumer-group offsets")

	// The destination catches up: the offset follows; then the source goes back: it does not.
	fillDest(t, d, "orders", 0, 10)
	shareAlter(t, cl, "sg", map[dest.TopicPartition]int64{p0: 15})
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.ShareOffsetsSynced)
	require.Equal(t, int64(15), d.ShareStartOffsets("sg")[p0])
	shareAlter(t, cl, "sg", map[dest.TopicPartition]int64{p0: 4})
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, st.ShareOffsetsSynced)
	require.Equal(t, int64(15), d.ShareStartOffsets("sg")[p0], "never backwards")

	// A partition that is not actually MIRRORING (SyncConfig.Mirroring) is not synced.
	fillDest(t, d, "orders", 0, 10)
	fillDest(t, d, "orders", 1, 10)
	shareAlter(t, cl, "sg", map[dest.TopicPartition]int64{p0: 18, p1: 12})
	s2, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Source: src, Destination: d,
		Mirroring: func(topic string, partition int32) bool { return partition == 1 }})
	require.NoError(t, err)
	st, err = s2.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.ShareOffsetsSynced)
	require.Equal(t, map[dest.TopicPartition]int64{p0: 15, p1: 12}, d.ShareStartOffsets("sg"), "p0 is not MIRRORING: kept at 15")
}

// shareJoin makes a member join share group (ShareGroupHeartbeat, epoch 0).
func shareJoin(t *testing.T, cl *kgo.Client, group, topic string) {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = group, "AAAAAAAAAAAAAAAAAAAAAA", 0
	req.SubscribedTopicNames = []string{topic}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
}

// noShares is a share source of a cluster without share groups.
type noShares struct{ SourceAdmin }

func (noShares) ShareGroupNames(context.Context) ([]string, error) {
	return nil, ErrShareGroupsUnsupported
}
func (noShares) InactiveShareGroups(context.Context) ([]string, error) {
	return nil, ErrShareGroupsUnsupported
}
func (noShares) ShareStartOffsets(context.Context, string) (map[dest.TopicPartition]int64, error) {
	return nil, errors.New("not called")
}

func TestShareGroupSyncSkipsSourceWithoutShares(t *testing.T) {
	ctx := context.Background()
	site := localdest.NewMemory("site", fetcher.MemoryLogOptions{})
	require.NoError(t, site.CreateTopic(ctx, dest.TopicSpec{Name: "orders", TopicID: records.UUID{1}, Partitions: 1}))
	ctl, err := controller.OpenController(ctx, &controller.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{controller.KeyBootstrapServers: "x:1", controller.KeyTopicsInclude: ".*"}))
	d := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	s, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Source: noShares{NewLocalSourceAdmin(site, nil)}, Destination: d})
	require.NoError(t, err)
	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors, "a source without share groups is not an error")
	require.Equal(t, 1, st.TopicsCreated)
	require.Zero(t, st.ShareGroupsSynced)
}
