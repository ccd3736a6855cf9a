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
type guarded struct {
	mu changeMutex
	st logState
}

// changeMutex is the logs' RWMutex: every write unlock (the end of anything
// that may have changed a log) advances logChanges, before the lock is
// released.
type changeMutex struct{ sync.RWMutex }

// Unlock implements sync.Locker.
func (m *changeMutex) Unlock() {
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
func (g *guarded) LogStartOffset() int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.logStart
}

// LogEndOffset implements Log.
func (g *guarded) LogEndOffset() int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.logEnd
}

// HighWatermark implements Log.
func (g *guarded) HighWatermark() int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.hw
}

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
