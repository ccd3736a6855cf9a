package dataplane

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
)

// initTxnProducer serves InitProducerId with a transactional id, as Kafka's
// transaction coordinator does: the first call for an id gets a fresh
// producer id at epoch 0, each later one the next epoch (a new producer id
// once the epoch is exhausted), which fences every older producer of the id.
// An open transaction is aborted first, its markers written at the bumped
// epoch. A producer passing its id and epoch (v3+, KIP-360) must pass the
// current ones, or the previous ones of a bump whose answer it lost;
// anything else is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). New
// producer ids come from the durable blocks (pidAllocator); when none can be
// reserved the id is left as it was and the answer is pidCode's.
func (dp *DataPlane) initTxnProducer(ctx context.Context, r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) {
	id := *r.TransactionalID
	timeout := time.Duration(r.TransactionTimeoutMillis) * time.Millisecond
	switch {
	case id == "":
		resp.ErrorCode = int16(admin.CodeInvalidRequest)
		return
	case timeout <= 0 || timeout > dp.cfg.MaxTransactionTimeout:
		resp.ErrorCode = codeInvalidTransactionTimeout
		return
	}
	e := dp.coord.getOrCreate(id)
	e.op.Lock()
	defer e.op.Unlock()
	if pending(e) && completeErr(dp.complete(e, 0)) != nil {
		resp.ErrorCode = codeConcurrentTransactions
		return
	}
	expected := r.Version >= 3 && r.ProducerID >= 0
	e.mu.Lock()
	if expected && e.pid >= 0 {
		switch {
		case r.ProducerID == e.pid && r.ProducerEpoch == e.epoch:
		case e.idle() && r.ProducerID == e.prevPID && r.ProducerEpoch == e.prevEpoch:
			// A retry of a bump whose answer was lost: the bumped id and epoch.
			resp.ProducerID, resp.ProducerEpoch = e.pid, e.epoch
			e.mu.Unlock()
			return
		default:
			e.mu.Unlock()
			resp.ErrorCode = fencedCode(r.Version, 4)
			return
		}
	}
	e.timeout = timeout
	if e.state == txnOngoing {
		if err := dp.fence(ctx, e); err != nil {
			e.mu.Unlock()
			resp.ErrorCode = pidCode(err)
			return
		}
		e.mu.Unlock()
		if _, err := dp.complete(e, AbortFenced); err != nil {
			resp.ErrorCode = codeConcurrentTransactions // retried by the client and the check loop
			return
		}
		e.mu.Lock()
	} else {
		pid, epoch := e.pid, e.epoch+1
		if e.pid < 0 || epochExhausted(e.epoch) {
			var err error
			if pid, err = dp.pids.id(ctx); err != nil {
				e.mu.Unlock()
				resp.ErrorCode = pidCode(err)
				return
			}
			epoch = 0
		}
		e.prevPID, e.prevEpoch = e.pid, e.epoch
		e.pid, e.epoch = pid, epoch
	}
	e.state = txnEmpty
	e.resetTxn()
	resp.ProducerID, resp.ProducerEpoch = e.pid, e.epoch
	e.mu.Unlock()
}

// completeErr is complete's error, for callers to whom a skipped partition
// (now a mirror partition) is no failure: an abort there loses nothing, the
// transaction's records were never committed.
func completeErr(_ int, err error) error { return err }

// pending reports whether e is in a Prepare state (markers or offsets not
// yet all written).
func pending(e *txnEntry) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state == txnPrepareCommit || e.state == txnPrepareAbort
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions
// below since (clients that predate PRODUCER_FENCED, as Kafka answers them).
func fencedCode(version, since int16) int16 {
	if version < since {
		return codeInvalidProducerEpoch
	}
	return codeProducerFenced
}
