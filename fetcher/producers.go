package fetcher

import (
	"math"
	"time"

	"github.com/kmirror/kmirror/records"
)

// ProducerBatchesRetained is how many of a producer's last batches a log keeps for
// duplicate detection: Kafka's NUM_BATCHES_TO_RETAIN, the most in-flight requests an
// idempotent producer may have.
const ProducerBatchesRetained = 5

// ProducerExpiration is how long after its last batch's timestamp a producer
// without an open transaction is forgotten: Kafka's producer.id.expiration.ms
// default. A forgotten producer is an unknown one: its next batch may start at any
// sequence, as on Kafka.
const ProducerExpiration = 24 * time.Hour

// minSweep is the producer count below which no expiry sweep runs.
const minSweep = 1024

// ProducerBatch is one retained batch of a producer (Kafka's BatchMetadata): its first
// and last sequence and the offset it was appended at.
type ProducerBatch struct {
	FirstSeq, LastSeq int32
	BaseOffset        int64
}

// ProducerState is one idempotent producer's state in a log (Kafka's
// ProducerStateEntry): the epoch of its last data batch and its last batches of that
// epoch, oldest first, at most ProducerBatchesRetained.
type ProducerState struct {
	Epoch   int16
	Batches []ProducerBatch
	// LastTimestamp is the max timestamp of the producer's last data batch.
	LastTimestamp int64
	inTxn         bool // a transactional data batch not yet followed by its marker
}

// LastSeq is the last sequence of the producer's last batch.
func (p ProducerState) LastSeq() int32 { return p.Batches[len(p.Batches)-1].LastSeq }

// ProducerStateReader is implemented by MemoryLog and FileLog: the log owns its
// producers' idempotence state, as Kafka's ProducerStateManager is per log. The state
// follows every append (Append and AppendAsLeader alike: mirrored producers are
// tracked as the log's own), is rebuilt from the kept batches by Truncate and by
// OpenFileLog's scan of the segments, and emptied by TruncateFullyAndStartAt; a
// MIRROR_PID_RESET control batch expires every producer before it (spec §8.3).
type ProducerStateReader interface {
	// ProducerState returns a copy of producer pid's state, false when the log has
	// none (never seen, or expired by a MIRROR_PID_RESET).
	ProducerState(pid int64) (ProducerState, bool)
}

// ProducerStates is the idempotence state of one log's producers, built from its
// batches in offset order: the one implementation of the rules, used by the logs and
// by hosts that rebuild it from a Log that does not keep it (ApplyBatch). Producers
// without an open transaction whose last batch is older than ProducerExpiration (by
// the wall clock, as Kafka's ProducerStateManager expires them) are dropped by a sweep
// that runs whenever the count has doubled since the last one, so the memory is
// bounded by the producers active in the last day. Not safe for concurrent use.
type ProducerStates struct {
	m       map[int64]*ProducerState
	sweepAt int
}

// ApplyBatch records batch b, appended at b.BaseOffset().
func (p *ProducerStates) ApplyBatch(b records.Batch) {
	var ct records.ControlType
	if b.Attributes().IsControl() {
		ct, _ = b.ControlType()
	}
	p.apply(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.LastOffsetDelta(), b.BaseOffset(), b.MaxTimestamp(),
		b.Attributes().IsTransactional(), b.Attributes().IsControl(), ct)
}

// Get returns a copy of producer pid's state.
func (p *ProducerStates) Get(pid int64) (ProducerState, bool) {
	e, ok := p.m[pid]
	if !ok {
		return ProducerState{}, false
	}
	c := *e
	c.Batches = append([]ProducerBatch(nil), e.Batches...)
	return c, true
}

// apply records one batch: a data batch with a producer id and a sequence is
// remembered (a new epoch starts a new entry); a MIRROR_PID_RESET forgets every
// producer; a COMMIT or ABORT ends the producer's transaction and leaves its
// sequences as they were.
func (p *ProducerStates) apply(pid int64, epoch int16, baseSeq, lastDelta int32, base, maxTs int64, txn, control bool, ct records.ControlType) {
	switch {
	case control && ct == records.ControlMirrorPIDReset:
		clear(p.m)
		return
	case control:
		if e, ok := p.m[pid]; ok {
			e.inTxn = false
		}
		return
	case pid < 0 || baseSeq < 0:
		return
	}
	if p.m == nil {
		p.m = map[int64]*ProducerState{}
	}
	e, ok := p.m[pid]
	if !ok || e.Epoch != epoch {
		e = &ProducerState{Epoch: epoch}
		p.m[pid] = e
		if len(p.m) >= max(p.sweepAt, minSweep) {
			p.expire(time.Now().Add(-ProducerExpiration).UnixMilli(), pid)
			p.sweepAt = 2 * len(p.m)
		}
	}
	e.Batches = append(e.Batches, ProducerBatch{FirstSeq: baseSeq, LastSeq: SeqAdd(baseSeq, int64(lastDelta)), BaseOffset: base})
	if len(e.Batches) > ProducerBatchesRetained {
		e.Batches = append(e.Batches[:0], e.Batches[1:]...)
	}
	e.LastTimestamp, e.inTxn = maxTs, txn || e.inTxn
}

// expire drops the producers (but keep) without an open transaction whose last
// batch is older than before (milliseconds).
func (p *ProducerStates) expire(before, keep int64) {
	for pid, e := range p.m {
		if pid != keep && !e.inTxn && e.LastTimestamp < before {
			delete(p.m, pid)
		}
	}
}

// reset forgets every producer.
func (p *ProducerStates) reset() { clear(p.m); p.sweepAt = 0 }

// SeqAdd is Kafka's sequence arithmetic: sequences wrap from MaxInt32 to 0.
func SeqAdd(s int32, n int64) int32 {
	return int32((int64(s) + n) % (math.MaxInt32 + 1))
}

// ProducerState implements ProducerStateReader.
func (g *guarded) ProducerState(pid int64) (ProducerState, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.producers.Get(pid)
}

var (
	_ ProducerStateReader = (*MemoryLog)(nil)
	_ ProducerStateReader = (*FileLog)(nil)
)
