package dataplane

import (
	"context"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// recentBatches is how many batches per producer are remembered for
// duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN, the most in-flight
// requests an idempotent producer may have).
const recentBatches = 5

// batchMeta is what is kept of one idempotent batch.
type batchMeta struct {
	firstSeq, lastSeq int32
	base              int64
}

// producerEntry is one producer's state in one partition.
type producerEntry struct {
	epoch  int16
	recent []batchMeta // oldest first, at most recentBatches
}

func (e *producerEntry) lastSeq() int32 { return e.recent[len(e.recent)-1].lastSeq }

// partProducers is the idempotent-producer state of one partition. mu also
// serializes the partition's Produce calls (check and append are one step).
type partProducers struct {
	mu        sync.Mutex
	loadedEnd int64 // log end the state matches; -1 before the first load
	producers map[int64]*producerEntry
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

// load rebuilds the state from the log's batch headers when the log changed
// other than through this data plane (first use, a restart, mirroring in
// between). A MIRROR_PID_RESET barrier forgets every producer before it.
func (pp *partProducers) load(log fetcher.Log) error {
	if pp.loadedEnd == log.LogEndOffset() && pp.producers != nil {
		return nil
	}
	pp.producers = map[int64]*producerEntry{}
	err := scanBatches(log, log.LogStartOffset(), func(b records.Batch) bool {
		a := b.Attributes()
		if a.IsControl() {
			if ct, err := b.ControlType(); err == nil && ct == records.ControlMirrorPIDReset {
				pp.producers = map[int64]*producerEntry{}
			}
			return true
		}
		if b.ProducerID() >= 0 && b.BaseSequence() >= 0 {
			pp.record(b, b.BaseOffset())
		}
		return true
	})
	if err != nil {
		pp.producers = nil
		return err
	}
	pp.loadedEnd = log.LogEndOffset()
	return nil
}

// seqAdd is Kafka's sequence arithmetic: sequences wrap from MaxInt32 to 0.
func seqAdd(s int32, n int64) int32 {
	return int32((int64(s) + n) % (math.MaxInt32 + 1))
}

func lastSeqOf(b records.Batch) int32 { return seqAdd(b.BaseSequence(), int64(b.LastOffsetDelta())) }

// record remembers batch b appended at base.
func (pp *partProducers) record(b records.Batch, base int64) {
	e, ok := pp.producers[b.ProducerID()]
	if !ok || b.ProducerEpoch() != e.epoch {
		e = &producerEntry{epoch: b.ProducerEpoch()}
		pp.producers[b.ProducerID()] = e
	}
	e.recent = append(e.recent, batchMeta{firstSeq: b.BaseSequence(), lastSeq: lastSeqOf(b), base: base})
	if len(e.recent) > recentBatches {
		e.recent = e.recent[1:]
	}
}

// check applies the broker's sequence rules to b (ProducerAppendInfo): an
// older epoch is fenced; a new epoch must start at sequence 0; within an
// epoch a batch must continue the last sequence, or repeat one of the last
// five batches exactly (a retry: dup is its original base offset). An
// unknown producer (expired or never seen) may start anywhere.
func (pp *partProducers) check(b records.Batch) (dup int64, code int16) {
	e, ok := pp.producers[b.ProducerID()]
	if !ok {
		return -1, fetcher.CodeNone
	}
	switch epoch := b.ProducerEpoch(); {
	case epoch < e.epoch:
		return -1, codeInvalidProducerEpoch
	case epoch > e.epoch:
		if b.BaseSequence() != 0 {
			return -1, codeOutOfOrderSequence
		}
		return -1, fetcher.CodeNone
	}
	for _, m := range e.recent {
		if m.firstSeq == b.BaseSequence() && m.lastSeq == lastSeqOf(b) {
			return m.base, fetcher.CodeNone
		}
	}
	if b.BaseSequence() != seqAdd(e.lastSeq(), 1) {
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
