package reconcile

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
)

func TestSourceErrorCodes(t *testing.T) {
	require.Equal(t, admin.CodeNotLeaderOrFollower, sourceErrorCode(&fetcher.SourceError{Code: fetcher.CodeNotLeaderOrFollower}))
	require.Equal(t, admin.CodeUnknownTopicOrPartition, sourceErrorCode(fmt.Errorf("x: %w", fetcher.ErrUnknownPartition)))
	require.Equal(t, admin.CodeLeaderNotAvailable, sourceErrorCode(fetcher.ErrNoLeader))
	require.Equal(t, admin.CodeNetworkException, sourceErrorCode(fmt.Errorf("dial tcp: connection refused")))
}

func TestTimeLag(t *testing.T) {
	var h partitionHealth
	h.init()
	now := time.UnixMilli(10_000)
	require.Equal(t, time.Duration(-1), h.timeLag(-1, now))
	require.Equal(t, time.Duration(0), h.timeLag(0, now))
	require.Equal(t, time.Duration(-1), h.timeLag(5, now), "no batch mirrored yet: unknown")
	h.lastTs.Store(7_500)
	require.Equal(t, 2500*time.Millisecond, h.timeLag(5, now))
}

// TestRetryGateSharedAcrossPartitions: partitions of a mirror that fail together join
// one retry round; each round's backoff doubles (capped at Max) however many
// partitions fail; each retry lands within the round's window (jitter); a healthy
// partition starts the backoff again.
func TestRetryGateSharedAcrossPartitions(t *testing.T) {
	now := time.Unix(1000, 0)
	g := newRetryGate()
	g.now = func() time.Time { return now }
	var jit int64
	g.jitter = func(n int64) int64 { jit = (jit + 7919) % n; return jit }
	rc := RetryConfig{Initial: time.Second, Max: 8 * time.Second, MaxAttempts: 100}
	var rounds []time.Duration
	for round := 0; round < 6; round++ {
		var first time.Duration
		for p := 0; p < 50; p++ { // 50 partitions fail at the same moment
			d := g.delay(rc, 0)
			if p == 0 {
				first = d
			}
			base := min(time.Second<<round, rc.Max)
			require.GreaterOrEqual(t, d, base, "round %d partition %d", round, p)
			require.Less(t, d, base+base/2, "round %d partition %d", round, p)
		}
		rounds = append(rounds, first)
		require.Equal(t, round+1, g.level, "one level per round, not per partition")
		now = g.next // the round fires; everyone fails again
	}
	require.Len(t, rounds, 6)
	g.healthy()
	d := g.delay(rc, 0)
	require.Less(t, d, 1500*time.Millisecond, "back to Initial after a healthy fetch")
	// After a restart the gate is new, but a partition's stored attempts keep its backoff.
	g2 := newRetryGate()
	g2.now = g.now
	g2.jitter = func(int64) int64 { return 0 }
	require.Equal(t, 8*time.Second, g2.delay(rc, 5))
}

// TestRetryGateSourceBack: the partitions waiting for a retry round are woken
// together when the source answers again, each then retrying within
// backSpread, and the backoff starts again from Initial; a later wait gets a
// new channel.
func TestRetryGateSourceBack(t *testing.T) {
	g := newRetryGate()
	rc := RetryConfig{Initial: time.Second, Max: time.Minute, MaxAttempts: 100}
	for range 8 {
		g.delay(rc, 0)
		g.next = g.now() // every round has fired: the backoff is now long
	}
	require.Greater(t, g.delay(rc, 0), 30*time.Second)
	waits := []*countWaiter{{}, {}}
	for _, w := range waits {
		g.waitBack(w)
		g.waitBack(w) // registered twice: woken once
	}
	gone := &countWaiter{}
	g.waitBack(gone)
	g.forget(gone)
	for _, w := range waits {
		require.Zero(t, w.n.Load(), "woken before the source came back")
	}
	g.sourceBack()
	for _, w := range waits {
		require.EqualValues(t, 1, w.n.Load(), "woken once")
	}
	require.Zero(t, gone.n.Load(), "a forgotten waiter is not woken")
	for range 100 {
		d := g.backDelay()
		require.Greater(t, d, time.Duration(0))
		require.LessOrEqual(t, d, backSpread+time.Millisecond)
	}
	require.Less(t, g.delay(rc, 0), 1500*time.Millisecond, "back to Initial")
	g.sourceBack()
	require.EqualValues(t, 1, waits[0].n.Load(), "a wait is for the next sourceBack only")
	next := &countWaiter{}
	g.waitBack(next)
	g.sourceBack()
	require.EqualValues(t, 1, next.n.Load())
}

// countWaiter counts its wakeSourceBack calls.
type countWaiter struct{ n atomic.Int64 }

func (w *countWaiter) wakeSourceBack() { w.n.Add(1) }

// TestTransient: what the LME lookup and the source calls retry unchanged.
func TestTransient(t *testing.T) {
	require.True(t, transient(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}))
	require.True(t, transient(admin.CodeCoordinatorLoadInProgress.Err()))
	require.True(t, transient(ErrClosed))
	require.False(t, transient(fmt.Errorf("x: %w", ErrMirrorLoop)))
	require.False(t, transient(admin.CodeClusterAuthorizationFailed.Err()))
}

// TestStorageErrorTyping: the typed cause and which errors count as storage errors.
func TestStorageErrorTyping(t *testing.T) {
	e := &StorageError{Topic: "t", Partition: 3, Op: "append", Err: &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}}
	require.ErrorIs(t, e, ErrStorage)
	require.ErrorIs(t, e, syscall.ENOSPC)
	require.Contains(t, e.Error(), "t-3")
	for _, err := range []error{syscall.EIO, syscall.EROFS, &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, e} {
		require.True(t, isStorageError(err), "%v", err)
	}
	for _, err := range []error{nil, errors.New("x"), ErrMirrorLoop, syscall.ECONNREFUSED, fetcher.ErrDiverged} {
		require.False(t, isStorageError(err), "%v", err)
	}
	r := &Partition{topic: "t", partition: 1}
	require.ErrorIs(t, r.storageCause("append", syscall.ENOSPC), ErrStorage)
	other := errors.New("other")
	require.Same(t, other, r.storageCause("append", other), "a non-storage cause is kept as it is")
	// A descriptor shortage the log's file cache could not absorb is a storage
	// failure of the partitions it hits.
	emfile := fmt.Errorf("%w: open x: %w", fetcher.ErrTooManyOpenFiles, &fs.PathError{Op: "open", Path: "x", Err: syscall.EMFILE})
	for _, err := range []error{emfile, syscall.ENFILE} {
		cause := r.storageCause("append", err)
		var se *StorageError
		require.ErrorAs(t, cause, &se, "%v", err)
		require.Equal(t, int32(1), se.Partition)
	}
}

// TestNewFullTruncation: the lost range, never understated.
func TestNewFullTruncation(t *testing.T) {
	require.Equal(t, int64(12), newFullTruncation(0, 0, 21, 12).Lost())
	require.Equal(t, int64(0), newFullTruncation(0, 5, 21, 3).Lost(), "the source still has everything")
	require.Equal(t, int64(21), newFullTruncation(0, 0, 21, 40).Lost(), "the source has none of it")
	require.Equal(t, controller.FullTruncation{Partition: 2, LogStart: 4, LogEnd: 9, SourceLogStart: -1, LostFrom: 4, LostTo: 9},
		newFullTruncation(2, 4, 9, -1), "an unknown source log start counts everything as lost")
}

// TestChangedClosesOnTheNextChange: a channel from Changed is closed by the next
// notifyChange, however many changes nobody waited for came before it.
func TestChangedClosesOnTheNextChange(t *testing.T) {
	e := &Engine{changeCh: make(chan struct{})}
	e.notifyChange() // nobody waits
	e.notifyChange()
	ch := e.Changed()
	select {
	case <-ch:
		t.Fatal("closed by a change made before Changed")
	default:
	}
	same := e.Changed()
	e.notifyChange()
	for _, c := range []<-chan struct{}{ch, same} {
		select {
		case <-c:
		default:
			t.Fatal("not closed by the change after Changed")
		}
	}
	next := e.Changed()
	select {
	case <-next:
		t.Fatal("a new channel is closed before the next change")
	default:
	}
	e.notifyChange()
	<-next
}
