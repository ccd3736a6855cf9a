package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// rawTxn drives the coordinator with hand-made requests through Serve.
type rawTxn struct {
	t     *testing.T
	dp    *DataPlane
	id    string
	pid   int64
	epoch int16
}

func serve[R kmsg.Response](t *testing.T, dp *DataPlane, req kmsg.Request) R {
	t.Helper()
	resp, err := dp.Serve(context.Background(), req)
	require.NoError(t, err)
	return resp.(R)
}

func (x *rawTxn) init() int16 {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &x.id, 60000
	resp := serve[*kmsg.InitProducerIDResponse](x.t, x.dp, req)
	if resp.ErrorCode == 0 {
		x.pid, x.epoch = resp.ProducerID, resp.ProducerEpoch
	}
	return resp.ErrorCode
}

// add sends AddPartitionsToTxn v3 and returns the codes per partition.
func (x *rawTxn) add(topic string, parts ...int32) []int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, x.id, x.pid, x.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{rt}
	var codes []int16
	for _, t := range serve[*kmsg.AddPartitionsToTxnResponse](x.t, x.dp, req).Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

// produce sends one transactional batch of n records at seq.
func (x *rawTxn) produce(topic string, p int32, seq int32, n int) kmsg.ProduceResponseTopicPartition {
	req := produceReq(topic, p, dataBatchEpoch(x.t, 0, 0, n, x.pid, x.epoch, seq, true))
	req.TransactionID = &x.id
	return serve[*kmsg.ProduceResponse](x.t, x.dp, req).Topics[0].Partitions[0]
}

func (x *rawTxn) end(version int16, commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = version, x.id, x.pid, x.epoch, commit
	return serve[*kmsg.EndTxnResponse](x.t, x.dp, req).ErrorCode
}

// TestTxnBadInput: each bad request gets Kafka's code and appends nothing.
func TestTxnBadInput(t *testing.T) {
	s := startSite(t, Config{MaxTransactionTimeout: time.Minute})
	s.topic(t, "t", 2)
	l := s.log(t, "t", 0)
	x := &rawTxn{t: t, dp: s.dp, id: "raw"}

	// InitProducerId: empty id, bad timeouts.
	for _, c := range []struct {
		id      string
		timeout int32
		code    int16
	}{{"", 1000, 42}, {"raw", 0, 50}, {"raw", -1, 50}, {"raw", 60001, 50}} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &c.id, c.timeout
		require.Equal(t, c.code, serve[*kmsg.InitProducerIDResponse](t, s.dp, req).ErrorCode, "%+v", c)
	}
	// FindCoordinator: transactions are served by this node; an empty id is refused.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"raw", ""}
	fcr := serve[*kmsg.FindCoordinatorResponse](t, s.dp, fc)
	require.Equal(t, [2]int16{0, 42}, [2]int16{fcr.Coordinators[0].ErrorCode, fcr.Coordinators[1].ErrorCode})
	require.Equal(t, int32(s.dp.cfg.AdvertisedPort), fcr.Coordinators[0].Port)

	// Before InitProducerId the id is unknown everywhere.
	require.Equal(t, int16(49), x.end(3, true))
	require.Equal(t, []int16{49}, x.add("t", 0))
	require.Equal(t, int16(49), x.produce("t", 0, 0, 1).ErrorCode)
	require.Equal(t, int16(0), x.init())

	// Produce to a partition not added; a non-transactional batch with an
	// id; a transactional batch without one.
	require.Equal(t, int16(48), x.produce("t", 0, 0, 1).ErrorCode)
	plain := produceReq("t", 0, dataBatchEpoch(t, 0, 0, 1, x.pid, x.epoch, 0, false))
	plain.TransactionID = &x.id
	require.Equal(t, int16(87), serve[*kmsg.ProduceResponse](t, s.dp, plain).Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int16(48), serve[*kmsg.ProduceResponse](t, s.dp,
		produceReq("t", 0, dataBatchEpoch(t, 0, 0, 1, x.pid, x.epoch, 0, true))).Topics[0].Partitions[0].ErrorCode)

	// AddPartitionsToTxn naming an unknown topic or partition adds nothing.
	require.Equal(t, []int16{3}, x.add("nope", 0))
	require.Equal(t, []int16{55, 3}, x.add("t", 0, 9))
	require.Equal(t, int16(48), x.produce("t", 0, 0, 1).ErrorCode)
	require.Equal(t, int16(48), x.end(3, false)) // still Empty: nothing to end
	require.Equal(t, int64(0), l.LogEndOffset())

	// A transaction; a wrong epoch or producer id is refused everywhere.
	require.Equal(t, []int16{0}, x.add("t", 0))
	require.Equal(t, int16(0), x.produce("t", 0, 0, 2).ErrorCode)
	good := *x
	x.epoch++
	require.Equal(t, int16(47), x.produce("t", 0, 2, 1).ErrorCode)
	require.Equal(t, []int16{90}, x.add("t", 1))
	require.Equal(t, int16(90), x.end(3, true))
	require.Equal(t, int16(47), x.end(1, true)) // before v2: INVALID_PRODUCER_EPOCH
	x.epoch, x.pid = good.epoch, good.pid+1
	require.Equal(t, int16(49), x.end(3, true))
	require.Equal(t, int16(49), x.produce("t", 0, 2, 1).ErrorCode)
	*x = good
	require.Equal(t, int64(2), l.LogEndOffset())
	require.Len(t, l.OpenTransactions(), 1)

	// Abort (v1), its retry, then a commit of the finished transaction.
	require.Equal(t, int16(0), x.end(1, false))
	require.Equal(t, int16(0), x.end(1, false))
	require.Equal(t, int16(48), x.end(1, true))
	require.Empty(t, l.OpenTransactions())
	require.Equal(t, int64(3), l.LogEndOffset())
	require.Equal(t, l.HighWatermark(), l.LastStableOffset())
	last, err := l.Read(2, 1<<10)
	require.NoError(t, err)
	ct, err := records.Batch(last).ControlType()
	require.NoError(t, err)
	require.Equal(t, records.ControlAbort, ct)
	// A partition added but never written gets no marker.
	require.Equal(t, []int16{0, 0}, x.add("t", 0, 1))
	require.Equal(t, int16(0), x.end(3, true))
	require.Equal(t, int64(3), l.LogEndOffset())
	require.Equal(t, int64(0), s.log(t, "t", 1).LogEndOffset())
}

// TestTxnBatchedAddAndVerify: AddPartitionsToTxn v4+ (batched) adds and
// verifies; per-transaction codes.
func TestTxnBatchedAddAndVerify(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 2)
	x := &rawTxn{t: t, dp: s.dp, id: "b"}
	require.Equal(t, int16(0), x.init())
	tx := func(verify bool, parts ...int32) kmsg.AddPartitionsToTxnRequestTransaction {
		tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = x.id, x.pid, x.epoch, verify
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "t", parts
		tr.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{tt}
		return tr
	}
	unknown := tx(false, 0)
	unknown.TransactionalID = "other"
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.Transactions = 5, []kmsg.AddPartitionsToTxnRequestTransaction{tx(false, 0), unknown}
	resp := serve[*kmsg.AddPartitionsToTxnResponse](t, s.dp, req)
	require.Equal(t, int16(0), resp.Transactions[0].Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int16(49), resp.Transactions[1].Topics[0].Partitions[0].ErrorCode)
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx(true, 0, 1)}
	resp = serve[*kmsg.AddPartitionsToTxnResponse](t, s.dp, req)
	ps := resp.Transactions[0].Topics[0].Partitions
	require.Equal(t, [2]int16{0, 120}, [2]int16{ps[0].ErrorCode, ps[1].ErrorCode})
	require.Equal(t, int16(48), x.produce("t", 1, 0, 1).ErrorCode) // verify did not add partition 1
	require.Equal(t, int16(0), x.produce("t", 0, 0, 1).ErrorCode)
	require.Equal(t, int16(0), x.end(4, true))
	require.Empty(t, s.log(t, "t", 0).OpenTransactions())
}

// TestTxnOffsetCommit: offsets staged with TxnOffsetCommit reach the
// destination's group offsets only when the transaction commits.
func TestTxnOffsetCommit(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 2)
	x := &rawTxn{t: t, dp: s.dp, id: "eos"}
	require.Equal(t, int16(0), x.init())
	addOffsets := func(group string) int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = 3, x.id, x.pid, x.epoch, group
		return serve[*kmsg.AddOffsetsToTxnResponse](t, s.dp, req).ErrorCode
	}
	commit := func(group string, offset int64, mod func(*kmsg.TxnOffsetCommitRequest)) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, x.id, x.pid, x.epoch
		req.Group, req.Generation = group, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 1, offset
		rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{rp}
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
		if mod != nil {
			mod(req)
		}
		return serve[*kmsg.TxnOffsetCommitResponse](t, s.dp, req).Topics[0].Partitions[0].ErrorCode
	}
	want := map[mirror.TopicPartition]int64{{Topic: "t", Partition: 1}: 7}

	require.Equal(t, int16(48), commit("g", 7, nil)) // group not added
	require.Equal(t, int16(24), addOffsets(""))
	require.Equal(t, int16(0), addOffsets("g"))
	require.Equal(t, int16(25), commit("g", 7, func(r *kmsg.TxnOffsetCommitRequest) { r.Generation, r.MemberID = 3, "m" }))
	require.Equal(t, int16(47), commit("g", 7, func(r *kmsg.TxnOffsetCommitRequest) { r.ProducerEpoch++ }))
	require.Equal(t, int16(3), commit("g", 7, func(r *kmsg.TxnOffsetCommitRequest) { r.Topics[0].Topic = "nope" }))
	require.Equal(t, int16(0), commit("g", 7, nil))
	require.Empty(t, s.dst.CommittedOffsets("g"))
	require.Equal(t, int16(0), x.end(3, true))
	require.Equal(t, want, s.dst.CommittedOffsets("g"))

	// An aborted transaction's offsets are dropped.
	require.Equal(t, int16(0), addOffsets("g"))
	require.Equal(t, int16(0), commit("g", 9, nil))
	require.Equal(t, int16(0), x.end(3, false))
	require.Equal(t, want, s.dst.CommittedOffsets("g"))
}

// TestTxnReinitAbortsOpen: InitProducerId for an id with an open
// transaction aborts it at the bumped epoch and answers that epoch; the old
// epoch's produce is then INVALID_PRODUCER_EPOCH. A retried InitProducerId
// with the previous id and epoch gets the same answer.
func TestTxnReinitAbortsOpen(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 1)
	l := s.log(t, "t", 0)
	x := &rawTxn{t: t, dp: s.dp, id: "re"}
	require.Equal(t, int16(0), x.init())
	require.Equal(t, []int16{0}, x.add("t", 0))
	require.Equal(t, int16(0), x.produce("t", 0, 0, 3).ErrorCode)
	old := *x
	require.Equal(t, int16(0), x.init())
	require.Equal(t, [2]int64{old.pid, int64(old.epoch) + 1}, [2]int64{x.pid, int64(x.epoch)})
	require.Empty(t, l.OpenTransactions())
	require.Equal(t, int64(4), l.LogEndOffset())
	require.Equal(t, int16(47), old.produce("t", 0, 3, 1).ErrorCode)

	// KIP-360: the current id and epoch bump; the previous ones (a lost
	// answer) get the current answer; anything else is fenced.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &x.id, 1000
	req.ProducerID, req.ProducerEpoch = x.pid, x.epoch
	r := serve[*kmsg.InitProducerIDResponse](t, s.dp, req)
	require.Equal(t, [3]int64{0, x.pid, int64(x.epoch) + 1}, [3]int64{int64(r.ErrorCode), r.ProducerID, int64(r.ProducerEpoch)})
	r = serve[*kmsg.InitProducerIDResponse](t, s.dp, req)
	require.Equal(t, [3]int64{0, x.pid, int64(x.epoch) + 1}, [3]int64{int64(r.ErrorCode), r.ProducerID, int64(r.ProducerEpoch)})
	req.ProducerEpoch = 0
	require.Equal(t, int16(90), serve[*kmsg.InitProducerIDResponse](t, s.dp, req).ErrorCode)
	req.Version = 3
	require.Equal(t, int16(47), serve[*kmsg.InitProducerIDResponse](t, s.dp, req).ErrorCode)
}

// TestTxnOrphanAbortedAfterRestart: a transaction left open by a data plane
// that is gone (a restart: coordinator state is in memory) is aborted by the
// new one once OrphanTransactionTimeout has passed, at its own producer
// epoch, and reported; an open transaction in a read-only (mirror)
// partition is left alone.
func TestTxnOrphanAbortedAfterRestart(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 1)
	s.topic(t, "m", 1)
	x := &rawTxn{t: t, dp: s.dp, id: "crashed"}
	require.Equal(t, int16(0), x.init())
	require.Equal(t, []int16{0}, x.add("t", 0))
	require.Equal(t, int16(0), x.produce("t", 0, 0, 2).ErrorCode)
	lm := s.log(t, "m", 0)
	require.NoError(t, lm.Append(dataBatch(t, 0, 0, 2, 77, 0, true))) // a mirrored open transaction
	require.NoError(t, s.dst.SetReadOnly("m", 0, true))
	require.NoError(t, s.dp.Close()) // the old coordinator is gone with its state

	ev := &abortEvents{}
	start := time.Now()
	dp2, err := New(Config{Destination: s.dst, AdvertisedHost: "h", AdvertisedPort: 1, OnTxnAbort: ev.add,
		TransactionCheckInterval: 5 * time.Millisecond, OrphanTransactionTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	defer func() { require.NoError(t, dp2.Close()) }()
	l := s.log(t, "t", 0)
	// The abort is reported after its marker is appended: wait for the report.
	require.Eventually(t, func() bool { return len(ev.list()) > 0 }, 20*time.Second, 5*time.Millisecond)
	require.Empty(t, l.OpenTransactions())
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	got := ev.list()
	require.Equal(t, []TxnAbort{{Reason: AbortOrphan, Topic: "t", Partition: 0, ProducerID: x.pid, ProducerEpoch: x.epoch,
		FirstOffset: 0, MarkerOffset: 2}}, got)
	require.Equal(t, l.HighWatermark(), l.LastStableOffset())
	require.Len(t, lm.OpenTransactions(), 1)

	// The old producer's id is unknown to the new coordinator.
	x.dp = dp2
	require.Equal(t, int16(49), x.end(3, true))
	require.Equal(t, int16(49), x.produce("t", 0, 2, 1).ErrorCode)
	require.Equal(t, int64(3), l.LogEndOffset())
}

// TestTxnListDescribe: ListTransactions (state and producer filters,
// unknown states) and DescribeTransactions (partitions, unknown id).
func TestTxnListDescribe(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 2)
	a := &rawTxn{t: t, dp: s.dp, id: "a"}
	b := &rawTxn{t: t, dp: s.dp, id: "b"}
	require.Equal(t, int16(0), a.init())
	require.Equal(t, int16(0), b.init())
	require.Equal(t, []int16{0, 0}, a.add("t", 1, 0))

	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version, lt.StateFilters = 1, []string{"Ongoing", "Bogus"}
	lr := serve[*kmsg.ListTransactionsResponse](t, s.dp, lt)
	require.Equal(t, []string{"Bogus"}, lr.UnknownStateFilters)
	require.Len(t, lr.TransactionStates, 1)
	require.Equal(t, [2]string{"a", "Ongoing"}, [2]string{lr.TransactionStates[0].TransactionalID, lr.TransactionStates[0].TransactionState})
	lt.StateFilters, lt.ProducerIDFilters = nil, []int64{b.pid}
	lr = serve[*kmsg.ListTransactionsResponse](t, s.dp, lt)
	require.Len(t, lr.TransactionStates, 1)
	require.Equal(t, [2]string{"b", "Empty"}, [2]string{lr.TransactionStates[0].TransactionalID, lr.TransactionStates[0].TransactionState})

	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"a", "zzz"}
	dr := serve[*kmsg.DescribeTransactionsResponse](t, s.dp, dt)
	require.Equal(t, int16(0), dr.TransactionStates[0].ErrorCode)
	require.Equal(t, "Ongoing", dr.TransactionStates[0].State)
	require.Equal(t, int32(60000), dr.TransactionStates[0].TimeoutMillis)
	require.Equal(t, []int32{0, 1}, dr.TransactionStates[0].Topics[0].Partitions)
	require.Equal(t, int16(105), dr.TransactionStates[1].ErrorCode)
}
