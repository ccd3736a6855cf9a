package fetcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/records"
)

// seenFetch is what a Fetch request asked for.
type seenFetch struct {
	sessionID, epoch int32
	maxWait          int32
	named            map[int32]int64 // partition -> fetch offset
	forgotten        []int32
}

// fetchSpy records every Fetch kfake serves (passing it through), and can
// answer the next one with a top-level error instead.
type fetchSpy struct {
	mu       sync.Mutex
	seen     []seenFetch
	failNext int16
}

func spyFetches(c *kfake.Cluster) *fetchSpy {
	s := &fetchSpy{}
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		sf := seenFetch{sessionID: req.SessionID, epoch: req.SessionEpoch, maxWait: req.MaxWaitMillis, named: map[int32]int64{}}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				sf.named[rp.Partition] = rp.FetchOffset
			}
		}
		for _, ft := range req.ForgottenTopics {
			sf.forgotten = append(sf.forgotten, ft.Partitions...)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seen = append(s.seen, sf)
		if code := s.failNext; code != 0 {
			s.failNext = 0
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = code
			return resp, nil, true
		}
		return nil, nil, false
	})
	return s
}

// since returns the requests recorded from index n on.
func (s *fetchSpy) since(n int) []seenFetch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenFetch(nil), s.seen[n:]...)
}

func (s *fetchSpy) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func (s *fetchSpy) fail(code int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = code
}

// sessionFetch fetches parts of topic (one partition each, from offs) in
// the sessions of ctx and returns the results by partition.
func sessionFetch(t *testing.T, ctx context.Context, src *KafkaSource, topic string, id records.UUID, offs map[int32]int64) map[int32]FetchResult {
	t.Helper()
	var parts []FetchPartition
	for p, off := range offs {
		parts = append(parts, FetchPartition{Topic: topic, TopicID: id, Partition: p, FetchOffset: off, LastFetchedEpoch: -1, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20})
	}
	res, err := src.Fetch(ctx, parts)
	require.NoError(t, err)
	out := make(map[int32]FetchResult, len(res))
	for _, r := range res {
		require.Equal(t, CodeNone, r.ErrorCode, "partition %d", r.Partition)
		out[r.Partition] = r
	}
	return out
}

// advance moves each offset past the records answered.
func advance(offs map[int32]int64, res map[int32]FetchResult) {
	for p, r := range res {
		it := records.NewIterator(r.Records)
		for it.Next() {
			offs[p] = max(offs[p], it.Batch().NextOffset())
		}
	}
}

// TestKafkaFetchSessionIncremental follows one loop's session with kfake (which
// serves KIP-227 sessions): a full fetch opens it; then fetches name only the
// partitions whose position moved; idle partitions are answered from the
// session (their high watermark kept, no records); a partition dropped from a
// call is forgotten; new data on an unnamed partition still arrives from the
// position the session holds.
func TestKafkaFetchSessionIncremental(t *testing.T) {
	c := newCluster(t, 1)
	spy := spyFetches(c)
	admin := newClient(t, c)
	const n = 12
	createTopic(t, admin, "s", n, nil)
	pr := producer(t, c)
	for p := range int32(n) {
		produce(t, pr, "s", p, int(p)+1)
	}
	src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: c.ListenAddrs(), MaxWait: 20 * time.Millisecond})
	require.NoError(t, err)
	defer src.Close()
	info, err := src.PartitionInfo(context.Background(), "s", 0, false)
	require.NoError(t, err)
	ctx := WithFetchSessions(context.Background(), &FetchSessions{})

	offs := map[int32]int64{}
	for p := range int32(n) {
		offs[p] = 0
	}
	mark := spy.count()
	res := sessionFetch(t, ctx, src, "s", info.TopicID, offs)
	first := spy.since(mark)
	require.Len(t, first, 1)
	require.Equal(t, int32(0), first[0].sessionID, "the first fetch asks for a session")
	require.Equal(t, int32(0), first[0].epoch)
	require.Len(t, first[0].named, n)
	require.Zero(t, first[0].maxWait, "the first fetch of a session is answered at once")
	advance(offs, res)
	for p := range int32(n) {
		require.Equal(t, int64(p)+1, offs[p], "partition %d read whole", p)
	}

	// Every position moved: all are named again, in the session.
	mark = spy.count()
	res = sessionFetch(t, ctx, src, "s", info.TopicID, offs)
	second := spy.since(mark)
	require.Len(t, second, 1)
	require.NotZero(t, second[0].sessionID)
	require.Equal(t, int32(1), second[0].epoch)
	require.Len(t, second[0].named, n)
	require.Equal(t, int32(20), second[0].maxWait, "then fetches long-poll")
	for p := range int32(n) {
		require.Empty(t, res[p].Records)
		require.Equal(t, int64(p)+1, res[p].HighWatermark)
	}

	// Idle: nothing named, every partition answered from the session.
	mark = spy.count()
	res = sessionFetch(t, ctx, src, "s", info.TopicID, offs)
	idle := spy.since(mark)
	require.Len(t, idle, 1)
	require.Equal(t, second[0].sessionID, idle[0].sessionID)
	require.Equal(t, int32(2), idle[0].epoch)
	require.Empty(t, idle[0].named)
	require.Empty(t, idle[0].forgotten)
	require.Len(t, res, n)
	for p := range int32(n) {
		require.Empty(t, res[p].Records)
		require.Equal(t, int64(p)+1, res[p].HighWatermark, "partition %d keeps its high watermark", p)
	}

	// Dropping a partition from the call forgets it; new data on another
	// arrives though that one is not named.
	delete(offs, 5)
	produce(t, pr, "s", 3, 4)
	mark = spy.count()
	res = sessionFetch(t, ctx, src, "s", info.TopicID, offs)
	drop := spy.since(mark)
	require.Len(t, drop, 1)
	require.Empty(t, drop[0].named)
	require.Equal(t, []int32{5}, drop[0].forgotten)
	require.Len(t, res, n-1)
	require.NotEmpty(t, res[3].Records, "data on an unnamed partition")
	advance(offs, res)
	require.Equal(t, int64(8), offs[3])

	// The moved partition is named once, the forgotten one comes back named.
	offs[5] = 6
	mark = spy.count()
	sessionFetch(t, ctx, src, "s", info.TopicID, offs)
	back := spy.since(mark)
	require.Len(t, back, 1)
	require.Equal(t, map[int32]int64{3: 8, 5: 6}, back[0].named)
	require.Zero(t, back[0].maxWait, "a fetch adding a partition to the session is answered at once")

	// Never two such fetches in a row: a partition that comes and goes
	// cannot make the fetches a loop without long polls.
	delete(offs, 7)
	sessionFetch(t, ctx, src, "s", info.TopicID, offs) // forgets 7, long-polls
	offs[7] = 8
	delete(offs, 9)
	mark = spy.count()
	sessionFetch(t, ctx, src, "s", info.TopicID, offs) // adds 7: at once
	offs[9] = 10
	sessionFetch(t, ctx, src, "s", info.TopicID, offs) // adds 9 right after: long-polls
	again := spy.since(mark)
	require.Len(t, again, 2)
	require.Equal(t, map[int32]int64{7: 8}, again[0].named)
	require.Zero(t, again[0].maxWait)
	require.Equal(t, map[int32]int64{9: 10}, again[1].named)
	require.Equal(t, int32(20), again[1].maxWait)
}

// TestKafkaFetchSessionErrorsResetToFull answers session errors in place of
// kfake: each is retried at once as a full fetch (the loop never sees the
// code), FETCH_SESSION_ID_NOT_FOUND without the old id, the others closing it.
func TestKafkaFetchSessionErrorsResetToFull(t *testing.T) {
	c := newCluster(t, 1)
	spy := spyFetches(c)
	admin := newClient(t, c)
	createTopic(t, admin, "e", 3, nil)
	pr := producer(t, c)
	src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: c.ListenAddrs(), MaxWait: 20 * time.Millisecond})
	require.NoError(t, err)
	defer src.Close()
	info, err := src.PartitionInfo(context.Background(), "e", 0, false)
	require.NoError(t, err)
	ctx := WithFetchSessions(context.Background(), &FetchSessions{})
	offs := map[int32]int64{0: 0, 1: 0, 2: 0}
	sessionFetch(t, ctx, src, "e", info.TopicID, offs)
	sessionFetch(t, ctx, src, "e", info.TopicID, offs)

	for _, code := range []int16{CodeFetchSessionIDNotFound, CodeInvalidFetchSessionEpoch, CodeFetchSessionTopicIDError} {
		produce(t, pr, "e", 1, 2)
		mark := spy.count()
		spy.fail(code)
		res := sessionFetch(t, ctx, src, "e", info.TopicID, offs)
		seen := spy.since(mark)
		require.Len(t, seen, 2, "code %d: the refused fetch and its full retry", code)
		require.Positive(t, seen[0].epoch, "code %d", code)
		require.Equal(t, int32(0), seen[1].epoch, "code %d: full retry", code)
		require.Len(t, seen[1].named, 3, "code %d: full retry names every partition", code)
		if code == CodeFetchSessionIDNotFound {
			require.Equal(t, int32(0), seen[1].sessionID)
		} else {
			require.Equal(t, seen[0].sessionID, seen[1].sessionID, "code %d: the old session is closed", code)
		}
		require.NotEmpty(t, res[1].Records, "code %d: the data arrives", code)
		advance(offs, res)
		// The next fetch is incremental in the new session.
		mark = spy.count()
		sessionFetch(t, ctx, src, "e", info.TopicID, offs)
		next := spy.since(mark)
		require.Len(t, next, 1)
		require.Equal(t, int32(1), next[0].epoch, "code %d", code)
	}
}

// TestKafkaFetcherMirrorsInSessions runs the Fetcher over kfake with sessions:
// the mirror is byte for byte and, once caught up, the loop's fetches are
// incremental and name no partition.
func TestKafkaFetcherMirrorsInSessions(t *testing.T) {
	c := newCluster(t, 2)
	spy := spyFetches(c)
	admin := newClient(t, c)
	const n = 16
	createTopic(t, admin, "m", n, nil)
	pr := producer(t, c)
	for p := range int32(n) {
		produce(t, pr, "m", p, 3)
	}
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	m := startMirror(t, c, KafkaSourceConfig{MaxWait: 20 * time.Millisecond}, Config{}, "m", parts, nil)
	m.waitCaughtUp(t, c)
	produce(t, pr, "m", 7, 20)
	m.waitCaughtUp(t, c)

	// Once idle, the loop's fetches are incremental and name nothing: wait for
	// ten such fetches after the catch-up (fetches pipelined before the last
	// answers were applied may still carry the last positions, more of them on
	// a loaded machine).
	idle := func(sf seenFetch) bool {
		return sf.sessionID != 0 && sf.epoch > 0 && len(sf.named) == 0 && len(sf.forgotten) == 0
	}
	caught := spy.count()
	require.Eventually(t, func() bool {
		n := 0
		for _, sf := range spy.since(caught) {
			if idle(sf) {
				n++
			}
		}
		return n >= 10
	}, time.Minute, 10*time.Millisecond, "ten idle incremental fetches")
	ctx := context.Background()
	for tp, l := range m.logs {
		info, err := m.src.PartitionInfo(ctx, tp.Topic, tp.Partition, false)
		require.NoError(t, err)
		requireMirrored(t, sourceBatches(t, admin, c, tp.Topic, info.TopicID, tp.Partition), l)
	}
	m.ev.mu.Lock()
	require.Empty(t, m.ev.failed)
	m.ev.mu.Unlock()

	// Closing the Fetcher closes its sessions on the brokers.
	mark := spy.count()
	require.NoError(t, m.f.Close())
	closed := 0
	for _, sf := range spy.since(mark) {
		if sf.epoch == -1 && sf.sessionID != 0 {
			closed++
		}
	}
	require.Equal(t, 2, closed, "one goodbye per broker")
}
