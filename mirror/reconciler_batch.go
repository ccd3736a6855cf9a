package mirror

import (
	"context"
	"sync"

	"github.com/kmirror/kmirror/coordinator"
)

// stateBatcher group-commits the coordinator reads and writes of the reconcilers of
// one mirror: while one request is in flight, new calls queue up and go out together
// as the next request (one per kind), so that N partitions changing state at once cost
// a handful of coordinator requests instead of N. Per-partition semantics (fencing,
// order of one partition's calls) are unchanged: a reconciler has at most one call in
// flight. One goroutine per kind runs while there is work; none runs when idle.
type stateBatcher struct {
	m      *Mirror
	mirror string

	mu      sync.Mutex // guards the fields below
	reads   []*pendingRead
	writes  []*pendingWrite
	running [2]bool // a drain goroutine is active for reads / writes
}

type pendingRead struct {
	p    coordinator.ReadPartition
	res  coordinator.ReadPartitionResult
	err  error
	done chan struct{}
}

type pendingWrite struct {
	p    coordinator.WritePartition
	res  coordinator.WritePartitionResult
	err  error
	done chan struct{}
}

func newStateBatcher(m *Mirror, mirror string) *stateBatcher {
	return &stateBatcher{m: m, mirror: mirror}
}

// read reads one partition through the batch.
func (b *stateBatcher) read(ctx context.Context, p coordinator.ReadPartition) (coordinator.ReadPartitionResult, error) {
	pr := &pendingRead{p: p, done: make(chan struct{})}
	b.mu.Lock()
	b.reads = append(b.reads, pr)
	start := !b.running[0]
	b.running[0] = true
	b.mu.Unlock()
	if start {
		b.m.wg.Add(1)
		go b.drainReads()
	}
	select {
	case <-pr.done:
		return pr.res, pr.err
	case <-ctx.Done():
		return coordinator.ReadPartitionResult{}, ctx.Err()
	}
}

// write writes one partition through the batch.
func (b *stateBatcher) write(ctx context.Context, p coordinator.WritePartition) (coordinator.WritePartitionResult, error) {
	pw := &pendingWrite{p: p, done: make(chan struct{})}
	b.mu.Lock()
	b.writes = append(b.writes, pw)
	start := !b.running[1]
	b.running[1] = true
	b.mu.Unlock()
	if start {
		b.m.wg.Add(1)
		go b.drainWrites()
	}
	select {
	case <-pw.done:
		return pw.res, pw.err
	case <-ctx.Done():
		return coordinator.WritePartitionResult{}, ctx.Err()
	}
}

func (b *stateBatcher) drainReads() {
	defer b.m.wg.Done()
	for {
		b.mu.Lock()
		batch := b.reads
		b.reads = nil
		if len(batch) == 0 {
			b.running[0] = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		req := coordinator.ReadRequest{MirrorName: b.mirror, Partitions: make([]coordinator.ReadPartition, len(batch))}
		for i, pr := range batch {
			req.Partitions[i] = pr.p
		}
		resp, err := b.m.coord.ReadMirrorStates(b.m.ctx, req)
		for i, pr := range batch {
			if err != nil {
				pr.err = err
			} else {
				pr.res = resp.Partitions[i]
			}
			close(pr.done)
		}
	}
}

func (b *stateBatcher) drainWrites() {
	defer b.m.wg.Done()
	for {
		b.mu.Lock()
		batch := b.writes
		b.writes = nil
		if len(batch) == 0 {
			b.running[1] = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		req := coordinator.WriteRequest{MirrorName: b.mirror, Partitions: make([]coordinator.WritePartition, len(batch))}
		for i, pw := range batch {
			req.Partitions[i] = pw.p
		}
		resp, err := b.m.coord.WriteMirrorStates(b.m.ctx, req)
		for i, pw := range batch {
			if err != nil {
				pw.err = err
			} else {
				pw.res = resp.Partitions[i]
			}
			close(pw.done)
		}
	}
}
