package fetcher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestForgottenPartitionIsRefreshed: after one partition's cached leader is
// forgotten (a leader-change answer), the next OffsetForLeaderEpoch reloads the
// topic's metadata and reaches the leader. Before, the topic entry, still holding
// the other partitions, counted as loaded, so the forgotten partition answered
// LEADER_NOT_AVAILABLE until every partition of the topic had been forgotten (a
// failback's plan asked for ten seconds and was refused).
func TestForgottenPartitionIsRefreshed(t *testing.T) {
	c := newCluster(t, 1)
	createTopic(t, newClient(t, c), "orders", 2, nil)
	src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: c.ListenAddrs(), MetadataMinAge: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ask := func(p int32) int16 {
		res, err := src.OffsetForLeaderEpoch(ctx, []EpochQuery{{Topic: "orders", Partition: p, CurrentLeaderEpoch: -1, LeaderEpoch: 0}})
		require.NoError(t, err)
		require.Len(t, res, 1)
		return res[0].ErrorCode
	}
	require.Equal(t, CodeNone, ask(0))
	require.Equal(t, CodeNone, ask(1))
	src.forget(TopicPartition{"orders", 1})
	time.Sleep(2 * time.Millisecond) // past MetadataMinAge, so the refresh may run
	require.Equal(t, CodeNone, ask(1), "the forgotten partition's leader is looked up again")
}
