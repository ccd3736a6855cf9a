package fetcher

import (
	"os"
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

// groupSyncAbove is how many syncs must be under way in the process for a
// new one to join its filesystem's round.
const groupSyncAbove = 8

var syncsInFlight atomic.Int64

// syncRoundFS is what a round runs: syncFS (a test stands in for it).
var syncRoundFS = syncFS

// syncGroup runs the syncfs rounds of one filesystem, one at a time: callers
// that arrive during a round wait for the next one, which starts once the
// running one ends.
type syncGroup struct {
	mu      sync.Mutex
	running bool
	next    *syncRound // the round callers join now; nil when none asked
}

type syncRound struct {
	dir  string // a directory of the filesystem (the first caller's)
	done chan struct{}
	err  error
}

var (
	syncGroupsMu sync.Mutex
	syncGroups   = map[uint64]*syncGroup{}
)

func syncGroupOf(dev uint64) *syncGroup {
	syncGroupsMu.Lock()
	defer syncGroupsMu.Unlock()
	g := syncGroups[dev]
	if g == nil {
		g = &syncGroup{}
		syncGroups[dev] = g
	}
	return g
}

// sync waits for a round that starts after the call and returns its error.
func (g *syncGroup) sync(dir string) error {
	g.mu.Lock()
	r := g.next
	if r == nil {
		r = &syncRound{dir: dir, done: make(chan struct{})}
		g.next = r
	}
	if !g.running {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
	<-r.done
	return r.err
}

func (g *syncGroup) run() {
	g.mu.Lock()
	for g.next != nil {
		r := g.next
		g.next = nil
		g.mu.Unlock()
		r.err = syncRoundFS(r.dir)
		close(r.done)
		g.mu.Lock()
	}
	g.running = false
	g.mu.Unlock()
}

// syncFile makes what was written to f (a file in dir, on the filesystem
// dev) durable: its own fsync (fdatasync when dataOnly), or the next round
// of its filesystem's group when other syncs are under way (dev 0: never).
func syncFile(f *os.File, dir string, dev uint64, dataOnly bool) error {
	n := syncsInFlight.Add(1)
	defer syncsInFlight.Add(-1)
	if dev != 0 && n > groupSyncAbove {
		return syncGroupOf(dev).sync(dir)
	}
	if dataOnly {
		return fdatasync(f)
	}
	return f.Sync()
}
