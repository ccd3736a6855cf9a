package fetcher

import (
	"sync"
	"sync/atomic"

	"github.com/kmirror/kmirror/epoch"
)

// guarded is what MemoryLog and FileLog share: the log's bookkeeping (offsets,
// epoch cache, producer state, read-only flag) under one RWMutex, and the Log
// methods answered from it alone. Both logs embed it; mu also guards their own
// fields.
//
// The log start, log end and high watermark are also published in atomics at
// every write unlock, and their accessors read those: a reader of offsets
// (a describe of 100,000 partitions, a metric) never waits for a writer that
// holds the lock across an fsync (a stop's epoch bumps and markers made one
// describe wait 14 s), and sees each change when the write that made it ends,
// as it would through the lock.
type guarded struct {
	mu changeMutex
	st logState

	start, end, hw atomic.Int64 // st's, as of the last write unlock
}

// share makes the published offsets follow st: it publishes them now and at
// every write unlock from here on. A log calls it before it is shared.
func (g *guarded) share() {
	g.mu.publish = g.publish
	g.publish()
}

func (g *guarded) publish() {
	g.start.Store(g.st.logStart)
	g.end.Store(g.st.logEnd)
	g.hw.Store(g.st.hw)
}

// changeMutex is the logs' RWMutex: every write unlock (the end of anything
// that may have changed a log) publishes the log's offsets and advances
// logChanges, before the lock is released.
type changeMutex struct {
	sync.RWMutex
	publish func() // guarded.publish, set by share
}

// Unlock implements sync.Locker.
func (m *changeMutex) Unlock() {
	if m.publish != nil {
		m.publish()
	}
	logChanges.Add(1)
	m.RWMutex.Unlock()
}

var logChanges atomic.Uint64

// LogChanges returns a number that moves whenever a MemoryLog or a FileLog of
// this process may have changed (each write-locked section advances it): a
// reader that takes it before reading logs and finds it unchanged later knows
// that none of those logs changed meanwhile, without asking each (a Fetch
// long-polling many idle partitions). It says nothing of other Log
// implementations; see TracksChanges.
func LogChanges() uint64 { return logChanges.Load() }

// TracksChanges reports whether l's changes move LogChanges (a MemoryLog or a
// FileLog).
func TracksChanges(l Log) bool {
	switch l.(type) {
	case *MemoryLog, *FileLog:
		return true
	}
	return false
}

// LogStartOffset implements Log.
func (g *guarded) LogStartOffset() int64 { return g.start.Load() }

// LogEndOffset implements Log.
func (g *guarded) LogEndOffset() int64 { return g.end.Load() }

// HighWatermark implements Log.
func (g *guarded) HighWatermark() int64 { return g.hw.Load() }

// LastStableOffset implements Log.
func (g *guarded) LastStableOffset() int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.lastStable()
}

// OpenTransactions implements Log.
func (g *guarded) OpenTransactions() []OpenTxn {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.openTxns()
}

// Epochs implements Log.
func (g *guarded) Epochs() *epoch.Cache {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.epochs.Clone()
}

// EndOffsetForEpoch implements Log.
func (g *guarded) EndOffsetForEpoch(e int32) (int32, int64) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.endOffsetForEpoch(e)
}

// LatestEpoch implements Log.
func (g *guarded) LatestEpoch() int32 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.epochs.LatestEpoch()
}

// LeaderEpoch implements Log.
func (g *guarded) LeaderEpoch() int32 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.leaderEpoch
}
