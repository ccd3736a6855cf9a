package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// abortEvents collects Config.OnTxnAbort reports.
type abortEvents struct {
	mu  sync.Mutex
	got []TxnAbort
}

func (a *abortEvents) add(ev TxnAbort) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, ev)
}

func (a *abortEvents) list() []TxnAbort {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]TxnAbort(nil), a.got...)
}

// txnProduce runs one kgo transaction of values on cl and ends it.
func txnProduce(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.BeginTransaction())
	for i, v := range values {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}).FirstErr())
	}
	require.NoError(t, cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
}

// consumeUntil reads topic from the start at the isolation level until it
// has seen the value last, and returns every value read in order per
// partition (partitions concatenated in order).
func consumeUntil(t *testing.T, s *site, topic string, iso kgo.IsolationLevel, last string) []string {
	t.Helper()
	cl := s.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	byPart := map[int32][]string{}
	seen := false
	poll := func(ctx context.Context) {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			byPart[r.Partition] = append(byPart[r.Partition], string(r.Value))
			seen = seen || string(r.Value) == last
		})
	}
	for !seen {
		poll(ctx)
		require.NoError(t, ctx.Err())
	}
	// last may arrive before another partition's records (kgo starts each
	// partition's fetches as its offset resolves): read what else comes.
	more, cancelMore := context.WithTimeout(ctx, 2*time.Second)
	defer cancelMore()
	for more.Err() == nil {
		poll(more)
	}
	return append(byPart[0], byPart[1]...)
}

// requireClosed checks that no transaction is open in topic's partitions:
// the LSO is the high watermark.
func requireClosed(t *testing.T, s *site, topic string, parts int32) {
	t.Helper()
	for p := int32(0); p < parts; p++ {
		l := s.log(t, topic, p)
		require.Empty(t, l.OpenTransactions(), "%s-%d", topic, p)
		require.Equal(t, l.HighWatermark(), l.LastStableOffset(), "%s-%d", topic, p)
	}
}

// TestTxnKgoCommitAbort: a kgo transactional producer commits, aborts and
// commits again over two partitions; a read_committed kgo consumer sees
// exactly the committed records, a read_uncommitted one all of them, and
// every transaction is closed by markers.
func TestTxnKgoCommitAbort(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 2)
	cl := s.client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txnProduce(t, cl, true, "c0", "c1", "c2", "c3")
	txnProduce(t, cl, false, "a0", "a1", "a2")
	txnProduce(t, cl, true, "c4", "c5", "end")
	requireClosed(t, s, "t", 2)

	got := consumeUntil(t, s, "t", kgo.ReadCommitted(), "end")
	require.Equal(t, []string{"c0", "c2", "c4", "end", "c1", "c3", "c5"}, got)
	all := consumeUntil(t, s, "t", kgo.ReadUncommitted(), "end")
	require.ElementsMatch(t, []string{"c0", "c1", "c2", "c3", "a0", "a1", "a2", "c4", "c5", "end"}, all)

	// Partition 0 holds three transactions of one producer id and epoch, each
	// closed by its marker: COMMIT, ABORT, COMMIT.
	var kinds []records.ControlType
	buf, err := s.log(t, "t", 0).Read(0, 1<<20)
	require.NoError(t, err)
	for it := records.NewIterator(buf); it.Next(); {
		b := it.Batch()
		if b.Attributes().IsControl() {
			ct, err := b.ControlType()
			require.NoError(t, err)
			kinds = append(kinds, ct)
		} else {
			require.True(t, b.Attributes().IsTransactional())
		}
	}
	require.Equal(t, []records.ControlType{records.ControlCommit, records.ControlAbort, records.ControlCommit}, kinds)
}

// TestTxnZombieFenced: a second client with the same transactional id
// fences the first: the first one's open transaction is aborted (reported
// as AbortFenced), its commit fails with PRODUCER_FENCED and its records
// are never visible to read_committed; the second one commits.
func TestTxnZombieFenced(t *testing.T) {
	ev := &abortEvents{}
	s := startSite(t, Config{OnTxnAbort: ev.add})
	s.topic(t, "t", 2)
	opts := []kgo.Opt{kgo.TransactionalID("shared"), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	zombie := s.client(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, zombie.BeginTransaction())
	require.NoError(t, zombie.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("zombie")}).FirstErr())

	fresh := s.client(t, opts...)
	txnProduce(t, fresh, true, "fresh0", "fresh1", "end")

	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	require.ErrorIs(t, err, kerr.ProducerFenced)
	requireClosed(t, s, "t", 2)
	require.Equal(t, []string{"fresh0", "end", "fresh1"}, consumeUntil(t, s, "t", kgo.ReadCommitted(), "end"))
	got := ev.list()
	require.Len(t, got, 1)
	require.Equal(t, AbortFenced, got[0].Reason)
	require.Equal(t, "shared", got[0].TransactionalID)
	require.Equal(t, [3]int64{0, 0, 1}, [3]int64{int64(got[0].Partition), got[0].FirstOffset, got[0].MarkerOffset})
	require.Equal(t, int16(1), got[0].ProducerEpoch)
}

// TestTxnTimeoutAbort: a transaction left open past its timeout is aborted
// by the site (markers, LSO released, reported as AbortTimeout) and its
// producer is fenced.
func TestTxnTimeoutAbort(t *testing.T) {
	ev := &abortEvents{}
	s := startSite(t, Config{TransactionCheckInterval: 10 * time.Millisecond, OnTxnAbort: ev.add})
	s.topic(t, "t", 2)
	cl := s.client(t, kgo.TransactionalID("slow"), kgo.TransactionTimeout(300*time.Millisecond),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.BeginTransaction())
	for p := int32(0); p < 2; p++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("late")}).FirstErr())
	}
	l := s.log(t, "t", 0)
	require.Eventually(t, func() bool { return len(ev.list()) == 2 }, 20*time.Second, 5*time.Millisecond)
	requireClosed(t, s, "t", 2)
	require.Equal(t, l.HighWatermark(), l.LastStableOffset())
	for _, e := range ev.list() {
		require.Equal(t, AbortTimeout, e.Reason)
	}
	require.ErrorIs(t, cl.EndTransaction(ctx, kgo.TryCommit), kerr.ProducerFenced)

	// Nothing of it is visible; a new client with the id works.
	fresh := s.client(t, kgo.TransactionalID("slow"), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txnProduce(t, fresh, true, "end")
	require.Equal(t, []string{"end"}, consumeUntil(t, s, "t", kgo.ReadCommitted(), "end"))
}

// TestKafkaSourceMirrorsTransactionalTopic: committed and aborted kgo
// transactions on site A, mirrored by fetcher.KafkaSource over A's data plane
// into B: byte for byte, markers included, and B's LSO is its high watermark.
func TestKafkaSourceMirrorsTransactionalTopic(t *testing.T) {
	a := startSite(t, Config{})
	spec := a.topic(t, "src", 2)
	cl := a.client(t, kgo.TransactionalID("mirror-me"), kgo.DefaultProduceTopic("src"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 6; i++ {
		txnProduce(t, cl, i%3 != 1, fmt.Sprintf("x%d-0", i), fmt.Sprintf("x%d-1", i))
	}
	b := startSite(t, Config{})
	ctx := context.Background()
	require.NoError(t, b.dst.CreateTopic(ctx, spec))
	src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{SeedBrokers: []string{a.addr}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	defer func() { _ = src.Close() }()
	f, err := fetcher.NewFetcher(src, fetcher.Config{})
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	for p := int32(0); p < 2; p++ {
		lb := b.log(t, "src", p)
		_, err = lb.BumpLeaderEpoch(10)
		require.NoError(t, err)
		lb.SetReadOnly(true)
		require.NoError(t, f.Add(fetcher.PartitionSpec{Topic: "src", TopicID: spec.TopicID, Partition: p, Log: lb}))
	}
	for p := int32(0); p < 2; p++ {
		la, lb := a.log(t, "src", p), b.log(t, "src", p)
		require.Eventually(t, func() bool { return lb.LogEndOffset() == la.LogEndOffset() }, 30*time.Second, 5*time.Millisecond)
		wa, err := la.Read(0, 1<<30)
		require.NoError(t, err)
		wb, err := lb.Read(0, 1<<30)
		require.NoError(t, err)
		require.Equal(t, wa, wb)
		require.Equal(t, int64(12), lb.LogEndOffset()) // 6 records and 6 markers
		require.Equal(t, lb.HighWatermark(), lb.LastStableOffset())
	}
}
