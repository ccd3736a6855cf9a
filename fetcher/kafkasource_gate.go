package fetcher

import (
	"context"
	"slices"
	"sync"
)

// brokerGate lets one Fetch at a time be in flight to a broker: the fetchers
// of a KafkaSource share each broker's connection, and a broker serves the
// requests of a connection one after the other. Waiters are served in order,
// urgent ones (a fetch sent without a long poll, which learns the offsets of
// partitions new to a session) before the others: they then wait for at most
// the long poll in flight, not for one long poll of every other fetcher. A
// fetcher never sends two urgent fetches in a row (sessionRequest), so the
// others are not starved.
type brokerGate struct {
	mu             sync.Mutex
	busy           bool
	urgent, normal []chan struct{} // waiters, oldest first
}

// acquire waits for the gate, or for ctx to end (its error is returned and
// the gate is not held).
func (g *brokerGate) acquire(ctx context.Context, urgent bool) error {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	q := &g.normal
	if urgent {
		q = &g.urgent
	}
	*q = append(*q, ch)
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if i := slices.Index(*q, ch); i >= 0 {
		*q = slices.Delete(*q, i, i+1)
		g.mu.Unlock()
		return ctx.Err()
	}
	g.mu.Unlock()
	g.release() // handed over while ctx ended: pass it on
	return ctx.Err()
}

// release hands the gate to the next waiter, urgent ones first, or frees it.
func (g *brokerGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range []*[]chan struct{}{&g.urgent, &g.normal} {
		if len(*q) > 0 {
			ch := (*q)[0]
			*q = slices.Delete(*q, 0, 1)
			close(ch) // busy stays set: the waiter holds it now
			return
		}
	}
	g.busy = false
}
