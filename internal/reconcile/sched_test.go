package reconcile

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeTurner counts its turns and can hold them until released.
type fakeTurner struct {
	st      atomic.Int32
	turns   atomic.Int64
	hold    chan struct{} // a turn waits for it when not nil
	during  func()        // called inside every turn, before hold
	after   func()        // called inside every turn, after hold
	ended   atomic.Bool
	endNext atomic.Bool // the next turn reports ended
}

func (f *fakeTurner) schedState() *atomic.Int32 { return &f.st }
func (f *fakeTurner) turn() bool {
	f.turns.Add(1)
	if f.during != nil {
		f.during()
	}
	if f.hold != nil {
		<-f.hold
	}
	if f.after != nil {
		f.after()
	}
	return f.endNext.Load()
}
func (f *fakeTurner) end() { f.ended.Store(true) }

// TestSchedulerBoundsWorkers: no more than max turns run at once, every kicked turner
// gets its turn, and the workers are gone once the queue is empty.
func TestSchedulerBoundsWorkers(t *testing.T) {
	var wg sync.WaitGroup
	s := newScheduler(&wg, 3)
	s.stallAfter = time.Hour // the held turns are not stuck for this test
	var running, peak atomic.Int64
	release := make(chan struct{})
	ts := make([]*fakeTurner, 50)
	for i := range ts {
		ts[i] = &fakeTurner{hold: release, during: func() {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
		}, after: func() { running.Add(-1) }}
	}
	for _, f := range ts {
		s.kick(f)
	}
	// The queue is FIFO and the three workers hold ts[0:3] in their turns: the
	// others are still queued, and a second kick of them makes no second turn.
	// (Kicked twice in a row, a turner could start running in between, and the
	// second kick then rightly asked for one more turn.)
	require.Eventually(t, func() bool { return running.Load() == 3 }, 5*time.Second, time.Millisecond)
	for _, f := range ts[3:] {
		s.kick(f)
	}
	for range len(ts) {
		release <- struct{}{}
	}
	wg.Wait()
	require.EqualValues(t, 3, peak.Load(), "turns at once")
	for i, f := range ts {
		require.EqualValues(t, 1, f.turns.Load(), "turner %d", i)
		require.Equal(t, schedIdle, f.st.Load())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Zero(t, s.workers)
	require.Empty(t, s.queue)
}

// TestSchedulerKickDuringTurn: a kick while a turn runs makes exactly one more turn,
// never two turns of one turner at once; a turn that reports ended ends it, and later
// kicks do nothing.
func TestSchedulerKickDuringTurn(t *testing.T) {
	var wg sync.WaitGroup
	s := newScheduler(&wg, 4)
	hold := make(chan struct{})
	f := &fakeTurner{hold: hold}
	var inTurn atomic.Int64
	f.during = func() { require.EqualValues(t, 1, inTurn.Add(1), "two turns at once") }
	f.after = func() { inTurn.Add(-1) }
	s.kick(f)
	require.Eventually(t, func() bool { return f.turns.Load() == 1 }, 5*time.Second, time.Millisecond)
	s.kick(f)
	s.kick(f)
	require.Equal(t, schedWoken, f.st.Load())
	hold <- struct{}{} // the first turn ends; the kicks make one more
	require.Eventually(t, func() bool { return f.turns.Load() == 2 }, 5*time.Second, time.Millisecond)
	hold <- struct{}{}
	wg.Wait()
	require.EqualValues(t, 2, f.turns.Load())
	require.Equal(t, schedIdle, f.st.Load())

	f.hold = nil
	f.endNext.Store(true)
	s.kick(f)
	wg.Wait()
	require.True(t, f.ended.Load())
	require.Equal(t, schedEnded, f.st.Load())
	s.kick(f)
	wg.Wait()
	require.EqualValues(t, 3, f.turns.Load(), "no turn after the end")
}

// TestSchedulerStuckTurnsDoNotStarveOthers: turns that block (an LME lookup retrying an
// unreachable peer) hold every worker; once no turn has ended for stallAfter the bound
// is raised, so the partitions queued behind them run, and it is back to max after.
func TestSchedulerStuckTurnsDoNotStarveOthers(t *testing.T) {
	var wg sync.WaitGroup
	s := newScheduler(&wg, 2)
	s.stallAfter = 20 * time.Millisecond
	stuck := make(chan struct{})
	blocked := []*fakeTurner{{hold: stuck}, {hold: stuck}}
	for _, f := range blocked {
		s.kick(f)
	}
	require.Eventually(t, func() bool { return blocked[0].turns.Load() == 1 && blocked[1].turns.Load() == 1 },
		5*time.Second, time.Millisecond)
	quick := make([]*fakeTurner, 5)
	for i := range quick {
		quick[i] = &fakeTurner{}
		s.kick(quick[i])
	}
	require.Eventually(t, func() bool {
		for _, f := range quick {
			if f.turns.Load() != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the queued turns ran while two turns were stuck")
	close(stuck)
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 2, s.limit, "the bound is max again")
	require.Zero(t, s.workers)
	require.False(t, s.watching)
}
