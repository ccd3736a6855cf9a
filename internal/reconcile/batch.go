package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/kmirror/kmirror/coordinator"
)

// stateBatcher group-commits the coordinator reads and writes of the reconcilers of
// one mirror: while one request is in flight, new calls queue up and go out together
// as the next request (one per kind), so that N partitions changing state at once cost
// a handful of coordinator requests instead of N. Per-partition semantics (fencing,
// order of one partition's calls) are unchanged: a reconciler has at most one call in
// flight. One goroutine per kind runs while there is work; none runs when idle.
type stateBatcher struct {
	reads  groupCommit[coordinator.ReadPartition, coordinator.ReadPartitionResult]
	writes groupCommit[coordinator.WritePartition, coordinator.WritePartitionResult]
}

func newStateBatcher(e *Engine, mirror string) *stateBatcher {
	b := &stateBatcher{}
	b.reads = groupCommit[coordinator.ReadPartition, coordinator.ReadPartitionResult]{e: e,
		send: func(ctx context.Context, ps []coordinator.ReadPartition) ([]coordinator.ReadPartitionResult, error) {
			resp, err := e.coord.ReadMirrorStates(ctx, coordinator.ReadRequest{MirrorName: mirror, Partitions: ps})
			return resp.Partitions, err
		}}
	b.writes = groupCommit[coordinator.WritePartition, coordinator.WritePartitionResult]{e: e,
		send: func(ctx context.Context, ps []coordinator.WritePartition) ([]coordinator.WritePartitionResult, error) {
			start := time.Now()
			resp, err := e.coord.WriteMirrorStates(ctx, coordinator.WriteRequest{MirrorName: mirror, Partitions: ps})
			e.metrics.CoordinatorWrite(mirror, len(ps), time.Since(start), err)
			return resp.Partitions, err
		}}
	return b
}

// read reads one partition through the batch.
func (b *stateBatcher) read(ctx context.Context, p coordinator.ReadPartition) (coordinator.ReadPartitionResult, error) {
	return b.reads.do(ctx, p)
}

// write writes one partition through the batch.
func (b *stateBatcher) write(ctx context.Context, p coordinator.WritePartition) (coordinator.WritePartitionResult, error) {
	return b.writes.do(ctx, p)
}

// groupCommit queues calls of one kind and sends everything queued as one request
// while no request of that kind is in flight. send answers in request order.
type groupCommit[P, R any] struct {
	e    *Engine
	send func(context.Context, []P) ([]R, error)

	mu      sync.Mutex // guards queue and running
	queue   []*pendingCall[P, R]
	running bool // a drain goroutine is active
}

type pendingCall[P, R any] struct {
	p    P
	res  R
	err  error
	done chan struct{}
}

// do queues p, starts the drain goroutine when none runs, and waits for p's answer.
func (g *groupCommit[P, R]) do(ctx context.Context, p P) (R, error) {
	pc := &pendingCall[P, R]{p: p, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, pc)
	start := !g.running
	g.running = true
	g.mu.Unlock()
	if start {
		g.e.wg.Add(1)
		go g.drain()
	}
	select {
	case <-pc.done:
		return pc.res, pc.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// drain sends the queued calls as one request, answers them, and repeats until the
// queue is empty.
func (g *groupCommit[P, R]) drain() {
	defer g.e.wg.Done()
	for {
		g.mu.Lock()
		batch := g.queue
		g.queue = nil
		if len(batch) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		ps := make([]P, len(batch))
		for i, pc := range batch {
			ps[i] = pc.p
		}
		res, err := g.send(g.e.ctx, ps)
		for i, pc := range batch {
			if err != nil {
				pc.err = err
			} else {
				pc.res = res[i]
			}
			close(pc.done)
		}
	}
}
