package dataplane

import (
	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// txnCheck validates one partition's batches against the transaction
// coordinator. A transactional produce to a mirror partition that is not
// STOPPED is READ_ONLY_TOPIC before anything else: its open transactions are
// the source's, and no producer of this site takes part in them. Without a transactional id every batch must be
// non-transactional (INVALID_TXN_STATE: a transaction no coordinator knows
// could never be ended). With one, every batch must be transactional
// (INVALID_RECORD) and of the id's current producer id
// (INVALID_PRODUCER_ID_MAPPING) and epoch (INVALID_PRODUCER_EPOCH), in an
// Ongoing transaction the partition was added to (INVALID_TXN_STATE). On
// success with an id, the entry is returned with e.mu held; the caller
// records what it appended with e.accepted and unlocks after the append.
// Called with the partition's producer-state mutex held.
func (dp *DataPlane) txnCheck(txnID *string, tp mirror.TopicPartition, batches []records.Batch) (*txnEntry, int16, string) {
	if txnID != nil && dp.readOnly(tp) {
		return nil, int16(admin.CodeReadOnlyTopic), "a mirror partition that is not STOPPED takes no part in transactions of this site"
	}
	if txnID == nil {
		for _, b := range batches {
			if b.Attributes().IsTransactional() {
				return nil, codeInvalidTxnState, "transactional batch in a produce without a transactional id"
			}
		}
		return nil, fetcher.CodeNone, ""
	}
	for _, b := range batches {
		switch {
		case !b.Attributes().IsTransactional():
			return nil, codeInvalidRecord, "non-transactional batch in a transactional produce"
		case b.ProducerID() != batches[0].ProducerID() || b.ProducerEpoch() != batches[0].ProducerEpoch():
			return nil, codeInvalidRecord, "batches of several producers in one transactional produce"
		}
	}
	e := dp.coord.get(*txnID)
	if e == nil {
		return nil, codeInvalidProducerIDMapping, "unknown transactional id"
	}
	e.mu.Lock()
	pid, epoch := batches[0].ProducerID(), batches[0].ProducerEpoch()
	code, msg := fetcher.CodeNone, ""
	switch {
	case pid != e.pid:
		code, msg = codeInvalidProducerIDMapping, "producer id is not the transactional id's"
	case epoch != e.epoch:
		code, msg = codeInvalidProducerEpoch, "producer epoch is not the transactional id's current one"
	case e.state != txnOngoing || !e.parts[tp]:
		code, msg = codeInvalidTxnState, "partition not added to an ongoing transaction"
	}
	if code != fetcher.CodeNone {
		e.mu.Unlock()
		return nil, code, msg
	}
	return e, fetcher.CodeNone, ""
}

// readOnly reports whether tp is a mirror partition that is not STOPPED, by
// the Destination's flag or its log's (SetReadOnly sets the log's first when
// a mirror starts, the Destination's first when it stops). No transaction of
// this site's clients may add it, write to it, stage offsets for it or end
// in it.
func (dp *DataPlane) readOnly(tp mirror.TopicPartition) bool {
	if dp.dst.ReadOnly(tp.Topic, tp.Partition) {
		return true
	}
	l, err := dp.dst.Log(tp.Topic, tp.Partition)
	return err == nil && l.ReadOnly()
}
