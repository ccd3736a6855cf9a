package fetcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitQueued waits until the gate has n waiters.
func waitQueued(t *testing.T, g *brokerGate, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.urgent)+len(g.normal) == n
	}, 5*time.Second, time.Millisecond)
}

// TestBrokerGateOrder: one holder at a time; waiters get the gate in order,
// urgent ones first; a waiter whose context ends leaves the queue, and the
// gate is free once the last holder releases it.
func TestBrokerGateOrder(t *testing.T) {
	var g brokerGate
	ctx := context.Background()
	require.NoError(t, g.acquire(ctx, false))
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	enter := func(name string, urgent bool, queued int) {
		wg.Go(func() {
			require.NoError(t, g.acquire(ctx, urgent))
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			g.release()
		})
		waitQueued(t, &g, queued)
	}
	enter("n1", false, 1)
	enter("n2", false, 2)
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error)
	go func() { gone <- g.acquire(cctx, true) }()
	waitQueued(t, &g, 3)
	cancel()
	require.ErrorIs(t, <-gone, context.Canceled)
	waitQueued(t, &g, 2)
	enter("u1", true, 3)
	enter("u2", true, 4)
	g.release()
	wg.Wait()
	require.Equal(t, []string{"u1", "u2", "n1", "n2"}, order)
	require.False(t, g.busy)
	require.NoError(t, g.acquire(ctx, false), "free again")
	g.release()
}

// TestBrokerGateHandoverToCancelled: a gate handed to a waiter whose context
// ended at the same time is passed on, not lost.
func TestBrokerGateHandoverToCancelled(t *testing.T) {
	for range 200 {
		var g brokerGate
		require.NoError(t, g.acquire(context.Background(), false))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			if g.acquire(ctx, false) == nil {
				g.release()
			}
			close(done)
		}()
		waitQueued(t, &g, 1)
		go cancel()
		g.release()
		<-done
		acquired := make(chan struct{})
		go func() {
			_ = g.acquire(context.Background(), false)
			close(acquired)
		}()
		select {
		case <-acquired:
		case <-time.After(5 * time.Second):
			t.Fatal("the gate was lost")
		}
		g.release()
	}
}
