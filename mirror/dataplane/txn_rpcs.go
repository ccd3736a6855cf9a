package dataplane

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// lockTxn finds the entry of transactional id id and checks the caller's
// producer id and epoch against it, as Kafka's coordinator does for
// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn: an unknown id or another
// producer id is INVALID_PRODUCER_ID_MAPPING, another epoch
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below fencedSince). On success the
// entry is returned with e.op held.
func (dp *DataPlane) lockTxn(id string, pid int64, epoch int16, version, fencedSince int16) (*txnEntry, int16) {
	if id == "" {
		return nil, int16(admin.CodeInvalidRequest)
	}
	e := dp.coord.get(id)
	if e == nil {
		return nil, codeInvalidProducerIDMapping
	}
	e.op.Lock()
	e.mu.Lock()
	code := fetcher.CodeNone
	switch {
	case e.pid != pid:
		code = codeInvalidProducerIDMapping
	case e.epoch != epoch:
		code = fencedCode(version, fencedSince)
	}
	e.mu.Unlock()
	if code != fetcher.CodeNone {
		e.op.Unlock()
		return nil, code
	}
	return e, fetcher.CodeNone
}

// addPartitionsToTxn serves AddPartitionsToTxn: v0-v3 for one transaction,
// v4+ batched (with VerifyOnly).
func (dp *DataPlane) addPartitionsToTxn(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if r.Version >= 4 {
		for _, tx := range r.Transactions {
			resp.Transactions = append(resp.Transactions, dp.addTxnPartitions(tx, r.Version))
		}
		return resp, nil
	}
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = r.TransactionalID, r.ProducerID, r.ProducerEpoch
	for _, rt := range r.Topics {
		t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		t.Topic, t.Partitions = rt.Topic, rt.Partitions
		tx.Topics = append(tx.Topics, t)
	}
	for _, rt := range dp.addTxnPartitions(tx, r.Version).Topics {
		t := kmsg.NewAddPartitionsToTxnResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, rp.ErrorCode
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// addTxnPartitions adds (or, VerifyOnly, checks) one transaction's
// partitions. An unknown topic or partition fails with
// UNKNOWN_TOPIC_OR_PARTITION, a mirror partition that is not STOPPED with
// READ_ONLY_TOPIC (a transaction of this site never takes part in the
// source's transactions), and either leaves the others
// OPERATION_NOT_ATTEMPTED, nothing added; otherwise every partition gets
// the coordinator's code.
func (dp *DataPlane) addTxnPartitions(tx kmsg.AddPartitionsToTxnRequestTransaction, version int16) kmsg.AddPartitionsToTxnResponseTransaction {
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = tx.TransactionalID
	var tps []mirror.TopicPartition
	refused := map[mirror.TopicPartition]int16{}
	for _, rt := range tx.Topics {
		spec, ok := dp.dst.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			tp := mirror.TopicPartition{Topic: rt.Topic, Partition: p}
			tps = append(tps, tp)
			if code := dp.txnPartitionCode(spec, ok, tp); code != fetcher.CodeNone {
				refused[tp] = code
			}
		}
	}
	codes := map[mirror.TopicPartition]int16{}
	if len(refused) > 0 {
		for _, tp := range tps {
			codes[tp] = codeOperationNotAttempted
			if code, ok := refused[tp]; ok {
				codes[tp] = code
			}
		}
	} else {
		codes = dp.txnAddPartitions(tx, tps, version)
	}
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(out.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			t.Topic = tp.Topic
			out.Topics = append(out.Topics, t)
		}
		p := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
		p.Partition, p.ErrorCode = tp.Partition, codes[tp]
		out.Topics[i].Partitions = append(out.Topics[i].Partitions, p)
	}
	return out
}

// txnPartitionCode is the code of a partition a transaction names (spec, ok
// from dp.dst.Topic): UNKNOWN_TOPIC_OR_PARTITION, READ_ONLY_TOPIC for a
// mirror partition that is not STOPPED, else NONE.
func (dp *DataPlane) txnPartitionCode(spec mirror.TopicSpec, ok bool, tp mirror.TopicPartition) int16 {
	switch {
	case !ok || tp.Partition < 0 || tp.Partition >= spec.Partitions:
		return fetcher.CodeUnknownTopicOrPartition
	case dp.readOnly(tp):
		return int16(admin.CodeReadOnlyTopic)
	}
	return fetcher.CodeNone
}

// txnAddPartitions is the coordinator's part of addTxnPartitions.
func (dp *DataPlane) txnAddPartitions(tx kmsg.AddPartitionsToTxnRequestTransaction, tps []mirror.TopicPartition, version int16) map[mirror.TopicPartition]int16 {
	codes := map[mirror.TopicPartition]int16{}
	all := func(code int16) map[mirror.TopicPartition]int16 {
		for _, tp := range tps {
			codes[tp] = code
		}
		return codes
	}
	e, code := dp.lockTxn(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, version, 2)
	if code != fetcher.CodeNone {
		return all(code)
	}
	defer e.op.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.state == txnPrepareCommit || e.state == txnPrepareAbort:
		return all(codeConcurrentTransactions)
	case tx.VerifyOnly:
		for _, tp := range tps {
			codes[tp] = fetcher.CodeNone
			if e.state != txnOngoing || !e.parts[tp] {
				codes[tp] = codeTransactionAbortable
			}
		}
		return codes
	}
	e.begin(time.Now())
	for _, tp := range tps {
		e.parts[tp] = true
	}
	return all(fetcher.CodeNone)
}

// addOffsetsToTxn serves AddOffsetsToTxn: the group's offsets may then be
// staged with TxnOffsetCommit and are committed with the transaction.
func (dp *DataPlane) addOffsetsToTxn(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case r.Group == "":
		resp.ErrorCode = codeInvalidGroupID
		return resp, nil
	case dp.groups() == nil:
		resp.ErrorCode = int16(admin.CodeCoordinatorNotAvailable)
		return resp, nil
	}
	e, code := dp.lockTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Version, 2)
	if code != fetcher.CodeNone {
		resp.ErrorCode = code
		return resp, nil
	}
	defer e.op.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == txnPrepareCommit || e.state == txnPrepareAbort {
		resp.ErrorCode = codeConcurrentTransactions
		return resp, nil
	}
	e.begin(time.Now())
	e.groups[r.Group] = true
	return resp, nil
}

// endTxn serves EndTxn: an Ongoing transaction is prepared, then completed
// at once (markers in every partition it wrote, staged offsets committed on
// commit) before the answer. A retry of a finished end in the same
// direction is answered NONE, the other direction INVALID_TXN_STATE; an
// Empty id INVALID_TXN_STATE. If completing fails (a log write error) the
// id stays in its Prepare state and the answer is CONCURRENT_TRANSACTIONS:
// the client retries, and the retry (or the check loop) resumes it.
//
// Markers go only into partitions this site appended the transaction's data
// to, and never into a mirror partition (read-only: its open transactions
// are the source's). A transaction that wrote to a partition which became a
// mirror partition since cannot commit whole: a COMMIT aborts it instead
// (ABORT markers in its writable partitions) and answers
// TRANSACTION_ABORTABLE, so the client aborts (answered NONE) and retries
// the transaction. Its records in the mirror partition get no marker and are
// never committed there: the mirror's PREPARING truncates them as a
// divergence from the source, or STOPPING aborts them with every open
// transaction. If the partition turns read-only while the commit's markers
// are being written, the others are committed and the answer is
// READ_ONLY_TOPIC, and so is every retry of that EndTxn: the client learns
// that the commit did not reach every partition. An ABORT skips such a
// partition and answers NONE.
func (dp *DataPlane) endTxn(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	e, code := dp.lockTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Version, 2)
	if code != fetcher.CodeNone {
		resp.ErrorCode = code
		return resp, nil
	}
	defer e.op.Unlock()
	e.mu.Lock()
	state := e.state
	resp.ProducerID, resp.ProducerEpoch = e.pid, e.epoch
	downgraded := false
	switch {
	case state == txnOngoing:
		downgraded = r.Commit && dp.wroteToMirror(e)
		e.prepare(r.Commit && !downgraded)
	case state == txnCompleteCommit && r.Commit, state == txnCompleteAbort && !r.Commit:
		if state == txnCompleteCommit && e.partialCommit {
			resp.ErrorCode = int16(admin.CodeReadOnlyTopic) // as the first answer was
		}
		e.mu.Unlock()
		return resp, nil
	case state == txnPrepareCommit && r.Commit, state == txnPrepareAbort && !r.Commit:
	default:
		e.mu.Unlock()
		resp.ErrorCode = codeInvalidTxnState
		return resp, nil
	}
	e.mu.Unlock()
	skipped, err := dp.complete(e, 0)
	switch {
	case downgraded:
		resp.ErrorCode = codeTransactionAbortable // an unfinished abort is resumed by the client's EndTxn(abort)
	case err != nil:
		resp.ErrorCode = codeConcurrentTransactions
	case skipped > 0 && r.Commit:
		resp.ErrorCode = int16(admin.CodeReadOnlyTopic)
	}
	return resp, nil
}
