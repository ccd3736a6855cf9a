package compacted

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/compacted/compactedtest"
	"github.com/kmirror/kmirror/records"
)

// TestReplayCommitted: committed records come back with their offsets, tombstones as nil
// values, and neither an aborted transaction nor the control markers show.
func TestReplayCommitted(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	l := openLog(t, testConfig(c.ListenAddrs(), "state", 2))
	require.Empty(t, replayAll(t, l, 1))
	p := newProducer(t, l, "w-1", 1)
	offs, err := p.Append(ctx, recs("a", "1", "b", "2"))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offs)
	compactedtest.AbortedTxn(t, c.ListenAddrs(), "aborter", "state", 1, "zombie", "x")
	offs2, err := p.Append(ctx, recs("a", "<nil>"))
	require.NoError(t, err)
	require.Greater(t, offs2[0], int64(3), "commit marker, aborted record and abort marker in between")
	require.Equal(t, []replayed{{0, "a", "1", false}, {1, "b", "2", false}, {offs2[0], "a", "", true}}, replayAll(t, l, 1))
	require.Empty(t, replayAll(t, l, 0), "the other partition is untouched")

	err = l.Replay(ctx, 2, func(int64, []byte, []byte) error { return nil })
	require.ErrorIs(t, err, ErrReplay, "partition out of range")
	stop := errors.New("stop")
	err = l.Replay(ctx, 1, func(int64, []byte, []byte) error { return stop })
	require.ErrorIs(t, err, stop)
	require.NotErrorIs(t, err, ErrReplay, "the callback's error is its own")
}

// TestReplaySmallFetches: with a budget below one batch every fetch still passes one
// whole batch.
func TestReplaySmallFetches(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	cfg := testConfig(c.ListenAddrs(), "state", 1)
	cfg.FetchMaxBytes = 1
	l := openLog(t, cfg)
	p := newProducer(t, l, "w", 0)
	var want []replayed
	for i := range 10 {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
		offs, err := p.Append(ctx, recs(k, v))
		require.NoError(t, err)
		want = append(want, replayed{offs[0], k, v, false})
	}
	fetches := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Observe: true, Count: -1})
	require.Equal(t, want, replayAll(t, l, 0))
	require.GreaterOrEqual(t, fetches.Hits(), 10)
}

// TestReplayAfterCompaction: compaction leaves the latest value per key, and batches it
// emptied do not stop the replay.
func TestReplayAfterCompaction(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	l := openLog(t, testConfig(c.ListenAddrs(), "state", 1))
	p := newProducer(t, l, "w", 0)
	for i := range 50 {
		_, err := p.Append(ctx, recs(fmt.Sprintf("k%d", i%5), fmt.Sprint(i)))
		require.NoError(t, err)
	}
	_, err := p.Append(ctx, recs("k0", "<nil>"))
	require.NoError(t, err)
	c.Compact()
	got := map[string]replayed{}
	for _, r := range replayAll(t, l, 0) {
		got[r.Key] = r
	}
	require.Len(t, got, 5)
	require.True(t, got["k0"].Tombstone)
	for i := 1; i < 5; i++ {
		require.Equal(t, fmt.Sprint(45+i), got[fmt.Sprintf("k%d", i)].Value)
	}
}

// TestReplayRetries: leader errors on ListOffsets and Fetch and OFFSET_OUT_OF_RANGE on a
// fetch are retried, and the replay is complete.
func TestReplayRetries(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	l := openLog(t, testConfig(c.ListenAddrs(), "state", 1))
	p := newProducer(t, l, "w", 0)
	_, err := p.Append(ctx, recs("a", "1", "b", "2"))
	require.NoError(t, err)
	want := replayAll(t, l, 0)
	require.Len(t, want, 2)
	for _, f := range []kfake.Fault{
		{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: "state", Err: kerr.LeaderNotAvailable, Count: 2},
		{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "state", Err: kerr.NotLeaderForPartition, Count: 2},
		{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "state", Err: kerr.FencedLeaderEpoch, Count: 1},
		{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "state", Err: kerr.OffsetOutOfRange, Count: 2},
	} {
		h := c.Fault(f)
		require.Equal(t, want, replayAll(t, l, 0), "%s on %v", f.Err.Message, f.Keys)
		require.Equal(t, max(f.Count, 1), h.Hits(), "%s retried", f.Err.Message)
	}
}

// TestReplayLeaderMoved: the partition's leader moves in the middle of a replay; the
// old leader answers NOT_LEADER_OR_FOLLOWER, and the replay refreshes the metadata and
// goes on from the new one.
func TestReplayLeaderMoved(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, kfake.NumBrokers(3))
	cfg := testConfig(c.ListenAddrs(), "state", 1)
	cfg.FetchMaxBytes = 1 // one batch per fetch
	l := openLog(t, cfg)
	p := newProducer(t, l, "w", 0)
	for _, k := range []string{"a", "b", "c"} {
		_, err := p.Append(ctx, recs(k, "1"))
		require.NoError(t, err)
	}
	var keys []string
	moved := false
	err := l.Replay(ctx, 0, func(_ int64, key, _ []byte) error {
		keys = append(keys, string(key))
		if !moved {
			moved = true
			leader := c.PartitionInfos("state")[0].Leader
			return c.MoveTopicPartition("state", 0, (leader+1)%3)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, keys)
}

// TestReplayRetryBounded: a leader error that does not go away fails the replay after
// the retry budget, with an error naming the cause; a context that ends first wins.
func TestReplayRetryBounded(t *testing.T) {
	c := newCluster(t)
	cfg := testConfig(c.ListenAddrs(), "state", 1)
	cfg.RetryTimeout = 200 * time.Millisecond
	l := openLog(t, cfg)
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch, kmsg.ListOffsets}, Topic: "state", Err: kerr.NotLeaderForPartition, Count: -1})
	defer h.Remove()
	_, err := tryReplay(context.Background(), l, 0)
	require.ErrorIs(t, err, ErrReplay)
	require.ErrorIs(t, err, sarama.ErrNotLeaderForPartition)
	require.ErrorIs(t, err, kerr.NotLeaderForPartition)
	var ke *KafkaError
	require.True(t, errors.As(err, &ke), "%v", err)
	require.Equal(t, kerr.NotLeaderForPartition.Code, ke.Code)
	require.Greater(t, h.Hits(), 1, "retried before giving up")

	cfg.RetryTimeout = time.Hour
	l2 := openLog(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = tryReplay(ctx, l2, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second)
}

// TestReplayNotRetried: an error that is not about leadership fails at once.
func TestReplayNotRetried(t *testing.T) {
	c := newCluster(t)
	l := openLog(t, testConfig(c.ListenAddrs(), "state", 1))
	p := newProducer(t, l, "w", 0)
	_, err := p.Append(context.Background(), recs("a", "1"))
	require.NoError(t, err)
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "state", Err: kerr.TopicAuthorizationFailed, Count: -1})
	defer h.Remove()
	_, err = tryReplay(context.Background(), l, 0)
	require.ErrorIs(t, err, ErrReplay)
	require.ErrorIs(t, err, sarama.ErrTopicAuthorizationFailed)
	require.Equal(t, 1, h.Hits())
}

// fakeFetchAt answers up to n fetches of state-0 at offset at with batches and the
// given last stable offset (empty batches: an answer without any batch); it returns
// the number of fetches it answered. The cluster must hold no other topic: a Fetch v13+
// names the topic by id only.
func fakeFetchAt(c *kfake.Cluster, at int64, n int, stable int64, batches []byte) func() int {
	answered := 0
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if answered >= n || len(req.Topics) != 1 || (req.Topics[0].Topic != "state" && req.Topics[0].Topic != "") ||
			len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].FetchOffset != at {
			return nil, nil, false
		}
		answered++
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = "state", req.Topics[0].TopicID
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = stable, stable, 0
		rp.RecordBatches = batches
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	return func() int { return answered }
}

// TestReplayRecordlessBatch: a batch whose records were all removed (the cleaner keeps it
// for producer state) is passed over, also when it is the last one below the end.
func TestReplayRecordlessBatch(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	cfg := testConfig(c.ListenAddrs(), "state", 1)
	cfg.FetchMaxBytes = 1 // one batch per fetch
	l := openLog(t, cfg)
	p := newProducer(t, l, "w", 0)
	for _, k := range []string{"a", "b"} {
		_, err := p.Append(ctx, recs(k, "1"))
		require.NoError(t, err)
	} // a@0, COMMIT@1, b@2, COMMIT@3
	empty, err := records.BuildBatch(records.BatchSpec{BaseOffset: 2, ProducerID: 9, BaseSequence: 0, Transactional: true}, nil)
	require.NoError(t, err)
	hits := fakeFetchAt(c, 2, 1, 4, empty)
	got := replayAll(t, l, 0)
	require.Equal(t, 1, hits())
	require.Len(t, got, 1, "b is gone, as the cleaner would have removed it")
	require.Equal(t, "a", got[0].Key)
}

// TestReplayEmptyAnswerRetried: a replica that answers without any batch although its
// last stable offset is past the fetch offset (seen on real Kafka while a leader moves)
// is asked again; the replay does not end early.
func TestReplayEmptyAnswerRetried(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	cfg := testConfig(c.ListenAddrs(), "state", 1)
	cfg.FetchMaxBytes = 1 // one batch per fetch
	l := openLog(t, cfg)
	p := newProducer(t, l, "w", 0)
	for _, k := range []string{"a", "b"} {
		_, err := p.Append(ctx, recs(k, "1"))
		require.NoError(t, err)
	}
	hits := fakeFetchAt(c, 2, 6, 4, []byte{})
	got := replayAll(t, l, 0)
	require.Equal(t, 6, hits())
	require.Len(t, got, 2, "b is replayed")

	// an answer that stays empty fails the replay after the retry budget
	cfg.RetryTimeout = 200 * time.Millisecond
	short := openLog(t, cfg)
	fakeFetchAt(c, 2, 1<<30, 4, []byte{})
	_, err := tryReplay(ctx, short, 0)
	require.ErrorIs(t, err, ErrReplay)
}

// TestReplayCorruptAnswer: a corrupt batch in a fetch answer, or one the broker cut
// short although the budget covered it, fails the replay with a typed error naming the
// offset; neither is skipped. A batch cut short because it is larger than the budget
// makes the replay ask again with a budget that holds it.
func TestReplayCorruptAnswer(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	l := openLog(t, testConfig(c.ListenAddrs(), "state", 1))
	p := newProducer(t, l, "w", 0)
	for _, k := range []string{"a", "b"} {
		_, err := p.Append(ctx, recs(k, "1"))
		require.NoError(t, err)
	} // a@0, COMMIT@1, b@2, COMMIT@3
	b, err := records.BuildBatch(records.BatchSpec{BaseOffset: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]records.Record{{Key: []byte("b"), Value: []byte("1")}})
	require.NoError(t, err)

	first, err := records.BuildBatch(records.BatchSpec{BaseOffset: 0, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]records.Record{{Key: []byte("a"), Value: []byte("1")}})
	require.NoError(t, err)
	flipped := slices.Clone(first)
	flipped[len(flipped)-1] ^= 1
	hits := fakeFetchAt(c, 0, 1, 4, flipped)
	_, err = tryReplay(ctx, l, 0)
	require.Equal(t, 1, hits())
	require.ErrorIs(t, err, ErrReplay)
	var ce *records.CorruptError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, int64(0), ce.BaseOffset)
	require.Contains(t, err.Error(), "state-0@0")

	hits = fakeFetchAt(c, 0, 1, 4, first[:len(first)-1])
	_, err = tryReplay(ctx, l, 0)
	require.Equal(t, 1, hits())
	require.ErrorIs(t, err, ErrReplay)
	require.ErrorIs(t, err, records.ErrIncomplete)

	// Budget 1: the first answer carries a part of the batch, the replay asks again with
	// a budget of the batch's size, and kfake answers that whole.
	cfg := testConfig(c.ListenAddrs(), "state", 1)
	cfg.FetchMaxBytes = 1
	small := openLog(t, cfg)
	hits = fakeFetchAt(c, 2, 1, 4, b[:20])
	got, err := tryReplay(ctx, small, 0)
	require.NoError(t, err)
	require.Equal(t, 1, hits())
	require.Equal(t, []replayed{{0, "a", "1", false}, {2, "b", "1", false}}, got)
}

// fakeOutOfRangeAt answers the first fetch of state-0 at offset at with
// OFFSET_OUT_OF_RANGE and the log start logStart: records deleted under the replay.
func fakeOutOfRangeAt(c *kfake.Cluster, at, logStart int64) func() int {
	answered := 0
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if answered > 0 || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 ||
			req.Topics[0].Partitions[0].FetchOffset != at {
			return nil, nil, false
		}
		answered++
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = "state", req.Topics[0].TopicID
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.ErrorCode = kerr.OffsetOutOfRange.Code
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, logStart
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	return func() int { return answered }
}

// TestReplayLostRange: records deleted under a replay (the log start moved past its next
// offset) are never skipped silently: the replay fails with a *LostError naming the
// range, or, when Config.OnLost accepts the loss, reports the range there and goes on
// from the log start.
func TestReplayLostRange(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	cfg := testConfig(c.ListenAddrs(), "state", 1)
	cfg.FetchMaxBytes = 1 // one batch per fetch
	l := openLog(t, cfg)
	p := newProducer(t, l, "w", 0)
	var offs []int64
	for i := range 6 {
		o, err := p.Append(ctx, recs(fmt.Sprintf("k%d", i), "v"))
		require.NoError(t, err)
		offs = append(offs, o[0])
	}
	from, to := offs[2], offs[4] // the third and fourth records are "deleted"

	answered := fakeOutOfRangeAt(c, from, to)
	got, err := tryReplay(ctx, l, 0)
	require.Equal(t, 1, answered())
	var lost *LostError
	require.ErrorAs(t, err, &lost)
	require.ErrorIs(t, err, ErrReplay)
	require.ErrorIs(t, err, ErrLost)
	require.Equal(t, LostError{Topic: "state", Partition: 0, From: from, To: to}, *lost)
	require.Equal(t, []int64{offs[0], offs[1]}, offsetsOf(got), "nothing past the hole is applied")

	type hole struct {
		partition int32
		from, to  int64
	}
	var holes []hole
	cfg.OnLost = func(partition int32, from, to int64) { holes = append(holes, hole{partition, from, to}) }
	l2 := openLog(t, cfg)
	answered = fakeOutOfRangeAt(c, from, to)
	got, err = tryReplay(ctx, l2, 0)
	require.NoError(t, err)
	require.Equal(t, 1, answered())
	require.Equal(t, []hole{{0, from, to}}, holes)
	require.Equal(t, []int64{offs[0], offs[1], offs[4], offs[5]}, offsetsOf(got))
}

func offsetsOf(rs []replayed) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Offset)
	}
	return out
}
