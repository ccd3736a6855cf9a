package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// txnLog fills partition 0 of topic with: plain 0-2, an aborted transaction
// of producer 7 (3-4, marker 5) interleaved with a committed one of
// producer 8 (6-7, marker 9 after producer 7's second batch at 8, aborted
// by marker 10), then plain 11-12.
func txnLog(t *testing.T, l fetcher.Log) {
	t.Helper()
	appendAt := func(b []byte, base int64) {
		records.Batch(b).SetBaseOffset(base)
		require.NoError(t, l.Append(b))
	}
	appendAt(dataBatch(t, 0, 0, 3, -1, -1, false), 0)
	appendAt(dataBatch(t, 3, 0, 2, 7, 0, true), 3)
	appendAt(marker(7, records.ControlAbort), 5)
	appendAt(dataBatch(t, 6, 0, 2, 8, 0, true), 6)
	appendAt(dataBatch(t, 8, 0, 1, 7, 2, true), 8)
	appendAt(marker(8, records.ControlCommit), 9)
	appendAt(marker(7, records.ControlAbort), 10)
	appendAt(dataBatch(t, 11, 0, 2, -1, -1, false), 11)
}

// TestReadCommitted: a kgo read_committed consumer sees only committed
// records; the raw answer lists the aborted transactions (including one
// whose marker lies beyond the returned bytes).
func TestReadCommitted(t *testing.T) {
	s := startSite(t, Config{})
	spec := s.topic(t, "txn", 1)
	txnLog(t, s.log(t, "txn", 0))
	cl := s.client(t, kgo.ConsumeTopics("txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var offsets []int64
	for len(offsets) < 7 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) { offsets = append(offsets, r.Offset) })
	}
	require.Equal(t, []int64{0, 1, 2, 6, 7, 11, 12}, offsets)

	// Only the bytes up to offset 8 (producer 7's second batch), so its
	// ABORT marker at 10 is found by the scan past the returned bytes.
	l := s.log(t, "txn", 0)
	upTo8, err := l.Read(0, 1<<20)
	require.NoError(t, err)
	it := records.NewIterator(upTo8)
	end := 0
	for it.Next() && it.Batch().BaseOffset() <= 8 {
		end = it.Pos()
	}
	aborted, err := abortedTxns(l, upTo8[:end])
	require.NoError(t, err)
	require.Equal(t, []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 3}, {ProducerID: 7, FirstOffset: 8}}, aborted)

	req := fetchReq(spec, 0, 6, nil)
	req.IsolationLevel = 1
	p := request[*kmsg.FetchResponse](t, cl, req).Topics[0].Partitions[0]
	require.Equal(t, []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 8}}, stripTags(p.AbortedTransactions))
}

func stripTags(in []kmsg.FetchResponseTopicPartitionAbortedTransaction) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(in))
	for i, a := range in {
		out[i] = kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
	}
	return out
}

// TestKafkaSourceMirrorsOverDataPlane: fetcher.KafkaSource pointed at the
// data plane of site A mirrors a topic into site B's log byte for byte (same
// offsets, same batches, same leader epochs): the cross-process foundation.
func TestKafkaSourceMirrorsOverDataPlane(t *testing.T) {
	a := startSite(t, Config{})
	spec := a.topic(t, "src", 1)
	la := a.log(t, "src", 0)
	txnLog(t, la)
	_, err := la.BumpLeaderEpoch(3) // epoch 4
	require.NoError(t, err)
	cl := a.client(t, kgo.DefaultProduceTopic("src"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 50; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr())
	}

	b := mirror.NewMemoryDestination("b", fetcher.MemoryLogOptions{SyncEveryAppend: true})
	defer func() { _ = b.Close() }()
	require.NoError(t, b.CreateTopic(ctx, spec))
	lb, err := b.Log("src", 0)
	require.NoError(t, err)
	_, err = lb.BumpLeaderEpoch(10) // a mirror partition's epoch is above the source's (the fence rule)
	require.NoError(t, err)
	src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{SeedBrokers: []string{a.addr}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	defer func() { _ = src.Close() }()
	f, err := fetcher.NewFetcher(src, fetcher.Config{})
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	require.NoError(t, f.Add(fetcher.PartitionSpec{Topic: "src", TopicID: spec.TopicID, Partition: 0, Log: lb}))
	require.Eventually(t, func() bool { return lb.LogEndOffset() == la.LogEndOffset() }, 30*time.Second, 5*time.Millisecond,
		"status %+v", f.Status())
	wa, err := la.Read(0, 1<<30)
	require.NoError(t, err)
	wb, err := lb.Read(0, 1<<30)
	require.NoError(t, err)
	require.Equal(t, wa, wb)
	require.Equal(t, la.Epochs().Entries(), lb.Epochs().Entries())
	require.Equal(t, int64(63), lb.LogEndOffset())
}

// TestGroupOffsets: OffsetCommit (simple commits), OffsetFetch (v7 and
// v8+ shapes), ListGroups, DescribeGroups over the destination's group
// offsets; a member commit is refused.
func TestGroupOffsets(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 2)
	require.NoError(t, s.dst.CommitOffsets("synced", map[mirror.TopicPartition]int64{{Topic: "t", Partition: 0}: 42}))
	cl := s.client(t)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	fc.CoordinatorKeys = []string{"g"}
	fresp := request[*kmsg.FindCoordinatorResponse](t, cl, fc)
	require.Equal(t, int16(0), fresp.Coordinators[0].ErrorCode)

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "t"
	for p := int32(0); p < 3; p++ {
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Partition, op.Offset = p, int64(10+p)
		ot.Partitions = append(ot.Partitions, op)
	}
	oc.Topics = []kmsg.OffsetCommitRequestTopic{ot}
	cresp := request[*kmsg.OffsetCommitResponse](t, cl, oc)
	require.Equal(t, []int16{0, 0, 3}, []int16{cresp.Topics[0].Partitions[0].ErrorCode, cresp.Topics[0].Partitions[1].ErrorCode, cresp.Topics[0].Partitions[2].ErrorCode})
	require.Equal(t, map[mirror.TopicPartition]int64{{Topic: "t", Partition: 0}: 10, {Topic: "t", Partition: 1}: 11}, s.dst.CommittedOffsets("g"))
	oc.Generation, oc.MemberID = 3, "m"
	require.Equal(t, codeUnknownMemberID, request[*kmsg.OffsetCommitResponse](t, cl, oc).Topics[0].Partitions[0].ErrorCode)

	of := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "synced"
	of.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	of.Group = "synced"
	fr := request[*kmsg.OffsetFetchResponse](t, cl, of)
	if len(fr.Groups) > 0 {
		require.Equal(t, int64(42), fr.Groups[0].Topics[0].Partitions[0].Offset)
	} else {
		require.Equal(t, int64(42), fr.Topics[0].Partitions[0].Offset)
	}
	for _, v := range []int16{3, 7, 9} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = v, "synced"
		req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
		r, err := s.dp.Serve(context.Background(), req)
		require.NoError(t, err)
		resp := r.(*kmsg.OffsetFetchResponse)
		if v >= 8 {
			require.Equal(t, int64(42), resp.Groups[0].Topics[0].Partitions[0].Offset)
		} else {
			require.Equal(t, int64(42), resp.Topics[0].Partitions[0].Offset)
		}
	}
	lg := request[*kmsg.ListGroupsResponse](t, cl, kmsg.NewPtrListGroupsRequest())
	var names []string
	for _, g := range lg.Groups {
		names = append(names, g.Group)
		require.Equal(t, "consumer", g.ProtocolType)
	}
	require.ElementsMatch(t, []string{"g", "synced"}, names)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"synced", "none"}
	dresp := request[*kmsg.DescribeGroupsResponse](t, cl, dg)
	require.Equal(t, "Empty", dresp.Groups[0].State)
	require.Equal(t, "Dead", dresp.Groups[1].State)
}
