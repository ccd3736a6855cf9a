package fetcher

import (
	"sync"
	"sync/atomic"
)

// Group syncs: when many FileLogs of the process sync at once (a failover
// stopping every partition: a bump of the leader epoch and a barrier each),
// each fsync is a device cache flush of its own, and the disk serves them
// one after the other. A sync that finds more than groupSyncAbove others
// under way joins instead the next syncfs(2) round of its filesystem, which
// starts after the call and makes everything written before it durable,
// with one flush for every caller of the round. A lone sync keeps its own
// fsync: a syncfs also writes back what other files of the filesystem hold,
// which only pays when many wait.
//
// Errors: syncfs reports the writeback errors of the whole filesystem that
// happened since its descriptor was opened, once. The group's descriptor is
// opened with the group, when the first FileLog on the filesystem opens, so
// it is older than every write a round covers. A failed round fails its
// callers and those already waiting for the next round (their writes may
// predate the error, which syncfs reports only once), and turns the group
// off for good: every later sync is a file's own fsync again, which reports
// that file's own errors. An error is never lost; at worst a caller whose
// data was fine is told of another file's failure once and retries.

// groupSyncAbove is how many syncs must be under way in the process for a
// new one to join its filesystem's round: a mass event (a failover of
// thousands of partitions), not a busy mirror's flushes: a syncfs waits for
// everything dirty on the filesystem, other processes' files too, so on a
// root filesystem shared with other work a round costs what that work
// wrote.
const groupSyncAbove = 64

var syncsInFlight atomic.Int64

// syncGroup runs the syncfs rounds of one filesystem, one at a time: callers
// that arrive during a round wait for the next one, which starts once the
// running one ends.
type syncGroup struct {
	fs func() error // syncfs of the group's descriptor (a test stands in for it)

	mu      sync.Mutex
	running bool
	next    *syncRound // the round callers join now; nil when none asked
	failed  error      // the first round's error; the group is off after it
}

type syncRound struct {
	done chan struct{}
	err  error
}

var (
	syncGroupsMu sync.Mutex
	syncGroups   = map[uint64]*syncGroup{}
)

// groupFor returns the group of dir's filesystem, created (with its
// descriptor) by the first call for that filesystem; nil when group syncs
// are off there (fileSystemOf, or the descriptor could not be opened).
func groupFor(dir string) *syncGroup {
	dev := fileSystemOf(dir)
	if dev == 0 {
		return nil
	}
	syncGroupsMu.Lock()
	defer syncGroupsMu.Unlock()
	g, ok := syncGroups[dev]
	if !ok {
		if fs, err := openSyncFS(dir); err == nil {
			g = &syncGroup{fs: fs}
		}
		syncGroups[dev] = g // nil: never retried for this filesystem
	}
	return g
}

// sync waits for a round that starts after the call and returns its error;
// joined is false when the group is off (a round failed before), and the
// caller syncs its file itself.
func (g *syncGroup) sync() (joined bool, err error) {
	g.mu.Lock()
	if g.failed != nil {
		g.mu.Unlock()
		return false, nil
	}
	r := g.next
	if r == nil {
		r = &syncRound{done: make(chan struct{})}
		g.next = r
	}
	if !g.running {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
	<-r.done
	return true, r.err
}

func (g *syncGroup) run() {
	g.mu.Lock()
	for g.next != nil {
		r := g.next
		g.next = nil
		g.mu.Unlock()
		r.err = g.fs()
		g.mu.Lock()
		if r.err != nil {
			g.failed = r.err
			if w := g.next; w != nil {
				w.err = r.err
				close(w.done)
				g.next = nil
			}
		}
		close(r.done)
	}
	g.running = false
	g.mu.Unlock()
}

// startSync counts a sync as under way until end is called and reports
// whether it should wait for g's next round (group) instead of syncing its
// file itself: g is set and more than groupSyncAbove others are under way.
func startSync(g *syncGroup) (group bool, end func()) {
	n := syncsInFlight.Add(1)
	return g != nil && n > groupSyncAbove, func() { syncsInFlight.Add(-1) }
}

// syncCached is h.Sync, or, when other syncs are under way, the next round
// of g waited for with h unpinned: a failover's thousands of waiters then
// hold no descriptor through the round (they would each keep their segment
// open, past the FileCache's bound). grouped reports a round, which made
// everything written on the filesystem before the call durable.
func syncCached(h *cachedFile, g *syncGroup) (grouped bool, err error) {
	group, end := startSync(g)
	defer end()
	if group {
		if joined, err := g.sync(); joined {
			if err != nil {
				return false, err
			}
			return true, h.synced()
		}
	}
	return false, h.Sync()
}
