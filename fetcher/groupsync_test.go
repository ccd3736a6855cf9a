package fetcher

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Callers that arrive while a round runs share the next one; a round's error
// goes to its own callers only.
func TestSyncGroupRounds(t *testing.T) {
	release := make(chan error)
	var mu sync.Mutex
	var rounds []string
	syncRoundFS = func(dir string) error {
		mu.Lock()
		rounds = append(rounds, dir)
		mu.Unlock()
		return <-release
	}
	t.Cleanup(func() { syncRoundFS = syncFS })
	g := &syncGroup{}

	first := make(chan error, 1)
	go func() { first <- g.sync("a") }()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(rounds) == 1 }, 5*time.Second, time.Millisecond)

	// 20 callers during the first round: one more round for all of them.
	const n = 20
	later := make(chan error, n)
	for range n {
		go func() { later <- g.sync("b") }()
	}
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil
	}, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // let the 20 join the next round
	boom := errors.New("boom")
	release <- nil
	require.NoError(t, <-first)
	release <- boom
	for range n {
		require.ErrorIs(t, <-later, boom)
	}
	mu.Lock()
	require.Equal(t, []string{"a", "b"}, rounds, "one round for the 20 callers of the second")
	mu.Unlock()

	// After the rounds, the group is idle, and a new caller starts a round.
	go func() { release <- nil }()
	require.NoError(t, g.sync("c"))
}

// Many FileLogs syncing at once (a failover's barriers) all get durable
// appends through the group, and each reads its batches back after a crash.
func TestFileLogsSyncTogether(t *testing.T) {
	root := t.TempDir()
	const n = 64
	logs := make([]*FileLog, n)
	for i := range logs {
		logs[i] = openFile(t, root+"/"+string(rune('a'+i%26))+string(rune('a'+i/26)), FileLogOptions{Fsync: FsyncOnFlush})
		appendN(t, logs[i], 1)
	}
	// As if many other syncs were under way: every sync joins a round.
	syncsInFlight.Add(groupSyncAbove)
	defer syncsInFlight.Add(-groupSyncAbove)
	var rounds atomic.Int64
	syncRoundFS = func(dir string) error { rounds.Add(1); return syncFS(dir) }
	t.Cleanup(func() { syncRoundFS = syncFS })
	var wg sync.WaitGroup
	errs := make(chan error, n*2)
	for _, l := range logs {
		wg.Go(func() {
			_, err := l.BumpLeaderEpoch(-1)
			errs <- err
			appendN(t, l, 1)
			errs <- l.SyncData()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, rounds.Load())
	require.Less(t, rounds.Load(), int64(2*n), "each sync ran a round of its own")
	for _, l := range logs {
		end := l.LogEndOffset()
		l.closeFiles()
		r := openFile(t, l.dir, FileLogOptions{Fsync: FsyncOnFlush})
		require.Equal(t, end, r.LogEndOffset())
		require.Equal(t, int32(0), r.LeaderEpoch())
		require.NoError(t, r.Close())
	}
}
