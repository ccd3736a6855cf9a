package fetcher

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// progressCounter counts Events.OnProgress per partition.
type progressCounter struct {
	NopEvents
	mu sync.Mutex
	n  map[TopicPartition]int
}

func (c *progressCounter) OnProgress(tp TopicPartition, _ Progress) {
	c.mu.Lock()
	c.n[tp]++
	c.mu.Unlock()
}

func (c *progressCounter) get(tp TopicPartition) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[tp]
}

// An idle partition's answers in a fetch session (not named by the broker:
// FetchResult.Unchanged) are not handled as progress; only their time is
// recorded in PartitionSpec.Answered. A partition that gets a record is
// handled as before.
func TestFetcherQuietAnswersOnlyRecordTheirTime(t *testing.T) {
	c := newCluster(t, 1)
	admin := newClient(t, c)
	const n = 4
	createTopic(t, admin, "q", n, nil)
	pr := producer(t, c)
	for p := range int32(n) {
		produce(t, pr, "q", p, 1)
	}
	src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: c.ListenAddrs(), MaxWait: 20 * time.Millisecond})
	require.NoError(t, err)
	defer src.Close()
	ev := &progressCounter{n: map[TopicPartition]int{}}
	f, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	logs := make([]*MemoryLog, n)
	answered := make([]atomic.Int64, n)
	for p := range n {
		logs[p] = NewMemoryLog(MemoryLogOptions{})
		_, err := logs[p].BumpLeaderEpoch(100) // above the source's epochs
		require.NoError(t, err)
		require.NoError(t, f.Add(PartitionSpec{Topic: "q", Partition: int32(p), Log: logs[p], Answered: &answered[p]}))
	}
	require.Eventually(t, func() bool {
		for _, l := range logs {
			if l.LogEndOffset() != 1 {
				return false
			}
		}
		return true
	}, time.Minute, 5*time.Millisecond)

	// Idle: the session's answers name nothing; each lets Answered move on.
	tp0 := TopicPartition{"q", 0}
	before, mark := ev.get(tp0), answered[0].Load()
	require.Positive(t, mark)
	require.Eventually(t, func() bool { return answered[0].Load() > mark+int64(500*time.Millisecond) }, time.Minute, 5*time.Millisecond)
	require.LessOrEqual(t, ev.get(tp0)-before, 3, "idle answers reported as progress (a few pipelined ones may be)")

	// Data: handled and reported as before.
	tp2 := TopicPartition{"q", 2}
	had := ev.get(tp2)
	produce(t, pr, "q", 2, 2)
	require.Eventually(t, func() bool { return logs[2].LogEndOffset() == 3 && ev.get(tp2) > had }, time.Minute, 5*time.Millisecond)
}
