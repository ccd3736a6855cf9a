package dataplane

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// logSnap is what a client must not change in a mirror partition.
type logSnap struct {
	end, hw, lso int64
	data         []byte
	open         []fetcher.OpenTxn
}

func snapLog(t *testing.T, l fetcher.Log) logSnap {
	t.Helper()
	data, err := l.Read(l.LogStartOffset(), 1<<30)
	require.NoError(t, err)
	return logSnap{end: l.LogEndOffset(), hw: l.HighWatermark(), lso: l.LastStableOffset(), data: data, open: l.OpenTransactions()}
}

// mirroredTxn is site B mirroring topic "src" of site A (partition 0,
// MIRRORING: read-only) with a transaction of A's kgo producer still open
// in it, and the producer id, epoch and next sequence B's log shows.
type mirroredTxn struct {
	a, b    *site
	spec    mirror.TopicSpec
	lb      fetcher.Log
	pid     int64
	pepoch  int16
	nextSeq int32
}

func mirrorOpenTxn(t *testing.T, a, b *site) *mirroredTxn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := a.topic(t, "src", 1)
	cl := a.client(t, kgo.TransactionalID("src-txn"), kgo.DefaultProduceTopic("src"))
	txnProduce(t, cl, true, "committed")
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open-0")}, &kgo.Record{Value: []byte("open-1")}).FirstErr())
	la := a.log(t, "src", 0)
	require.Len(t, la.OpenTransactions(), 1)

	require.NoError(t, b.dst.CreateTopic(ctx, spec))
	lb := b.log(t, "src", 0)
	_, err := lb.BumpLeaderEpoch(10)
	require.NoError(t, err)
	require.NoError(t, b.dst.SetReadOnly("src", 0, true)) // what the mirror does before it fetches
	src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{SeedBrokers: []string{a.addr}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	f, err := fetcher.NewFetcher(src, fetcher.Config{})
	require.NoError(t, err)
	require.NoError(t, f.Add(fetcher.PartitionSpec{Topic: "src", TopicID: spec.TopicID, Partition: 0, Log: lb}))
	require.Eventually(t, func() bool { return lb.LogEndOffset() == la.LogEndOffset() }, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, f.Close())
	require.NoError(t, src.Close())

	m := &mirroredTxn{a: a, b: b, spec: spec, lb: lb}
	open := lb.OpenTransactions()
	require.Len(t, open, 1)
	data, err := lb.Read(open[0].FirstOffset, 1<<20)
	require.NoError(t, err)
	it := records.NewIterator(data)
	for it.Next() {
		if bt := it.Batch(); bt.Attributes().IsTransactional() && !bt.Attributes().IsControl() {
			m.pid, m.pepoch, m.nextSeq = bt.ProducerID(), bt.ProducerEpoch(), lastSeqOf(bt)+1
		}
	}
	require.Equal(t, open[0].ProducerID, m.pid)
	require.Less(t, lb.LastStableOffset(), lb.HighWatermark(), "the open transaction holds the LSO")
	return m
}

// attacker is a client of site B with a transactional id of its own.
type attacker struct {
	t     *testing.T
	cl    *kgo.Client
	dp    *DataPlane
	id    string
	pid   int64
	epoch int16
}

func (x *attacker) initPID(txnID *string, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = txnID, 60000, pid, epoch
	return request[*kmsg.InitProducerIDResponse](x.t, x.cl, req)
}

// add sends AddPartitionsToTxn at version (v3: one transaction, v4: batched)
// for the producer pid/epoch and returns the codes by partition.
func (x *attacker) add(version int16, pid int64, epoch int16, tps ...mirror.TopicPartition) map[mirror.TopicPartition]int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = x.id, pid, epoch
	for _, tp := range tps {
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
		tx.Topics = append(tx.Topics, tt)
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
		req.Topics = append(req.Topics, rt)
	}
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = x.id, pid, epoch
	if version >= 4 {
		req.Transactions, req.Topics = []kmsg.AddPartitionsToTxnRequestTransaction{tx}, nil
	}
	resp := serve[*kmsg.AddPartitionsToTxnResponse](x.t, x.dp, req)
	out := map[mirror.TopicPartition]int16{}
	if version >= 4 {
		for _, rt := range resp.Transactions[0].Topics {
			for _, p := range rt.Partitions {
				out[mirror.TopicPartition{Topic: rt.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
		return out
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			out[mirror.TopicPartition{Topic: rt.Topic, Partition: p.Partition}] = p.ErrorCode
		}
	}
	return out
}

// produce sends recs to topic-0 (with the transactional id when txn) and
// returns the partition's code.
func (x *attacker) produce(topic string, recs []byte, txn bool) int16 {
	req := produceReq(topic, 0, recs)
	if txn {
		req.TransactionID = &x.id
	}
	return request[*kmsg.ProduceResponse](x.t, x.cl, req).Topics[0].Partitions[0].ErrorCode
}

func (x *attacker) end(txnID string, pid int64, epoch int16, commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
	return request[*kmsg.EndTxnResponse](x.t, x.cl, req).ErrorCode
}

func (x *attacker) addOffsets(group string) int16 {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = x.id, x.pid, x.epoch, group
	return request[*kmsg.AddOffsetsToTxnResponse](x.t, x.cl, req).ErrorCode
}

// txnCommit sends TxnOffsetCommit of offset for each partition and returns
// the codes by partition.
func (x *attacker) txnCommit(group string, offset int64, tps ...mirror.TopicPartition) map[mirror.TopicPartition]int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Generation = x.id, x.pid, x.epoch, group, -1
	for _, tp := range tps {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = tp.Topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = tp.Partition, offset
		rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{rp}
		req.Topics = append(req.Topics, rt)
	}
	out := map[mirror.TopicPartition]int16{}
	for _, rt := range request[*kmsg.TxnOffsetCommitResponse](x.t, x.cl, req).Topics {
		for _, p := range rt.Partitions {
			out[mirror.TopicPartition{Topic: rt.Topic, Partition: p.Partition}] = p.ErrorCode
		}
	}
	return out
}

// TestTxnMirrorPartitionUntouchable is the bar: a client of the mirror site
// that knows the producer id and epoch of a transaction open in a MIRRORING
// partition (read from the mirrored batch) tries every transactional path
// into it; the partition's log end, bytes, high watermark, LSO and open
// transactions stay as mirrored, and every path answers its code.
func TestTxnMirrorPartitionUntouchable(t *testing.T) {
	a := startSiteNamed(t, "source-cluster", Config{})
	b := startSiteNamed(t, "mirror-cluster", Config{})
	m := mirrorOpenTxn(t, a, b)
	b.topic(t, "local", 1)
	before := snapLog(t, m.lb)
	src := mirror.TopicPartition{Topic: "src"}
	local := mirror.TopicPartition{Topic: "local"}
	readOnly := codeInvalidTopic // READ_ONLY_TOPIC as an ordinary client sees it (txnCodesForClient)
	x := &attacker{t: t, cl: b.client(t), dp: b.dp, id: "evil"}

	// InitProducerId passing the mirrored id, with and without a
	// transactional id, hands out ids of B's own range only.
	first, limit := mirror.LocalProducerIDRange("mirror-cluster")
	srcFirst, _ := mirror.LocalProducerIDRange("source-cluster")
	require.NotEqual(t, first, srcFirst, "the two sites allocate from different slots")
	require.True(t, m.pid >= srcFirst && m.pid < srcFirst+mirror.LocalProducerIDRangeSize, "the source is a kmirror site: its ids lie in its own slot")
	init := x.initPID(&x.id, m.pid, m.pepoch)
	require.Equal(t, int16(0), init.ErrorCode)
	x.pid, x.epoch = init.ProducerID, init.ProducerEpoch
	require.NotEqual(t, m.pid, x.pid)
	require.True(t, x.pid >= first && x.pid < limit, "pid %d in [%d, %d)", x.pid, first, limit)
	idem := x.initPID(nil, m.pid, m.pepoch)
	require.Equal(t, int16(0), idem.ErrorCode)
	require.NotEqual(t, m.pid, idem.ProducerID)
	// Many calls (across block boundaries) never reach the mirrored id.
	for i := 0; i < 2*mirror.ProducerIDBlockSize+10; i++ {
		r := serve[*kmsg.InitProducerIDResponse](t, b.dp, kmsg.NewPtrInitProducerIDRequest())
		require.Equal(t, int16(0), r.ErrorCode)
		require.NotEqual(t, m.pid, r.ProducerID)
		require.True(t, r.ProducerID >= first && r.ProducerID < limit)
	}
	// The source's transactional id gets a fresh id on B too.
	srcID := "src-txn"
	si := x.initPID(&srcID, m.pid, m.pepoch)
	require.Equal(t, int16(0), si.ErrorCode)
	require.NotEqual(t, m.pid, si.ProducerID)

	// AddPartitionsToTxn: the mirror partition is READ_ONLY_TOPIC, v3 and
	// v4 alike, alone or with a writable partition (then not attempted).
	for _, v := range []int16{3, 4} {
		require.Equal(t, map[mirror.TopicPartition]int16{src: readOnly}, x.add(v, x.pid, x.epoch, src))
		require.Equal(t, map[mirror.TopicPartition]int16{src: readOnly, local: codeOperationNotAttempted}, x.add(v, x.pid, x.epoch, src, local))
	}
	require.Equal(t, map[mirror.TopicPartition]int16{src: readOnly}, x.add(3, m.pid, m.pepoch, src))

	// Transactional Produce: with the mirrored producer's id, epoch and next
	// sequence, and with the attacker's own; non-transactional and
	// idempotent with the mirrored id; raw control batches (COMMIT, ABORT)
	// of the mirrored producer, with and without the transactional id.
	mirroredBatch := dataBatchEpoch(t, 0, 0, 1, m.pid, m.pepoch, m.nextSeq, true)
	require.Equal(t, codeInvalidTopic, x.produce("src", mirroredBatch, true))
	require.Equal(t, codeInvalidTopic, x.produce("src", dataBatchEpoch(t, 0, 0, 1, x.pid, x.epoch, 0, true), true))
	require.Equal(t, codeInvalidTopic, x.produce("src", dataBatchEpoch(t, 0, 0, 1, m.pid, m.pepoch, m.nextSeq, false), false))
	require.Equal(t, codeInvalidTopic, x.produce("src", dataBatch(t, 0, 0, 1, -1, -1, false), false))
	for _, ct := range []records.ControlType{records.ControlCommit, records.ControlAbort} {
		ctrl := records.BuildControlBatch(records.ControlBatchSpec{ProducerID: m.pid, ProducerEpoch: m.pepoch, Type: ct, Timestamp: 5})
		// Refused for the partition being read-only (checked first, as Kafka checks
		// an internal topic), and for being a client's control batch where writable.
		require.Equal(t, codeInvalidTopic, x.produce("src", ctrl, false))
		require.Equal(t, codeInvalidTopic, x.produce("src", ctrl, true))
		require.Equal(t, codeInvalidRecord, x.produce("local", ctrl, false))
	}

	// AddOffsetsToTxn is for a group and passes; TxnOffsetCommit of the
	// mirror partition is READ_ONLY_TOPIC and stages nothing.
	require.Equal(t, int16(0), x.addOffsets("g"))
	require.Equal(t, map[mirror.TopicPartition]int16{src: readOnly}, x.txnCommit("g", 1, src))
	require.Equal(t, map[mirror.TopicPartition]int16{src: readOnly, local: codeOperationNotAttempted}, x.txnCommit("g", 1, src, local))

	// The attacker's transaction, with data in the writable partition only,
	// commits there; a second one aborts there. The mirror partition gets
	// no marker either way.
	require.Equal(t, map[mirror.TopicPartition]int16{local: 0}, x.add(3, x.pid, x.epoch, local))
	require.Equal(t, int16(0), x.produce("local", dataBatchEpoch(t, 0, 0, 1, x.pid, x.epoch, 0, true), true))
	require.Equal(t, int16(0), x.end(x.id, x.pid, x.epoch, true))
	require.Equal(t, map[mirror.TopicPartition]int16{local: 0}, x.add(3, x.pid, x.epoch, local))
	require.Equal(t, int16(0), x.produce("local", dataBatchEpoch(t, 0, 0, 1, x.pid, x.epoch, 1, true), true))
	require.Equal(t, int16(0), x.end(x.id, x.pid, x.epoch, false))
	requireClosed(t, b, "local", 1)
	require.Nil(t, b.dst.CommittedOffsets("g"), "nothing staged for the mirror partition, nothing committed")

	// EndTxn COMMIT and ABORT with the mirrored producer id and epoch, under
	// the attacker's id and the source's: no such producer here.
	for _, commit := range []bool{true, false} {
		require.Equal(t, codeInvalidProducerIDMapping, x.end(x.id, m.pid, m.pepoch, commit))
		require.Equal(t, codeInvalidProducerIDMapping, x.end(srcID, m.pid, m.pepoch, commit))
		require.Equal(t, codeInvalidTxnState, x.end(srcID, si.ProducerID, si.ProducerEpoch, commit)) // nothing open
	}

	// The check loop (timeouts, orphans) leaves the mirror partition alone.
	b.dp.checkTransactions(time.Now().Add(time.Hour))
	b.dp.checkTransactions(time.Now().Add(2 * time.Hour))

	after := snapLog(t, m.lb)
	require.Equal(t, before.end, after.end)
	require.True(t, bytes.Equal(before.data, after.data), "mirror partition bytes changed")
	require.Equal(t, before.hw, after.hw)
	require.Equal(t, before.lso, after.lso)
	require.Equal(t, before.open, after.open)
	require.Equal(t, m.pid, after.open[0].ProducerID)
}

// fixedIDs is an allocator whose blocks start at a given id: a source whose
// producer ids lie in this site's range (two sites sharing a slot).
type fixedIDs struct{ next int64 }

func (f *fixedIDs) AllocateProducerIDs(context.Context) (mirror.ProducerIDBlock, error) {
	b := mirror.ProducerIDBlock{First: f.next, Size: 2}
	f.next += 2
	return b, nil
}

// TestTxnMirrorPartitionUntouchableWithSameID: even when this site's
// allocator hands out the very producer id of the mirrored open
// transaction, that producer's transactions, commits, aborts, fences and
// timeouts never write into the mirror partition.
func TestTxnMirrorPartitionUntouchableWithSameID(t *testing.T) {
	a := startSiteNamed(t, "source-cluster", Config{})
	b := startSiteNamed(t, "mirror-cluster", Config{})
	m := mirrorOpenTxn(t, a, b)
	b.topic(t, "local", 1)
	before := snapLog(t, m.lb)
	dp, err := New(Config{Destination: b.dst, AdvertisedHost: "h", AdvertisedPort: 1, ProducerIDs: &fixedIDs{next: m.pid}})
	require.NoError(t, err)
	defer func() { require.NoError(t, dp.Close()) }()
	x := &rawTxn{t: t, dp: dp, id: "same"}
	require.Equal(t, int16(0), x.init())
	require.Equal(t, m.pid, x.pid, "the allocator handed out the mirrored id")
	require.Equal(t, m.pepoch, x.epoch)
	require.Equal(t, []int16{codeInvalidTopic}, x.add("src", 0))
	require.Equal(t, codeInvalidTopic, x.produce("src", 0, m.nextSeq, 1).ErrorCode)
	require.Equal(t, []int16{0}, x.add("local", 0))
	require.Equal(t, int16(0), x.produce("local", 0, 0, 1).ErrorCode)
	require.Equal(t, int16(0), x.end(4, true))
	// An open transaction fenced by a re-init, and one timed out.
	require.Equal(t, []int16{0}, x.add("local", 0))
	require.Equal(t, int16(0), x.produce("local", 0, 1, 1).ErrorCode)
	require.Equal(t, int16(0), x.init())
	require.Equal(t, []int16{0}, x.add("local", 0))
	require.Equal(t, int16(0), x.produce("local", 0, 0, 1).ErrorCode)
	dp.checkTransactions(time.Now().Add(time.Hour))
	requireClosed(t, b, "local", 1)

	after := snapLog(t, m.lb)
	require.Equal(t, before, after)
}

// TestTxnPartitionBecameMirror: a transaction wrote to two writable
// partitions; one becomes a mirror partition before EndTxn. The COMMIT
// cannot be whole, so the transaction is aborted (ABORT in the writable
// partition, nothing in the mirror partition, whose copy of the records stays
// open for the mirror's PREPARING or STOPPING to settle) and the answer is
// TRANSACTION_ABORTABLE; the client's ABORT then succeeds.
func TestTxnPartitionBecameMirror(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "a", 1)
	s.topic(t, "b", 1)
	x := &rawTxn{t: t, dp: s.dp, id: "moved"}
	require.Equal(t, int16(0), x.init())
	require.Equal(t, []int16{0}, x.add("a", 0))
	require.Equal(t, []int16{0}, x.add("b", 0))
	require.Equal(t, int16(0), x.produce("a", 0, 0, 2).ErrorCode)
	require.Equal(t, int16(0), x.produce("b", 0, 0, 2).ErrorCode)
	require.NoError(t, s.dst.SetReadOnly("b", 0, true))
	lb := s.log(t, "b", 0)
	before := snapLog(t, lb)
	require.Len(t, before.open, 1)

	require.Equal(t, codeTransactionAbortable, x.end(4, true))
	requireClosed(t, s, "a", 1)
	la := s.log(t, "a", 0)
	data, err := la.Read(2, 1<<20)
	require.NoError(t, err)
	ct, err := records.Batch(data).ControlType()
	require.NoError(t, err)
	require.Equal(t, records.ControlAbort, ct, "the writable partition is aborted, not committed")
	require.Equal(t, before, snapLog(t, lb), "the mirror partition gets no marker")
	require.Equal(t, int16(0), x.end(4, false))           // the client's abort
	require.Equal(t, codeInvalidTxnState, x.end(4, true)) // it was aborted
	require.Equal(t, int64(3), la.LogEndOffset())
	require.Equal(t, before, snapLog(t, lb))

	// Added and written, but written before this transaction: a partition
	// whose open transaction of the same producer this site did not accept
	// gets no marker (the producer's batch appended by replication, as a
	// colliding mirrored id would be).
	s.topic(t, "c", 1)
	require.Equal(t, []int16{0}, x.add("a", 0))
	require.Equal(t, []int16{0}, x.add("c", 0))
	lc := s.log(t, "c", 0)
	require.NoError(t, lc.Append(dataBatchEpoch(t, 0, 0, 1, x.pid, x.epoch, 0, true)))
	require.Equal(t, int16(0), x.produce("a", 0, 2, 1).ErrorCode)
	cBefore := snapLog(t, lc)
	require.Equal(t, int16(0), x.end(4, true))
	requireClosed(t, s, "a", 1)
	require.Equal(t, cBefore, snapLog(t, lc), "c was added but this site appended nothing of the transaction there")
}

// TestTxnCompleteSkipsPartitionTurnedMirror: a partition that turns
// read-only after the commit was decided gets no marker (the log refuses it
// atomically with the flag); the others are committed, and complete reports
// the skipped partition (EndTxn answers it READ_ONLY_TOPIC).
func TestTxnCompleteSkipsPartitionTurnedMirror(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "a", 1)
	s.topic(t, "b", 1)
	x := &rawTxn{t: t, dp: s.dp, id: "race"}
	require.Equal(t, int16(0), x.init())
	require.Equal(t, []int16{0, 0}, append(x.add("a", 0), x.add("b", 0)...))
	require.Equal(t, int16(0), x.produce("a", 0, 0, 1).ErrorCode)
	require.Equal(t, int16(0), x.produce("b", 0, 0, 1).ErrorCode)
	e := s.dp.coord.get("race")
	e.op.Lock()
	e.mu.Lock()
	e.prepare(true) // the commit is decided ...
	e.mu.Unlock()
	require.NoError(t, s.dst.SetReadOnly("b", 0, true)) // ... then b becomes a mirror partition
	lb := s.log(t, "b", 0)
	before := snapLog(t, lb)
	skipped, err := s.dp.complete(e, 0)
	e.op.Unlock()
	require.NoError(t, err)
	require.Equal(t, 1, skipped)
	requireClosed(t, s, "a", 1)
	require.Equal(t, before, snapLog(t, lb))
	require.Equal(t, codeInvalidTopic, x.end(4, true)) // a retry is told what the commit missed

	// The marker path itself refuses a read-only partition.
	_, err = s.dp.writeMarker(mirror.TopicPartition{Topic: "b"}, fetcher.TxnMarker{ProducerID: x.pid, ProducerEpoch: x.epoch,
		Commit: true, OnlyIfWritable: true}, nil)
	require.ErrorIs(t, err, fetcher.ErrReadOnly)
	require.Equal(t, before, snapLog(t, lb))
}

// TestLocalIDEqualToMirroredAfterFailover: after a failover the partition
// holds mirrored batches of producer P, then STOPPING's ABORT of P's open
// transaction and MIRROR_PID_RESET. A local producer that gets the same id
// (an allocator sharing the source's slot) is a new producer there: it
// starts at sequence 0 and its transaction commits with its own marker,
// leaving the mirrored records aborted. Without the barrier (a partition
// that never stopped, made writable by hand) the same batch is refused as
// out of sequence: the barrier, not the number, separates them.
func TestLocalIDEqualToMirroredAfterFailover(t *testing.T) {
	s := startSite(t, Config{})
	const pid = int64(4242)
	for _, topic := range []string{"stopped", "nobarrier"} {
		s.topic(t, topic, 1)
		l := s.log(t, topic, 0)
		require.NoError(t, s.dst.SetReadOnly(topic, 0, true))
		require.NoError(t, l.Append(dataBatchEpoch(t, 0, 0, 3, pid, 0, 0, false)))
		require.NoError(t, l.Append(dataBatchEpoch(t, 3, 0, 2, pid, 0, 3, true))) // open on the source
		if topic == "stopped" {
			_, err := fetcher.AbortOpenTransactions(l, 7)
			require.NoError(t, err)
			_, err = l.AppendAsLeader(records.BuildControlBatch(records.ControlBatchSpec{ProducerID: -1, ProducerEpoch: -1,
				Type: records.ControlMirrorPIDReset, Timestamp: 7}))
			require.NoError(t, err)
		}
		require.NoError(t, s.dst.SetReadOnly(topic, 0, false))
	}
	dp, err := New(Config{Destination: s.dst, AdvertisedHost: "h", AdvertisedPort: 1, ProducerIDs: &fixedIDs{next: pid}})
	require.NoError(t, err)
	defer func() { require.NoError(t, dp.Close()) }()

	x := &rawTxn{t: t, dp: dp, id: "local"}
	require.Equal(t, int16(0), x.init())
	require.Equal(t, pid, x.pid)
	require.Equal(t, codeInvalidTxnState, x.produce("nobarrier", 0, 0, 1).ErrorCode, "not added")
	require.Equal(t, []int16{0, 0}, append(x.add("stopped", 0), x.add("nobarrier", 0)...))
	b := dataBatchEpoch(t, 100, 0, 1, x.pid, x.epoch, 0, true) // value v100
	binary.BigEndian.PutUint64(b, 0)                           // a client's base offset (outside the CRC)
	req := produceReq("stopped", 0, b)
	req.TransactionID = &x.id
	p := serve[*kmsg.ProduceResponse](t, dp, req).Topics[0].Partitions[0]
	require.Equal(t, int16(0), p.ErrorCode)
	require.Equal(t, int64(7), p.BaseOffset, "after the mirrored records, the ABORT and the barrier")
	require.Equal(t, codeOutOfOrderSequence, x.produce("nobarrier", 0, 0, 1).ErrorCode)
	require.Equal(t, int16(0), x.end(4, true))
	requireClosed(t, s, "stopped", 1)
	got := consumeUntil(t, s, "stopped", kgo.ReadCommitted(), "v100")
	require.Equal(t, []string{"v0", "v1", "v2", "v100"}, got, "the mirrored committed records, the local transaction; the aborted ones skipped")
}
