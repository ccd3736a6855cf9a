package fetcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kafkatest"
	"github.com/kmirror/kmirror/records"
)

// TestKafkaSourceSessionsRealBroker mirrors from a real Kafka broker (a
// private single-node cluster: run it under flock /work/wt/broker.lock)
// through the Fetcher in fetch sessions: the broker grants them, every
// record arrives byte for byte while the producer keeps writing, and a
// session whose epoch the client lost (answered INVALID_FETCH_SESSION_EPOCH
// by the broker) is replaced without the loop seeing an error.
func TestKafkaSourceSessionsRealBroker(t *testing.T) {
	brokers := kafkatest.StartPrivate(t, kafkatest.PrivateOptions{NoAuthorizer: true}).Brokers()
	admin := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	info := kafkatest.CreateTopic(t, admin, topic, 6, 1, nil)
	pr := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	for p := range int32(6) {
		produce(t, pr, topic, p, 20)
	}
	writes := &fetchWrites{}
	src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: brokers, MaxWait: 50 * time.Millisecond, ClientOptions: []kgo.Opt{kgo.WithHooks(writes)}})
	require.NoError(t, err)
	defer src.Close()
	f, err := NewFetcher(src, Config{})
	require.NoError(t, err)
	defer f.Close()
	logs := map[int32]Log{}
	for p := range int32(6) {
		l := NewMemoryLog(MemoryLogOptions{})
		_, err := l.BumpLeaderEpoch(999)
		require.NoError(t, err)
		logs[p] = l
		require.NoError(t, f.Add(PartitionSpec{Topic: topic, TopicID: info.ID, Partition: p, Log: l}))
	}
	end := func(p int32) int64 {
		res, err := src.ListOffsets(context.Background(), []OffsetQuery{{Topic: topic, Partition: p, CurrentLeaderEpoch: -1, Timestamp: LatestTimestamp}})
		require.NoError(t, err)
		return res[0].Offset
	}
	caughtUp := func() bool {
		for p, l := range logs {
			if l.LogEndOffset() < end(p) {
				return false
			}
		}
		return true
	}
	require.Eventually(t, caughtUp, time.Minute, 20*time.Millisecond)
	granted := func() int {
		f.sessions.mu.Lock()
		defer f.sessions.mu.Unlock()
		n := 0
		for _, s := range f.sessions.byBroker {
			s.mu.Lock()
			if s.id != 0 && s.epoch > 0 {
				n++
			}
			s.mu.Unlock()
		}
		return n
	}
	require.Eventually(t, func() bool { return granted() > 0 }, time.Minute, 20*time.Millisecond, "the broker grants sessions")
	// Idle, the fetches name no partition: each request is its header and
	// the empty lists (a full fetch of six partitions is several times larger).
	mark := writes.count()
	require.Eventually(t, func() bool { return writes.count() >= mark+10 }, time.Minute, 10*time.Millisecond)
	sizes := writes.since(mark + 5)
	for _, n := range sizes {
		require.Less(t, n, 120, "idle incremental fetch of %d bytes: %v", n, sizes)
	}

	// Lose the epoch of every session: the broker refuses the next fetch of
	// each (71) and the source opens a new session at once.
	f.sessions.mu.Lock()
	for _, s := range f.sessions.byBroker {
		s.mu.Lock()
		if s.epoch > 0 {
			s.epoch += 7
		}
		s.mu.Unlock()
	}
	f.sessions.mu.Unlock()
	for round := range 3 {
		for p := range int32(6) {
			produce(t, pr, topic, p, 5+round)
		}
		require.Eventually(t, caughtUp, time.Minute, 20*time.Millisecond)
	}
	for p, l := range logs {
		requireMirrored(t, readAllBatches(t, src, topic, info.ID, p), l)
	}
	for _, st := range f.Status() {
		require.NoError(t, st.Err, "%s", st.TopicPartition)
	}
	require.Positive(t, granted())
}

// fetchWrites records the size of every Fetch request written.
type fetchWrites struct {
	mu    sync.Mutex
	sizes []int
}

func (w *fetchWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytes int, _, _ time.Duration, err error) {
	if key == 1 && err == nil { // Fetch
		w.mu.Lock()
		w.sizes = append(w.sizes, bytes)
		w.mu.Unlock()
	}
}

func (w *fetchWrites) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sizes)
}

func (w *fetchWrites) since(n int) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.sizes[n:]...)
}

// readAllBatches reads every batch of topic/p through src without a session.
func readAllBatches(t *testing.T, src Source, topic string, id records.UUID, p int32) []records.Batch {
	t.Helper()
	var out []records.Batch
	offset := int64(0)
	for {
		res, err := src.Fetch(context.Background(), []FetchPartition{{Topic: topic, TopicID: id, Partition: p, FetchOffset: offset,
			LastFetchedEpoch: -1, CurrentLeaderEpoch: -1, MaxBytes: 8 << 20}})
		require.NoError(t, err)
		require.Equal(t, CodeNone, res[0].ErrorCode)
		n := 0
		for it := records.NewIterator(res[0].Records); it.Next(); {
			b := it.Batch()
			if b.NextOffset() <= offset {
				continue
			}
			out = append(out, append(records.Batch(nil), b...))
			offset, n = b.NextOffset(), n+1
		}
		if n == 0 && offset >= res[0].HighWatermark {
			return out
		}
	}
}
