package reconcile

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxActive is the default of Config.MaxActive: how many reconcilers run a turn
// at once. Each running turn is a goroutine (about 8 KiB of stack once it has run a
// state's actions); a partition with nothing to do holds none. A mass event (a start, a
// restart or a failover of 100,000 partitions) fills the coordinator's and the file logs'
// group commits with what runs, so fewer cost time and more cost memory; measured at
// 100,000 partitions on 2 cores (docs/BENCHMARKS.md): 8,192 → failover 38 s, peak RSS
// 1.7 GiB; 16,384 → 30 s, 1.9 GiB; no bound → 18 s, 2.5 GiB.
const DefaultMaxActive = 16384

// Scheduling states of a Partition (Partition.sched).
const (
	schedIdle    int32 = iota // nothing to do; no goroutine
	schedQueued               // in the run queue
	schedRunning              // a worker runs its turn
	schedWoken                // running, and kicked since the turn started: run again
	schedEnded                // stopped for good (done is closed)
)

// scheduler runs the turns of the reconcilers on at most max worker goroutines. A
// partition that is kicked (a desired-state change, an event, a timer, the source coming
// back, a stop) is queued once; a worker takes it, runs its turn (Partition.turn: one
// step until nothing is left to do) and leaves it idle, or queues it again at the back
// when it was kicked meanwhile. Workers are started as work arrives and end when the
// queue is empty, so an idle site has none.
//
// Before, every partition had a goroutine of its own for its whole life: 100,000
// partitions held about 790 MB of stacks, and a mass event made 100,000 goroutines
// runnable at once on a 2-core machine.
//
// A turn may block for long (an LME lookup retries an unreachable peer for up to two
// minutes): when no turn has ended for stallAfter while others wait, the bound is raised
// by a quarter of max (watch), so that blocked turns never hold up the partitions queued
// behind them; it is back to max once the queue is empty.
type scheduler struct {
	wg         *sync.WaitGroup // the engine's: a worker is one of its goroutines
	stallAfter time.Duration
	ended      atomic.Int64 // turns that ended (the stall check)

	mu       sync.Mutex // guards the fields below
	max      int
	limit    int // the bound now: max, raised while turns are stuck
	workers  int
	watching bool          // a watch goroutine runs
	drained  chan struct{} // closed when the queue empties while watching
	queue    []turner      // FIFO: head at queue[0]
}

// defaultStallAfter is how long no turn may end while others wait before the
// scheduler raises its bound.
const defaultStallAfter = time.Second

// turner is what the scheduler runs: a Partition (a fake in tests).
type turner interface {
	schedState() *atomic.Int32 // schedIdle, schedQueued, …
	turn() (ended bool)        // runs on one worker at a time
	end()                      // after the turn that reported ended
}

func newScheduler(wg *sync.WaitGroup, max int) *scheduler {
	if max <= 0 {
		max = DefaultMaxActive
	}
	return &scheduler{wg: wg, stallAfter: defaultStallAfter, max: max, limit: max}
}

// kick queues a turn of r; it never blocks. A kick while r's turn runs makes it run once
// more, after the turns queued meanwhile; a kick of a queued or ended r does nothing.
func (s *scheduler) kick(r turner) {
	st := r.schedState()
	for {
		switch st.Load() {
		case schedIdle:
			if st.CompareAndSwap(schedIdle, schedQueued) {
				s.enqueue(r)
				return
			}
		case schedRunning:
			if st.CompareAndSwap(schedRunning, schedWoken) {
				return
			}
		default: // queued, woken or ended: a turn will see it, or none is needed
			return
		}
	}
}

// enqueue appends r (whose state the caller set to schedQueued) and starts a worker when
// fewer than max run.
func (s *scheduler) enqueue(r turner) {
	s.mu.Lock()
	s.queue = append(s.queue, r)
	start := s.workers < s.limit
	if start {
		s.workers++
		s.wg.Add(1)
	}
	watch := !start && !s.watching
	var drained chan struct{}
	if watch {
		s.watching = true
		drained = make(chan struct{})
		s.drained = drained
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if start {
		go s.work()
	}
	if watch {
		go s.watch(drained)
	}
}

// watch runs while turns wait for a worker: every stallAfter in which no turn ended,
// it raises the bound by a quarter of max and starts that many more workers.
func (s *scheduler) watch(drained chan struct{}) {
	defer s.wg.Done()
	seen := s.ended.Load()
	t := time.NewTimer(s.stallAfter)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-drained:
			return // next cleared watching
		}
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.stopWatchLocked()
			s.mu.Unlock()
			return
		}
		n := 0
		if now := s.ended.Load(); now == seen {
			n = min(len(s.queue), max(1, s.max/4))
			s.limit += n
			s.workers += n
			s.wg.Add(n)
		} else {
			seen = now
		}
		s.mu.Unlock()
		for range n {
			go s.work()
		}
		t.Reset(s.stallAfter)
	}
}

// next takes the head of the queue; ok is false (and the worker is counted out) when
// the queue is empty.
func (s *scheduler) next() (turner, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers > s.limit { // the bound came back to max: the extra workers end
		s.workers--
		return nil, false
	}
	if len(s.queue) == 0 {
		s.workers--
		s.limit = s.max
		s.queue = nil // let a burst's backing array go
		s.stopWatchLocked()
		return nil, false
	}
	r := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	return r, true
}

// stopWatchLocked ends the watch goroutine, if one runs.
func (s *scheduler) stopWatchLocked() {
	if s.watching {
		s.watching = false
		close(s.drained)
		s.drained = nil
	}
}

// work runs queued turns until the queue is empty.
func (s *scheduler) work() {
	defer s.wg.Done()
	for {
		r, ok := s.next()
		if !ok {
			return
		}
		st := r.schedState()
		st.Store(schedRunning)
		ended := r.turn()
		s.ended.Add(1)
		if ended {
			st.Store(schedEnded)
			r.end()
			continue
		}
		for {
			if st.CompareAndSwap(schedRunning, schedIdle) {
				break
			}
			if st.CompareAndSwap(schedWoken, schedQueued) {
				s.enqueue(r)
				break
			}
		}
	}
}
