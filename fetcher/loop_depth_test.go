package fetcher

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// depthSource is a Source that measures, on every Fetch, the depth of the
// calling goroutine's stack and which goroutine calls.
type depthSource struct {
	Source
	dst        Log // Fetch waits until dst holds everything before the offset wanted
	mu         sync.Mutex
	pcs        []uintptr
	fetches    int
	minDepth   int
	maxDepth   int
	byRoutine  map[uint64]int // fetches per goroutine
	maxPerGoro int
}

func newDepthSource(src Source, dst Log) *depthSource {
	return &depthSource{Source: src, dst: dst, pcs: make([]uintptr, 4096), minDepth: 1 << 30, byRoutine: map[uint64]int{}}
}

// goroutineID parses the id from the first line of runtime.Stack
// ("goroutine 42 [running]:"), 0 when it cannot.
func goroutineID() uint64 {
	var buf [64]byte
	line := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return 0
	}
	id, _ := strconv.ParseUint(string(line[:sp]), 10, 64)
	return id
}

func (s *depthSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	// Answer once the answer before has been appended, which is when the
	// loop lets a fetch in flight chain the next one.
	for s.dst.LogEndOffset() < parts[0].FetchOffset && ctx.Err() == nil {
		runtime.Gosched()
	}
	for range 20 {
		runtime.Gosched()
	}
	id := goroutineID()
	s.mu.Lock()
	n := runtime.Callers(0, s.pcs) // len(s.pcs) when deeper: still > any flat depth
	s.fetches++
	s.minDepth, s.maxDepth = min(s.minDepth, n), max(s.maxDepth, n)
	s.byRoutine[id]++
	s.maxPerGoro = max(s.maxPerGoro, s.byRoutine[id])
	s.mu.Unlock()
	return s.Source.Fetch(ctx, parts)
}

// TestFetcherChainedFetchesKeepStackFlat mirrors 10,000 one-batch fetches
// from a source that answers at once, so most fetches are chained by the
// goroutine of the fetch before them: the stack depth at each Fetch must not
// grow with the chain.
func TestFetcherChainedFetchesKeepStackFlat(t *testing.T) {
	const n = 10_000
	srcLog := memLog(t, 0)
	for i := int64(0); i < n; i++ {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: i, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]records.Record{{Value: []byte{byte(i)}}})
		require.NoError(t, err)
		require.NoError(t, srcLog.Append(b))
	}
	local := NewLocalSource(ReadUncommitted)
	local.Add("t", records.UUID{1}, 0, srcLog)
	dst := memLog(t, 1)
	src := newDepthSource(local, dst)
	ev := newRecorder()
	// One batch per fetch: the batches are ~70 bytes.
	f, err := NewFetcher(src, Config{Events: ev, PartitionMaxBytes: 1})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: dst}))
	ev.waitUntil(t, 4*waitLong, "mirrored", func() bool { return dst.LogEndOffset() == n })
	require.NoError(t, f.Close())
	requireSameBatches(t, srcLog, dst)

	src.mu.Lock()
	defer src.mu.Unlock()
	require.GreaterOrEqual(t, src.fetches, n)
	t.Logf("%d fetches, stack depth %d..%d frames, up to %d fetches by one goroutine", src.fetches, src.minDepth, src.maxDepth, src.maxPerGoro)
	// A chain of 64 fetches on one goroutine is enough to prove the point (a recursive
	// chain would be 64 frames deeper) and is reached even on a loaded machine, where
	// the scheduler breaks chains more often.
	require.Greater(t, src.maxPerGoro, 64, "fetches are chained by the goroutine of the fetch before them")
	require.LessOrEqual(t, src.maxDepth-src.minDepth, 2, "the stack grows with chained fetches")
}
