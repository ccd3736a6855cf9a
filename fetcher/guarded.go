package fetcher

import (
	"sync"

	"github.com/kmirror/kmirror/epoch"
)

// guarded is what MemoryLog and FileLog share: the log's bookkeeping (offsets,
// epoch cache, producer state, read-only flag) under one RWMutex, and the Log
// methods answered from it alone. Both logs embed it; mu also guards their own
// fields.
type guarded struct {
	mu sync.RWMutex
	st logState
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
