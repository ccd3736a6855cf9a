package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkatest"
	kmirror "github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// TestStopWithOpenTransaction is the failover of issue 11 against real Kafka 4.4: a source
// partition holds 10 committed records, a transaction left open (1 record) and 20 records of
// an idempotent producer. kmirror mirrors it with its default KafkaSource into a file
// destination and stops. Every committed record is present, the open transaction is closed
// by an ABORT marker of its producer, LSO = HW, and the destination's read_committed view is
// exactly what a read_committed kgo consumer reads from the source once the source's own
// transaction is aborted.
func TestStopWithOpenTransaction(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterA(t)
	cl := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	kafkatest.CreateTopic(t, cl, topic, 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	plain := kafkatest.NewClient(t, brokers, kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, plain, topic, 0, "plain", 10, 10)
	txn := kafkatest.NewClient(t, brokers, kgo.TransactionalID(topic+"-open"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(5*time.Minute))
	require.NoError(t, txn.BeginTransaction())
	produce(t, txn, topic, 0, "open", 1, 1)
	idem := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, idem, topic, 0, "idem", 20, 5)
	hw, err := sourceHighWatermark(cl, fetcher.TopicPartition{Topic: topic})
	require.NoError(t, err)
	require.Equal(t, int64(31), hw)

	dest, err := kmirror.OpenFileDestination(t.TempDir(), "dr", fetcher.FileLogOptions{})
	require.NoError(t, err)
	m, err := kmirror.New(kmirror.Config{Destination: dest, SyncInterval: -1},
		kmirror.WithPeerFactory(func(string, kmirror.MirrorConfig) (kmirror.Peer, error) { return nil, nil }))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Close())
		require.NoError(t, dest.Close())
	})
	require.NoError(t, m.CreateClusterMirror(ctx, "from-a", map[string]string{
		kmirror.KeyBootstrapServers: strings.Join(brokers, ","), kmirror.KeyFetchWaitMaxMs: "100",
		kmirror.KeyTopicsInclude: topic}))
	res, err := m.StartMirrorTopics(ctx, "from-a", []string{topic}, kmirror.StartOptions{})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	l, err := dest.Log(topic, 0)
	require.NoError(t, err)
	waitFor(t, waitTimeout, "mirror to catch up", func() (bool, string) {
		return l.LogEndOffset() == hw, fmt.Sprintf("destination log end %d, source high watermark %d", l.LogEndOffset(), hw)
	})
	require.Len(t, l.OpenTransactions(), 1)
	open := l.OpenTransactions()[0]
	require.Equal(t, int64(10), open.FirstOffset)
	_, err = dest.Produce(ctx, topic, 0, clientWrite(t, "early"))
	require.ErrorIs(t, err, admin.CodeReadOnlyTopic.Err())

	res, err = m.StopMirrorTopics(ctx, "from-a", []string{topic}, kmirror.StopOptions{Wait: true})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	dst := readLog(t, l)
	last, abort := dst[len(dst)-1], dst[len(dst)-2]
	ct, err := last.ControlType()
	require.NoError(t, err)
	require.Equal(t, records.ControlMirrorPIDReset, ct)
	ct, err = abort.ControlType()
	require.NoError(t, err)
	require.Equal(t, records.ControlAbort, ct)
	require.Equal(t, open.ProducerID, abort.ProducerID())
	require.Equal(t, open.ProducerEpoch, abort.ProducerEpoch())
	require.Equal(t, hw, abort.BaseOffset(), "the marker follows every mirrored record")
	require.Equal(t, l.HighWatermark(), l.LastStableOffset(), "LSO = HW")
	src := readSource(t, cl, topic, 0)
	requireSameBatches(t, topic, src.Batches, dst[:len(src.Batches)])

	// The source's committed records, as a real read_committed consumer reads them once
	// the open transaction is ended on the source too.
	require.NoError(t, txn.EndTransaction(ctx, kgo.TryAbort))
	want := consumeCommitted(t, brokers, topic, 30)
	require.Equal(t, want, committedValues(t, dst), "read_committed on the destination = read_committed on the source")
	d, err := m.DescribeClusterMirrors(ctx, []string{"from-a"}, kmirror.DescribeOptions{IncludeStates: true})
	require.NoError(t, err)
	require.Equal(t, statemachine.Stopped, d[0].Topics[0].Partitions[0].State)

	off, err := dest.Produce(ctx, topic, 0, clientWrite(t, "late"))
	require.NoError(t, err)
	require.Equal(t, hw+2, off, "a client write lands after the marker and the barrier")
}

// clientWrite is one client batch of one record.
func clientWrite(t testing.TB, v string) []byte {
	b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: time.Now().UnixMilli()}, []records.Record{{Value: []byte(v)}})
	require.NoError(t, err)
	return b
}

// consumeCommitted reads n records of partition 0 with a read_committed kgo consumer.
func consumeCommitted(t testing.TB, brokers []string, topic string, n int) []string {
	cl := kafkatest.NewClient(t, brokers, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read_committed consumer got %d of %d records", len(out), n)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// committedValues is what a read_committed consumer sees in batches bs, which end with
// no transaction open (records.CommittedBatches).
func committedValues(t testing.TB, bs []records.Batch) []string {
	var out []string
	for _, b := range records.CommittedBatches(bs, bs[len(bs)-1].NextOffset()) {
		recs, err := b.Records()
		require.NoError(t, err)
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
	}
	return out
}
