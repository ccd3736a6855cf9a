package coordinator

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

func newKfake(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func kafkaCfg(c *kfake.Cluster, parts int32) KafkaConfig {
	return KafkaConfig{Brokers: c.ListenAddrs(), NumPartitions: parts, ReplicationFactor: 1, Timeout: 3 * time.Second}
}

func newKafkaStore(t testing.TB, cfg KafkaConfig) *KafkaStore {
	t.Helper()
	s, err := NewKafkaStore(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func stateRec(mirror string, p int32, st statemachine.State, se int32) records.StateRecord {
	return records.StateRecord{
		PartitionStateKey: &records.MirrorPartitionStateKey{MirrorName: mirror, TopicID: topicFoo, Partition: p},
		PartitionState:    &records.MirrorPartitionStateValue{State: int8(st), LeaderEpoch: 1, StateEpoch: se},
	}
}

func loadAll(t testing.TB, s Store, p, epoch int32) []records.StateRecord {
	t.Helper()
	var got []records.StateRecord
	require.NoError(t, s.Load(context.Background(), p, epoch, func(r records.StateRecord) error {
		got = append(got, r)
		return nil
	}))
	return got
}

func TestKafkaStoreTopic(t *testing.T) {
	c := newKfake(t)
	cfg := kafkaCfg(c, 4)
	newKafkaStore(t, cfg)
	// the same config again accepts the existing topic
	newKafkaStore(t, cfg)
	// a different partition count is refused
	cfg.NumPartitions = 5
	_, err := NewKafkaStore(context.Background(), cfg)
	require.ErrorIs(t, err, ErrTopicMismatch)

	// a non-compacted topic is refused
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	adm, err := sarama.NewClusterAdmin(c.ListenAddrs(), sc)
	require.NoError(t, err)
	defer adm.Close()
	require.NoError(t, adm.CreateTopic("plain", &sarama.TopicDetail{NumPartitions: 4, ReplicationFactor: 1}, false))
	cfg.NumPartitions, cfg.Topic = 4, "plain"
	_, err = NewKafkaStore(context.Background(), cfg)
	require.ErrorIs(t, err, ErrTopicMismatch)
	require.ErrorContains(t, err, "cleanup.policy")

	results, err := adm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: DefaultStateTopic}},
		sarama.DescribeConfigsOptions{})
	require.NoError(t, err)
	require.Len(t, results, 1)
	cfgs := map[string]string{}
	for _, e := range results[0].Configs {
		cfgs[e.Name] = e.Value
	}
	require.Equal(t, "compact", cfgs["cleanup.policy"])
	require.Equal(t, "1", cfgs["min.insync.replicas"])
}

func TestKafkaStoreAppendLoadAndZombie(t *testing.T) {
	c := newKfake(t)
	cfg := kafkaCfg(c, 2)
	ctx := context.Background()
	a := newKafkaStore(t, cfg)
	require.Empty(t, loadAll(t, a, 1, 1))
	require.NoError(t, a.Append(ctx, 1, 1, []records.StateRecord{stateRec("m", 0, statemachine.Preparing, 1), stateRec("m", 1, statemachine.Preparing, 1)}))
	require.NoError(t, a.Append(ctx, 1, 1, []records.StateRecord{{PartitionStateKey: stateRec("m", 1, 0, 0).PartitionStateKey}}))
	require.ErrorIs(t, a.Append(ctx, 0, 1, nil), ErrNotOwner)

	b := newKafkaStore(t, cfg)
	got := loadAll(t, b, 1, 2)
	require.Len(t, got, 3)
	require.Equal(t, int32(1), got[1].PartitionStateKey.Partition)
	require.Nil(t, got[2].PartitionState, "tombstone read back")

	// a is now a zombie: every append fails with a fencing error.
	for range 3 {
		err := a.Append(ctx, 1, 1, []records.StateRecord{stateRec("zombie", 0, statemachine.Mirroring, 9)})
		require.ErrorIs(t, err, ErrFenced)
	}
	require.NoError(t, b.Append(ctx, 1, 2, []records.StateRecord{stateRec("m", 2, statemachine.Preparing, 1)}))
	got = loadAll(t, newKafkaStore(t, cfg), 1, 3)
	require.Len(t, got, 4)
	for _, r := range got {
		require.NotEqual(t, "zombie", r.PartitionStateKey.MirrorName)
	}
}

// freePort returns a currently free TCP port on 127.0.0.1.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// hookStore runs before before every Append.
type hookStore struct {
	Store
	before func()
}

func (h *hookStore) Append(ctx context.Context, p, e int32, recs []records.StateRecord) error {
	if h.before != nil {
		h.before()
	}
	return h.Store.Append(ctx, p, e, recs)
}

func mustWrite(t testing.TB, r *Runtime, parts ...int32) {
	t.Helper()
	var ws []WritePartition
	for _, p := range parts {
		ws = append(ws, wp(p, statemachine.Preparing, 1, 0))
	}
	wr, err := r.WriteMirrorStates(context.Background(), wreq("m", ws...))
	require.NoError(t, err)
	for _, p := range wr.Partitions {
		require.Equal(t, admin.CodeNone, p.ErrorCode)
	}
}

// TestKafkaRestartMidBatch restarts a persistent kfake broker while a batch
// is being appended, in two places: before anything reached the broker, and
// after the records were produced but before the commit. After a reload by a
// new owner no acknowledged write is missing and no unacknowledged write is
// visible.
func TestKafkaRestartMidBatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	port := freePort(t)
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(dir), kfake.Ports(port), kfake.SyncWrites()}
	c, err := kfake.NewCluster(opts...)
	require.NoError(t, err)
	cfg := kafkaCfg(c, 1)
	cfg.Timeout = time.Second
	cfg.Configure = func(sc *sarama.Config) { // fail fast while the broker is down
		sc.Producer.Retry.Max = 1
		sc.Producer.Transaction.Retry.Max = 2
		sc.Metadata.Retry.Max = 1
	}

	defer func() { c.Close() }()

	for round, where := range []string{"before produce", "before commit"} {
		ks := newKafkaStore(t, cfg)
		hs := &hookStore{Store: ks}
		r := newRuntime(t, Config{NumPartitions: 1, AppendLinger: -1}, hs)
		loadAllParts(t, r, int32(1+2*round))
		acked := []int32{int32(10 * round), int32(10*round + 1)}
		mustWrite(t, r, acked...)

		var once bool
		down := func() {
			if !once {
				once = true
				c.Close()
			}
		}
		if where == "before produce" {
			hs.before = down
		} else {
			ks.testBeforeCommit = down
		}
		unacked := []int32{int32(10*round + 5), int32(10*round + 6)}
		var ws []WritePartition
		for _, p := range unacked {
			ws = append(ws, wp(p, statemachine.Preparing, 1, 0))
		}
		wr, err := r.WriteMirrorStates(ctx, wreq("m", ws...))
		require.NoError(t, err)
		for _, p := range wr.Partitions {
			require.Equal(t, admin.CodeCoordinatorNotAvailable, p.ErrorCode, where)
		}
		require.NoError(t, r.Close())
		require.NoError(t, ks.Close())

		c, err = kfake.NewCluster(opts...) // restart on the same dir and port
		require.NoError(t, err)
		ks2 := newKafkaStore(t, cfg)
		r2 := newRuntime(t, Config{NumPartitions: 1}, ks2)
		loadAllParts(t, r2, int32(2+2*round))
		rd, err := r2.ReadMirrorStates(ctx, rreq("m", -1, append(acked, unacked...)...))
		require.NoError(t, err)
		for _, p := range rd.Partitions[:2] {
			require.Equal(t, statemachine.Preparing, p.State, "%s: acknowledged write %d missing", where, p.Partition)
		}
		for _, p := range rd.Partitions[2:] {
			require.Equal(t, statemachine.Unknown, p.State, "%s: unacknowledged write %d visible", where, p.Partition)
		}
		// the new owner can write
		mustWrite(t, r2, int32(10*round+7))
		require.NoError(t, r2.Close())
		require.NoError(t, ks2.Close())
	}
}

// TestKafkaZombieOwner: two runtimes own the same partition with epochs 1
// and 2; after the epoch-2 owner loads, every write of the epoch-1 owner
// fails and none of it is visible after a reload.
func TestKafkaZombieOwner(t *testing.T) {
	ctx := context.Background()
	c := newKfake(t)
	cfg := kafkaCfg(c, 1)
	ks1 := newKafkaStore(t, cfg)
	r1 := newRuntime(t, Config{NumPartitions: 1, AppendLinger: -1}, ks1)
	loadAllParts(t, r1, 1)
	mustWrite(t, r1, 0)

	ks2 := newKafkaStore(t, cfg)
	r2 := newRuntime(t, Config{NumPartitions: 1, AppendLinger: -1}, ks2)
	loadAllParts(t, r2, 2)

	for p := int32(100); p < 105; p++ {
		wr, err := r1.WriteMirrorStates(ctx, wreq("m", wp(p, statemachine.Preparing, 1, 0)))
		require.NoError(t, err)
		require.Equal(t, admin.CodeNotCoordinator, wr.Partitions[0].ErrorCode)
	}
	// the store-level error is a fencing error
	err := ks1.Append(ctx, 0, 1, []records.StateRecord{stateRec("m", 200, statemachine.Preparing, 1)})
	require.ErrorIs(t, err, ErrFenced)

	mustWrite(t, r2, 1)
	ks3 := newKafkaStore(t, cfg)
	r3 := newRuntime(t, Config{NumPartitions: 1}, ks3)
	loadAllParts(t, r3, 3)
	rd, err := r3.ReadMirrorStates(ctx, rreq("m", -1, 0, 1, 100, 101, 102, 103, 104, 200))
	require.NoError(t, err)
	require.Equal(t, statemachine.Preparing, rd.Partitions[0].State)
	require.Equal(t, statemachine.Preparing, rd.Partitions[1].State)
	for _, p := range rd.Partitions[2:] {
		require.Equal(t, statemachine.Unknown, p.State, "zombie write %d visible", p.Partition)
	}
}

// TestKafkaCompaction: after many updates and kfake's Compact, a reload gives
// the same state, and a deleted mirror leaves no live key.
func TestKafkaCompaction(t *testing.T) {
	ctx := context.Background()
	c := newKfake(t)
	cfg := kafkaCfg(c, 1)
	ks := newKafkaStore(t, cfg)
	require.Empty(t, loadAll(t, ks, 0, 1))
	sh := NewShard()
	apply := func(recs []records.StateRecord) {
		require.NoError(t, ks.Append(ctx, 0, 1, recs))
		for _, r := range recs {
			require.NoError(t, sh.Replay(r))
		}
	}
	for i := range 200 {
		for _, m := range []string{"keep", "gone"} {
			res := sh.ReadMirrorStates(ReadRequest{MirrorName: m, Partitions: []ReadPartition{{TopicID: topicFoo, Partition: int32(i % 7), LeaderEpoch: int32(i)}}})
			apply(res.Records)
			w := sh.WriteMirrorStates(WriteRequest{MirrorName: m, Partitions: []WritePartition{{TopicID: topicFoo, Partition: int32(i % 7),
				State: statemachine.Failed, LeaderEpoch: int32(i), StateEpoch: -1, LastMirrorEpoch: int32(i), LastMirrorOffset: int64(i)}}})
			apply(w.Records)
		}
	}
	apply(sh.DeleteMirror("gone").Records)
	before := sh.Dump()
	require.NotContains(t, before, "gone")
	c.Compact()
	ks2 := newKafkaStore(t, cfg)
	got := loadAll(t, ks2, 0, 2)
	require.Less(t, len(got), 200, "compaction removed superseded records")
	re := NewShard()
	for _, r := range got {
		require.NoError(t, re.Replay(r))
	}
	require.Equal(t, before, re.Dump())
	for _, r := range got {
		if r.PartitionStateKey != nil && r.PartitionStateKey.MirrorName == "gone" {
			require.Nil(t, r.PartitionState, "live key of a deleted mirror")
		}
		if r.LastMirrorEpochsKey != nil && r.LastMirrorEpochsKey.MirrorName == "gone" {
			require.Nil(t, r.LastMirrorEpochs, "live key of a deleted mirror")
		}
	}
}

// TestKafkaStoreRefusesCompactDelete: a state topic with cleanup.policy=compact,delete
// is refused like a delete-only one, with the topic and the policy named: retention
// would delete the latest record of a key, and with it a partition's state.
func TestKafkaStoreRefusesCompactDelete(t *testing.T) {
	c := newKfake(t)
	for _, policy := range []string{"compact,delete", "delete,compact"} {
		topic := "state-" + strings.ReplaceAll(policy, ",", "-")
		require.NoError(t, c.CreateTopic(topic, 2, map[string]string{"cleanup.policy": policy}))
		cfg := kafkaCfg(c, 2)
		cfg.Topic = topic
		_, err := NewKafkaStore(context.Background(), cfg)
		require.ErrorIs(t, err, ErrTopicMismatch, policy)
		var pe *CleanupPolicyError
		require.True(t, errors.As(err, &pe), "%v", err)
		require.Equal(t, CleanupPolicyError{Topic: topic, Policy: policy}, *pe)
	}
}

// TestKafkaStoreLoadRetries: leader errors and OFFSET_OUT_OF_RANGE met while loading
// are retried, and the load replays every committed record.
func TestKafkaStoreLoadRetries(t *testing.T) {
	ctx := context.Background()
	c := newKfake(t)
	cfg := kafkaCfg(c, 1)
	a := newKafkaStore(t, cfg)
	require.Empty(t, loadAll(t, a, 0, 1))
	require.NoError(t, a.Append(ctx, 0, 1, []records.StateRecord{stateRec("m", 0, statemachine.Preparing, 1)}))
	require.NoError(t, a.Append(ctx, 0, 1, []records.StateRecord{stateRec("m", 1, statemachine.Preparing, 1)}))
	for _, f := range []kfake.Fault{
		{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: DefaultStateTopic, Err: kerr.NotLeaderForPartition, Count: 2},
		{Keys: []kmsg.Key{kmsg.Fetch}, Topic: DefaultStateTopic, Err: kerr.LeaderNotAvailable, Count: 2},
		{Keys: []kmsg.Key{kmsg.Fetch}, Topic: DefaultStateTopic, Err: kerr.OffsetOutOfRange, Count: 2},
	} {
		h := c.Fault(f)
		got := loadAll(t, newKafkaStore(t, cfg), 0, 2)
		require.Len(t, got, 2, f.Err.Message)
		require.Equal(t, f.Count, h.Hits(), "%s retried", f.Err.Message)
	}
}
