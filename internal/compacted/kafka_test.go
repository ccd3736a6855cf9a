package compacted

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/internal/compacted/compactedtest"
	"github.com/kmirror/kmirror/internal/kafkatest"
)

// TestKafkaStateLog runs the log on real Kafka (cluster B): a created topic is
// compact-only, compact,delete is refused with the topic and policy named, committed
// records replay without the aborted ones, and a second producer of the id fences the
// first.
func TestKafkaStateLog(t *testing.T) {
	brokers, ctx := compactedtest.ClusterB(t)

	both := compactedtest.Topic(t, brokers, "kt-compacted-both")
	compactedtest.CreateTopic(t, brokers, both, 1, "compact,delete")
	_, err := Open(ctx, Config{Brokers: brokers, Topic: both, Partitions: 1})
	var pe *CleanupPolicyError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, CleanupPolicyError{Topic: both, Policy: "compact,delete"}, *pe)

	topic := compactedtest.Topic(t, brokers, "kt-compacted-log")
	cfg := Config{Brokers: brokers, Topic: topic, Partitions: 2, ReplicationFactor: 1, MinInSyncReplicas: 1}
	l, err := Open(ctx, cfg)
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, "compact", describePolicy(t, brokers, topic))

	old := newProducer(t, l, topic+"-owner", 1)
	_, err = old.Append(ctx, recs("a", "1", "b", "2"))
	require.NoError(t, err)
	compactedtest.AbortedTxn(t, brokers, topic+"-aborter", topic, 1, "aborted", "x")
	_, err = old.Append(ctx, recs("a", "<nil>"))
	require.NoError(t, err)

	cur := newProducer(t, l, topic+"-owner", 1)
	_, err = old.Append(ctx, recs("zombie", "1"))
	require.ErrorIs(t, err, ErrFenced)
	offs, err := cur.Append(ctx, recs("c", "3"))
	require.NoError(t, err)
	waitStable(t, l, 1, offs[0]+2)

	var keys []string
	var tomb []bool
	rs, err := tryReplay(ctx, l, 1)
	require.NoError(t, err)
	for _, r := range rs {
		keys = append(keys, r.Key)
		tomb = append(tomb, r.Tombstone)
	}
	require.Equal(t, []string{"a", "b", "a", "c"}, keys)
	require.Equal(t, []bool{false, false, true, false}, tomb)
	empty, err := tryReplay(ctx, l, 0)
	require.NoError(t, err)
	require.Empty(t, empty)
}

func describePolicy(t *testing.T, brokers []string, topic string) string {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	adm, err := sarama.NewClusterAdmin(brokers, sc)
	require.NoError(t, err)
	defer adm.Close()
	res, err := adm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic,
		ConfigNames: []string{"cleanup.policy"}}}, sarama.DescribeConfigsOptions{})
	require.NoError(t, err)
	for _, r := range res {
		for _, e := range r.Configs {
			if e.Name == "cleanup.policy" {
				return e.Value
			}
		}
	}
	t.Fatalf("no cleanup.policy for %s", topic)
	return ""
}

// TestKafkaReplayAcrossLeaderChange (cluster A, three brokers): the partition's leader
// moves by a preferred-leader election in the middle of a replay. The old leader answers
// NOT_LEADER_OR_FOLLOWER, or, now a follower serving fetch v11 (KIP-392), answers from its
// own view — once in 21 runs without any batch although its last stable offset was past
// the fetch offset, which a replay that ended on such an answer took for the end of the
// log. The replay refreshes its metadata, retries, and finishes with every record.
func TestKafkaReplayAcrossLeaderChange(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterA(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := compactedtest.Topic(t, brokers, "kt-compacted-leader")
	l, err := Open(ctx, Config{Brokers: brokers, Topic: topic, Partitions: 1, ReplicationFactor: 3,
		MinInSyncReplicas: 2, FetchMaxBytes: 1})
	require.NoError(t, err)
	defer l.Close()
	cl := kafkatest.NewClient(t, brokers)
	kafkatest.WaitForLeaders(t, cl, topic)
	p := newProducer(t, l, topic+"-w", 0)
	want := []string{"a", "b", "c", "d", "e"}
	var last int64
	for _, k := range want {
		offs, err := p.Append(ctx, recs(k, "1"))
		require.NoError(t, err)
		last = offs[0]
	}
	waitStable(t, l, 0, last+2) // e and its COMMIT marker

	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	adm, err := sarama.NewClusterAdmin(brokers, sc)
	require.NoError(t, err)
	defer adm.Close()
	moveLeader := func() error {
		info := kafkatest.WaitForLeaders(t, cl, topic).Partitions[0]
		order := append([]int32(nil), info.Replicas...)
		for order[0] == info.Leader {
			order = append(order[1:], order[0])
		}
		if err := adm.AlterPartitionReassignments(topic, [][]int32{order}); err != nil {
			return err
		}
		kafkatest.WaitTopic(t, cl, topic, "replica order", func(ti kafkatest.TopicInfo) bool {
			return len(ti.Partitions) == 1 && ti.Partitions[0].Replicas[0] == order[0] && len(ti.Partitions[0].ISR) == 3
		})
		if _, err := adm.ElectLeaders(sarama.PreferredElection, map[string][]int32{topic: {0}}); err != nil {
			return err
		}
		kafkatest.WaitTopic(t, cl, topic, "new leader", func(ti kafkatest.TopicInfo) bool {
			return len(ti.Partitions) == 1 && ti.Partitions[0].Leader == order[0]
		})
		return nil
	}
	var keys []string
	err = l.Replay(ctx, 0, func(_ int64, key, _ []byte) error {
		keys = append(keys, string(key))
		if len(keys) == 1 {
			return moveLeader()
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, want, keys)
}

// waitStable waits until the last stable offset of partition reaches want. An Append
// returns once its commit is decided, and the transaction coordinator writes the COMMIT
// marker after that: a replay started at once may end before the transaction (a Load
// does not, it fences the writer first, and InitProducerId waits for the markers).
func waitStable(t *testing.T, l *Log, partition int32, want int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		rp := &replay{l: l, partition: partition, retry: newRetrier(time.Second), maxBytes: 1, leaderID: -1}
		_, end, err := rp.bounds(context.Background())
		return err == nil && end >= want
	}, 30*time.Second, 10*time.Millisecond, "last stable offset of partition %d below %d", partition, want)
}
