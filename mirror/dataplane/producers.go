package dataplane

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// partProducers serializes the Produce calls of one partition (sequence
// check and append are one step) and finds its producers' idempotence
// state. The state is the log's own (fetcher.ProducerStateReader: MemoryLog
// and FileLog keep it on every append, mirrored batches included, and
// rebuild it on truncation and at open), as Kafka's ProducerStateManager is
// per log: nothing is scanned at the first produce after a failover or a
// restart. Only for a Log that does not keep it is the state rebuilt here
// from the batch headers (fetcher.ProducerStates, the same rules), whenever
// the log changed other than through this data plane.
type partProducers struct {
	mu  sync.Mutex
	log fetcher.ProducerStateReader // the log's state; nil: fallback below
	// The fallback: the state rebuilt from the headers and the log end it
	// matches (-1 before the first load).
	loadedEnd int64
	rebuilt   *fetcher.ProducerStates
}

func (dp *DataPlane) producersOf(tp mirror.TopicPartition) *partProducers {
	dp.partsMu.Lock()
	defer dp.partsMu.Unlock()
	pp, ok := dp.parts[tp]
	if !ok {
		pp = &partProducers{loadedEnd: -1}
		dp.parts[tp] = pp
	}
	return pp
}

// load makes the state of log available: the log's own, or (fallback)
// rebuilt from its batch headers when the log changed other than through
// this data plane.
func (pp *partProducers) load(log fetcher.Log) error {
	if r, ok := log.(fetcher.ProducerStateReader); ok {
		pp.log, pp.rebuilt = r, nil
		return nil
	}
	pp.log = nil
	if pp.loadedEnd == log.LogEndOffset() && pp.rebuilt != nil {
		return nil
	}
	rebuilt := &fetcher.ProducerStates{}
	err := scanBatches(log, log.LogStartOffset(), func(b records.Batch) bool {
		rebuilt.ApplyBatch(b)
		return true
	})
	if err != nil {
		pp.rebuilt = nil
		return err
	}
	pp.rebuilt, pp.loadedEnd = rebuilt, log.LogEndOffset()
	return nil
}

// state returns producer pid's state.
func (pp *partProducers) state(pid int64) (fetcher.ProducerState, bool) {
	if pp.log != nil {
		return pp.log.ProducerState(pid)
	}
	return pp.rebuilt.Get(pid)
}

func seqAdd(s int32, n int64) int32 { return fetcher.SeqAdd(s, n) }

func lastSeqOf(b records.Batch) int32 { return seqAdd(b.BaseSequence(), int64(b.LastOffsetDelta())) }

// record notes batch b appended at base through this data plane. The log's
// own state recorded it with the append; only the fallback state needs it.
func (pp *partProducers) record(b records.Batch, base int64) {
	if pp.log != nil || pp.rebuilt == nil {
		return
	}
	c := append(records.Batch(nil), b[:records.HeaderSize]...)
	c.SetBaseOffset(base)
	pp.rebuilt.ApplyBatch(c)
}

// check applies the broker's sequence rules to b (ProducerAppendInfo): an
// older epoch is fenced; a new epoch must start at sequence 0; within an
// epoch a batch must continue the last sequence, or repeat one of the last
// five batches exactly (a retry: dup is its original base offset). An
// unknown producer (expired or never seen) may start anywhere.
func (pp *partProducers) check(b records.Batch) (dup int64, code int16) {
	e, ok := pp.state(b.ProducerID())
	if !ok {
		return -1, fetcher.CodeNone
	}
	switch epoch := b.ProducerEpoch(); {
	case epoch < e.Epoch:
		return -1, codeInvalidProducerEpoch
	case epoch > e.Epoch:
		if b.BaseSequence() != 0 {
			return -1, codeOutOfOrderSequence
		}
		return -1, fetcher.CodeNone
	}
	for _, m := range e.Batches {
		if m.FirstSeq == b.BaseSequence() && m.LastSeq == lastSeqOf(b) {
			return m.BaseOffset, fetcher.CodeNone
		}
	}
	if b.BaseSequence() != seqAdd(e.LastSeq(), 1) {
		return -1, codeOutOfOrderSequence
	}
	return -1, fetcher.CodeNone
}

// initProducerID serves InitProducerId. An idempotent producer (no
// transactional id) gets a fresh id at epoch 0 on every call, whatever id and
// epoch it passes, as Kafka's coordinator answers it: a client never picks
// its id, so it cannot take on the id of a mirrored producer. A
// transactional id goes to the transaction coordinator (initTxnProducer).
func (dp *DataPlane) initProducerID(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		dp.initTxnProducer(ctx, r, resp)
		return resp, nil
	}
	pid, err := dp.pids.id(ctx)
	if err != nil {
		resp.ErrorCode = pidCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = pid, 0
	return resp, nil
}
