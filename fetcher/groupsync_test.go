package fetcher

import (
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// blockingRounds is a syncGroup whose rounds wait for release and count.
func blockingRounds() (*syncGroup, chan error, *atomic.Int64) {
	release := make(chan error)
	var rounds atomic.Int64
	g := &syncGroup{fs: func() error { rounds.Add(1); return <-release }}
	return g, release, &rounds
}

// waitNext waits until a caller waits for the round after the running one,
// then lets the others that were started join it.
func waitNext(t *testing.T, g *syncGroup) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil
	}, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
}

func syncAsync(g *syncGroup) chan error {
	c := make(chan error, 1)
	go func() {
		joined, err := g.sync()
		if !joined {
			err = errors.New("not joined")
		}
		c <- err
	}()
	return c
}

// Callers that arrive while a round runs share the next one, and the group
// goes idle after it.
func TestSyncGroupRounds(t *testing.T) {
	g, release, rounds := blockingRounds()
	first := syncAsync(g)
	require.Eventually(t, func() bool { return rounds.Load() == 1 }, 5*time.Second, time.Millisecond)
	const n = 20
	later := make([]chan error, n)
	for i := range later {
		later[i] = syncAsync(g)
	}
	waitNext(t, g)
	release <- nil
	require.NoError(t, <-first)
	release <- nil
	for _, c := range later {
		require.NoError(t, <-c)
	}
	require.Equal(t, int64(2), rounds.Load(), "one round for the 20 callers of the second")

	go func() { release <- nil }()
	require.NoError(t, <-syncAsync(g))
	require.Equal(t, int64(3), rounds.Load())
}

// A failed round fails its callers and those waiting for the next one (their
// writes may predate the error, which syncfs reports once), and turns the
// group off: later callers sync their own files.
func TestSyncGroupFailureIsNeverLost(t *testing.T) {
	g, release, rounds := blockingRounds()
	first := syncAsync(g)
	require.Eventually(t, func() bool { return rounds.Load() == 1 }, 5*time.Second, time.Millisecond)
	waiting := syncAsync(g)
	waitNext(t, g)
	boom := errors.New("writeback failed")
	release <- boom
	require.ErrorIs(t, <-first, boom)
	require.ErrorIs(t, <-waiting, boom, "the next round's callers hear of the error too")
	require.Equal(t, int64(1), rounds.Load(), "no round after the failure")
	joined, err := g.sync()
	require.False(t, joined, "the group is off")
	require.NoError(t, err)
}

// syncLogs opens n FileLogs with one batch and a state file each (later bumps
// write in place), and returns them with their filesystem's sync group.
func syncLogs(t *testing.T, n int) ([]*FileLog, *syncGroup) {
	root := t.TempDir()
	logs := make([]*FileLog, n)
	for i := range logs {
		logs[i] = openFile(t, filepath.Join(root, strconv.Itoa(i)), FileLogOptions{Fsync: FsyncOnFlush})
		appendN(t, logs[i], 1)
		_, err := logs[i].BumpLeaderEpoch(-1)
		require.NoError(t, err)
	}
	g := logs[0].group
	require.NotNil(t, g, "group syncs on Linux 5.8+")
	return logs, g
}

// requireDurable crashes each log (its files closed, nothing flushed) and checks that
// a reopen finds its end offset and leader epoch.
func requireDurable(t *testing.T, logs []*FileLog, epoch int32) {
	t.Helper()
	for _, l := range logs {
		end := l.LogEndOffset()
		l.closeFiles()
		r := openFile(t, l.dir, FileLogOptions{Fsync: FsyncOnFlush})
		require.Equal(t, end, r.LogEndOffset())
		require.Equal(t, epoch, r.LeaderEpoch())
		require.NoError(t, r.Close())
	}
}

// Many FileLogs syncing at once (a failover's barriers) all get durable
// appends through their filesystem's group, and each reads its batches back
// after a crash.
func TestFileLogsSyncTogether(t *testing.T) {
	const n = 64
	logs, g := syncLogs(t, n)
	var rounds atomic.Int64
	fs := g.fs
	g.fs = func() error { rounds.Add(1); return fs() }
	// As if many other syncs were under way: every sync joins a round.
	syncsInFlight.Add(groupSyncAbove)
	defer syncsInFlight.Add(-groupSyncAbove)
	batch := appendN(t, NewMemoryLog(MemoryLogOptions{}), 1)
	var wg sync.WaitGroup
	errs := make(chan error, n*3)
	for _, l := range logs {
		wg.Go(func() {
			_, err := l.BumpLeaderEpoch(-1)
			errs <- err
			_, err = l.AppendAsLeader(batch)
			errs <- err
			errs <- l.SyncData()
		})
	}
	wg.Wait()
	g.fs = fs
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, rounds.Load())
	require.Less(t, rounds.Load(), int64(2*n), "2n syncs (a bump and a barrier per log) in fewer rounds")
	requireDurable(t, logs, 1)
}

// TestGroupSyncWaitersHoldNothing: a bump of the leader epoch and a
// SyncData that wait for their filesystem's round hold neither a small-file
// slot nor a pinned segment through it. Before, each bump kept one of the 256
// slots until its round ended, so a failover reached the round 256 bumps at
// a time (about 5,000 partitions a second), and each barrier's sync kept its
// segment open.
func TestGroupSyncWaitersHoldNothing(t *testing.T) {
	n := cap(smallFileSlots) + 44
	logs, g := syncLogs(t, n)
	fs := g.fs
	release := make(chan struct{})
	g.fs = func() error { <-release; return fs() }
	defer func() { g.fs = fs }()
	syncsInFlight.Add(groupSyncAbove)
	defer syncsInFlight.Add(-groupSyncAbove)
	base := syncsInFlight.Load()

	waitAll := func(what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			return syncsInFlight.Load() == base+int64(n) && len(smallFileSlots) == 0
		}, 20*time.Second, time.Millisecond, "%s: %d of %d syncs wait for the round, %d small-file slots held",
			what, syncsInFlight.Load()-base, n, len(smallFileSlots))
	}
	errs := make(chan error, n)
	for _, l := range logs {
		go func() { _, err := l.BumpLeaderEpoch(-1); errs <- err }()
	}
	waitAll("bumps")
	release <- struct{}{} // the round the first caller started
	close(release)        // and every later one
	for range n {
		require.NoError(t, <-errs)
	}

	release = make(chan struct{})
	batch := appendN(t, NewMemoryLog(MemoryLogOptions{}), 1)
	for _, l := range logs {
		_, err := l.AppendAsLeader(batch)
		require.NoError(t, err)
		go func() { errs <- l.SyncData() }()
	}
	waitAll("barriers")
	for _, l := range logs {
		h := l.active().log
		h.c.mu.Lock()
		refs := h.refs
		h.c.mu.Unlock()
		require.Zero(t, refs, "a segment pinned through the round")
	}
	close(release)
	for range n {
		require.NoError(t, <-errs)
	}
	requireDurable(t, logs, 1)
}
