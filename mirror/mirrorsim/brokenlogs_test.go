package mirrorsim

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// Deliberately broken Logs: each one must be caught by the simulation within
// brokenBound seeds, with the invariant it breaks. They wrap the MemoryLog of the
// default factory (appends durable at once), so nothing but their defect differs.

const brokenBound = 200

func memLog() *fetcher.MemoryLog {
	return fetcher.NewMemoryLog(fetcher.MemoryLogOptions{SyncEveryAppend: true})
}

// lsoIgnoresTxnLog reports the high watermark as its last stable offset, ignoring
// open transactions.
type lsoIgnoresTxnLog struct{ *fetcher.MemoryLog }

func (l lsoIgnoresTxnLog) LastStableOffset() int64 { return l.HighWatermark() }

// truncateDropsExtraLog's Truncate removes one more batch than asked: the last batch
// that starts below the offset goes too.
type truncateDropsExtraLog struct{ *fetcher.MemoryLog }

func (l truncateDropsExtraLog) Truncate(off int64) error {
	start, end := l.LogStartOffset(), l.LogEndOffset()
	if off > start && off < end {
		if buf, err := l.Read(start, math.MaxInt32); err == nil {
			cut := off
			for it := records.NewIterator(buf); it.Next(); {
				if b := it.Batch().BaseOffset(); b < off && b > start {
					cut = b
				}
			}
			off = cut
		}
	}
	return l.MemoryLog.Truncate(off)
}

// forgetsEpochLog keeps the leader epoch in memory only: a crash (reopen) takes it from
// the latest epoch of the batches, as a log that does not persist it would.
type forgetsEpochLog struct {
	*fetcher.MemoryLog
	mu sync.Mutex
	le int32
}

func newForgetsEpochLog() *forgetsEpochLog { return &forgetsEpochLog{MemoryLog: memLog(), le: -1} }

func (l *forgetsEpochLog) LeaderEpoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.le
}

func (l *forgetsEpochLog) BumpLeaderEpoch(min int32) (int32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := max(l.le+1, min+1)
	if e > l.MemoryLog.LeaderEpoch() {
		if _, err := l.MemoryLog.BumpLeaderEpoch(e - 1); err != nil {
			return 0, err
		}
	}
	l.le = e
	return e, nil
}

func (l *forgetsEpochLog) AppendAsLeader(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := records.Batch(bytes.Clone(batch))
	if len(b) < records.HeaderSize {
		return 0, fetcher.ErrInvalidBatch
	}
	off := l.LogEndOffset()
	b.SetBaseOffset(off)
	b.SetPartitionLeaderEpoch(l.le)
	return off, l.Append(b)
}

func (l *forgetsEpochLog) Crash() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.MemoryLog.Crash()
	l.le = l.LatestEpoch()
}

// ignoresReadOnly is a Log whose read-only guard is broken: SetReadOnly is ignored, so
// it accepts a client write to a mirror partition.
type ignoresReadOnly struct{ *fetcher.MemoryLog }

func (ignoresReadOnly) SetReadOnly(bool) {}

// catchBroken runs seeds 1..brokenBound on the logs of f and expects the lowest failing
// seed to fail with one of the invariants want.
func catchBroken(t *testing.T, f func() fetcher.Log, want ...string) {
	t.Helper()
	catchBrokenFactory(t, func(LogSpec) (fetcher.Log, error) { return f(), nil }, want...)
}

func catchBrokenFactory(t *testing.T, f LogFactory, want ...string) {
	t.Helper()
	s, err := New(Options{WaitTimeout: 2 * time.Second, LogFactory: f})
	require.NoError(t, err)
	err = runParallel(t, s, 1, brokenBound, runtime.GOMAXPROCS(0), &stats{})
	require.Error(t, err, "no seed in [1,%d] caught the broken log", brokenBound)
	var fl *Failure
	require.ErrorAs(t, err, &fl)
	var ie *InvariantError
	require.True(t, errors.As(err, &ie), "seed %d failed for another reason: %v", fl.Seed, fl.Err)
	require.Contains(t, want, ie.Invariant, "seed %d: %v", fl.Seed, fl.Err)
	t.Logf("caught at seed %d step %d: %v", fl.Seed, fl.Step, fl.Err)
}

func TestSimCatchesBrokenLogs(t *testing.T) {
	t.Run("LSO ignores open transactions", func(t *testing.T) {
		catchBroken(t, func() fetcher.Log { return lsoIgnoresTxnLog{memLog()} }, "read-committed")
	})
	t.Run("Truncate drops an extra batch", func(t *testing.T) {
		catchBroken(t, func() fetcher.Log { return truncateDropsExtraLog{memLog()} }, "committed-not-lost", "acked-not-lost")
	})
	t.Run("leader epoch forgotten on reopen", func(t *testing.T) {
		catchBroken(t, func() fetcher.Log { return newForgetsEpochLog() }, "leader-epoch-durable")
	})
	t.Run("leader epoch forgotten on reopen from disk", func(t *testing.T) {
		// FileLogs whose state file (the durable leader epoch) is lost at every reopen.
		root := t.TempDir()
		files := FileLogFactory(root, fileLogOptions(fetcher.FsyncNever))
		catchBrokenFactory(t, func(spec LogSpec) (fetcher.Log, error) {
			if spec.Reopen {
				dir := fetcher.PartitionDir(filepath.Join(root, strconv.FormatUint(spec.Seed, 10), spec.Site), spec.Topic, spec.Partition)
				if err := os.Remove(filepath.Join(dir, fetcher.StateFileName)); err != nil {
					return nil, err
				}
			}
			return files(spec)
		}, "leader-epoch-durable")
	})
	t.Run("write accepted while read-only", func(t *testing.T) {
		catchBroken(t, func() fetcher.Log { return ignoresReadOnly{memLog()} }, "read-only-refused")
	})
}

// TestSimStrictStop requires a failover to keep every committed record the mirror
// held, including those behind a transaction still open at the stop. STOPPING that
// truncates to the last stable offset fails it (seed 14, step 18, on the branch before ABORT
// markers); STOPPING that appends ABORT markers (the library's default) passes.
func TestSimStrictStop(t *testing.T) {
	o := Options{}
	o.strictStop = true
	s, err := New(o)
	require.NoError(t, err)
	err = runParallel(t, s, 1, brokenBound, runtime.GOMAXPROCS(0), &stats{})
	logFailure(t, err)
	require.NoError(t, err)
}
