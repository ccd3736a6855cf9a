package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
)

// waiter is a request answered when the current batch is durable.
type waiter struct {
	o   *op
	res opResult
}

// run is the owner goroutine of one partition: it loads the shard, then serves
// the partition's requests until it is stopped or fenced.
func (r *Runtime) run(p *partition, prev *partition) {
	defer r.wg.Done()
	defer close(p.done)
	defer p.stop()
	defer r.store.Unload(p.id, p.epoch)
	if prev != nil {
		<-prev.done
	}
	committed, ok := r.loadShard(p)
	if !ok {
		return
	}
	o := &owner{r: r, p: p, committed: committed, work: committed.Clone()}
	p.mu.Lock()
	p.committed = committed
	p.mu.Unlock()
	p.status.Store(statusActive)
	close(p.loaded)
	defer o.shutdown()
	o.serve()
}

// loadShard replays the partition from the store into a new shard; on failure
// it records the error and the status and reports the load finished.
func (r *Runtime) loadShard(p *partition) (*Shard, bool) {
	committed := NewShard()
	err := r.store.Load(p.ctx, p.id, p.epoch, committed.Replay)
	if err == nil {
		return committed, true
	}
	p.loadErr = fmt.Errorf("coordinator: load of state partition %d epoch %d: %w", p.id, p.epoch, err)
	if errors.Is(err, ErrFenced) {
		p.status.Store(statusFenced)
	} else {
		p.status.Store(statusFailed)
	}
	close(p.loaded)
	return nil, false
}

// owner is the state of a loaded partition's goroutine: the committed and the
// working shard, and the batch of records waiting to be appended with the
// requests waiting on it.
type owner struct {
	r               *Runtime
	p               *partition
	committed, work *Shard

	batch   []records.StateRecord
	waiters []waiter
	timer   *time.Timer
	timerC  <-chan time.Time // non-nil while the linger timer runs
}

// serve handles requests and linger expiries until the partition stops or is
// fenced.
func (o *owner) serve() {
	for {
		select {
		case <-o.p.ctx.Done():
			return
		case <-o.timerC:
			o.timerC = nil
			if !o.flush() {
				return
			}
		case req := <-o.p.reqs:
			if !o.handle(req) {
				return
			}
		}
	}
}

// handle runs one request on the working shard and queues its records; it
// reports false when a flush found the partition fenced.
func (o *owner) handle(req *op) bool {
	recs, res := o.apply(req)
	if len(o.batch) == 0 && len(recs) == 0 {
		req.resp <- res
		return true
	}
	o.batch = append(o.batch, recs...)
	o.waiters = append(o.waiters, waiter{req, res})
	cfg := o.r.cfg
	if len(o.batch) >= cfg.MaxBatchRecords || (cfg.AppendLinger < 0 && len(o.p.reqs) == 0) {
		return o.flush()
	}
	if o.timerC == nil && cfg.AppendLinger >= 0 {
		if o.timer == nil {
			o.timer = time.NewTimer(cfg.AppendLinger)
		} else {
			o.timer.Reset(cfg.AppendLinger)
		}
		o.timerC = o.timer.C
	}
	return true
}

// apply runs the command of req on the working shard and replays its records
// there, so later commands see them.
func (o *owner) apply(req *op) ([]records.StateRecord, opResult) {
	var recs []records.StateRecord
	var res opResult
	switch req.kind {
	case opRead:
		c := o.work.ReadMirrorStates(req.read)
		recs, res.read = c.Records, c.Response
	case opWrite:
		c := o.work.WriteMirrorStates(req.write)
		recs, res.write = c.Records, c.Response
	case opDelete:
		c := o.work.DeleteMirror(req.mirror)
		recs, res.del = c.Records, c.Response
	}
	for _, rec := range recs {
		_ = o.work.Replay(rec) // cannot fail: the shard made these records
	}
	return recs, res
}

// flush appends the batch and answers its waiters; it reports false when the
// store fenced the partition.
func (o *owner) flush() bool {
	if o.timerC != nil {
		o.timer.Stop()
		o.timerC = nil
	}
	if len(o.batch) == 0 {
		o.answer(nil)
		return true
	}
	ctx, cancel := context.WithTimeout(o.p.ctx, o.r.cfg.WriteTimeout)
	err := o.r.store.Append(ctx, o.p.id, o.p.epoch, o.batch)
	cancel()
	if err == nil {
		o.p.mu.Lock()
		for _, rec := range o.batch {
			if rerr := o.committed.Replay(rec); rerr != nil {
				err = rerr // impossible: the shard made these records
				break
			}
		}
		o.p.mu.Unlock()
	}
	ok := true
	if err != nil {
		o.work = o.committed.Clone() // roll back the failed batch
		if errors.Is(err, ErrFenced) {
			o.p.status.Store(statusFenced)
			ok = false
		}
	}
	o.answer(err)
	o.batch = o.batch[:0]
	return ok
}

// answer sends the waiters their responses, or the failure of their batch.
func (o *owner) answer(err error) {
	code := admin.CodeCoordinatorNotAvailable
	if errors.Is(err, ErrFenced) {
		code = admin.CodeNotCoordinator
	}
	for _, w := range o.waiters {
		if err != nil {
			w.o.resp <- opResult{code: code, err: err}
		} else {
			w.o.resp <- w.res
		}
	}
	o.waiters = o.waiters[:0]
}

// shutdown stops the timer and answers every waiting and queued request with
// NOT_COORDINATOR.
func (o *owner) shutdown() {
	if o.timer != nil {
		o.timer.Stop()
	}
	for _, w := range o.waiters {
		w.o.resp <- opResult{code: admin.CodeNotCoordinator}
	}
	for {
		select {
		case req := <-o.p.reqs:
			req.resp <- opResult{code: admin.CodeNotCoordinator}
		default:
			return
		}
	}
}
