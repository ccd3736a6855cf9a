package mirror

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// fidelitySite is a kfake source with topic "events" (2 partitions, 10 records each),
// mirrored by m (mirror "k") into dest, with the fidelity check every 50 ms.
type fidelitySite struct {
	*outage
}

func newFidelitySite(t *testing.T, dest *LocalDestination, cfg map[string]string, opts ...Option) *fidelitySite {
	t.Helper()
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	o := &outage{src: src, cut: &cutDialer{}, dest: dest}
	t.Cleanup(func() { require.NoError(t, o.dest.Close()) })
	o.produce(t, "before", 10)
	o.m, err = New(Config{Destination: o.dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		append([]Option{WithSourceFactory(cutSourceFactory(o.cut)),
			WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil })}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, o.m.Close()) })
	mc := map[string]string{KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "50",
		"fidelity.check.interval.ms": "50"}
	for k, v := range cfg {
		mc[k] = v
	}
	require.NoError(t, o.m.CreateClusterMirror(ctx, "k", mc))
	mustOK(t)(o.m.StartMirrorTopics(ctx, "k", []string{"events"}, StartOptions{}))
	require.NoError(t, o.m.WaitForLag(ctx, "k", []string{"events"}, 0))
	return &fidelitySite{outage: o}
}

// TestFidelityCleanMirrorVerifiesToLogEnd: on a clean mirror the verified offset of
// every partition reaches the log end, and follows it as the source grows.
func TestFidelityCleanMirrorVerifiesToLogEnd(t *testing.T) {
	ctx := testCtx(t)
	s := newFidelitySite(t, NewMemoryDestination("dst", fetcher.MemoryLogOptions{}), nil)
	for _, want := range []int64{10, 20} {
		if want == 20 {
			s.produce(t, "more", 10)
		}
		for p := int32(0); p < 2; p++ {
			waitCond(t, ctx, s.m, "verified to the log end", func() bool {
				d := describeOn(t, s.m, "k", "events", p)
				return d.DestinationOffset == want && d.VerifiedOffset == want && !d.VerifiedTime.IsZero()
			})
		}
	}
	d := describeOn(t, s.m, "k", "events", 0)
	require.Equal(t, statemachine.Mirroring, d.State)
	require.Empty(t, d.ErrorMessage)
}

// TestFidelityMismatchInFileLogFound: a record byte of a mirrored batch flipped in the
// destination's segment file (its header and CRC field intact) after the check had
// verified it is found by the next sweep: the partition goes FAILED, not retried, with
// a reason naming the offset and both CRCs; the other partition is untouched.
func TestFidelityMismatchInFileLogFound(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	dest, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	s := newFidelitySite(t, dest, nil)
	for p := int32(0); p < 2; p++ {
		waitCond(t, ctx, s.m, "verified", func() bool { return describeOn(t, s.m, "k", "events", p).VerifiedOffset == 10 })
	}
	l, err := dest.Log("events", 0)
	require.NoError(t, err)
	require.NoError(t, l.Flush())
	segs, err := filepath.Glob(filepath.Join(root, "events-0", "*.log"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	data, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	first, err := records.ParseBatch(data)
	require.NoError(t, err)
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	require.NoError(t, err)
	at := int64(len(first) - 2) // a byte of the last record of the first batch
	_, err = f.WriteAt([]byte{data[at] ^ 0x20}, at)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var d PartitionDescription
	waitCond(t, ctx, s.m, "mismatch found", func() bool {
		d = describeOn(t, s.m, "k", "events", 0)
		return d.State == statemachine.Failed
	})
	require.Contains(t, d.ErrorMessage, "fidelity mismatch")
	require.Contains(t, d.ErrorMessage, "at offset 0")
	require.Contains(t, d.ErrorMessage, fmt.Sprintf("source batch crc %08x", first.CRC()), "the source CRC is named")
	require.Equal(t, int16(records.NonRetryable), d.RetryAttempt, "a changed destination is not retried")
	require.Equal(t, int64(0), d.VerifiedOffset)
	other := describeOn(t, s.m, "k", "events", 1)
	require.Equal(t, statemachine.Mirroring, other.State)
	require.Equal(t, int64(10), other.VerifiedOffset)
}

// TestFidelityUnreachableShownThroughRetries: with the source cut off, describe shows
// every partition unreachable within socket.timeout.ms, with an unknown lag, and keeps
// showing it while a FAILED retry has moved the partition back to MIRRORING, until a
// fetch succeeds again.
func TestFidelityUnreachableShownThroughRetries(t *testing.T) {
	ctx := testCtx(t)
	s := newFidelitySite(t, NewMemoryDestination("dst", fetcher.MemoryLogOptions{}),
		map[string]string{"socket.timeout.ms": "400"},
		WithSourceUnreachableAfter(400*time.Millisecond),
		WithFailedRetry(RetryConfig{Initial: 50 * time.Millisecond, Max: 100 * time.Millisecond, MaxAttempts: 1000}))
	cut := time.Now()
	s.cut.Cut()
	for p := int32(0); p < 2; p++ {
		waitCond(t, ctx, s.m, "shown unreachable, MIRRORING again after a retry", func() bool {
			d := describeOn(t, s.m, "k", "events", p)
			if !d.SourceUnreachableSince.IsZero() {
				require.False(t, d.SourceUnreachableSince.After(cut.Add(400*time.Millisecond)), "counted from the last answer")
				require.Equal(t, int64(-1), d.Lag(), "no stale lag")
				require.Equal(t, time.Duration(-1), d.TimeLag)
				require.True(t, d.Failing())
			}
			return d.State == statemachine.Mirroring && d.RetryAttempt >= 1 && !d.SourceUnreachableSince.IsZero()
		})
	}
	s.cut.Restore()
	for p := int32(0); p < 2; p++ {
		waitCond(t, ctx, s.m, "reachable again", func() bool {
			d := describeOn(t, s.m, "k", "events", p)
			return d.State == statemachine.Mirroring && d.SourceUnreachableSince.IsZero() && d.Lag() == 0
		})
	}
}

// TestFidelityFrozenSourceShownWithinTimeout: a source whose Fetch never answers
// (kfake holds every Fetch) is shown unreachable with REQUEST_TIMED_OUT within
// socket.timeout.ms of its last answer, with an unknown lag, never MIRRORING with a
// stale lag of 0.
func TestFidelityFrozenSourceShownWithinTimeout(t *testing.T) {
	ctx := testCtx(t)
	s := newFidelitySite(t, NewMemoryDestination("dst", fetcher.MemoryLogOptions{}),
		map[string]string{"socket.timeout.ms": "500"},
		WithSourceUnreachableAfter(500*time.Millisecond),
		WithFailedRetry(RetryConfig{Initial: 50 * time.Millisecond, Max: 100 * time.Millisecond, MaxAttempts: 1000}))
	var mu sync.Mutex
	thaw := make(chan struct{})
	frozen := true
	t.Cleanup(func() {
		mu.Lock()
		if frozen {
			frozen = false
			close(thaw)
		}
		mu.Unlock()
	})
	s.src.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		s.src.KeepControl()
		mu.Lock()
		f := frozen
		mu.Unlock()
		if f {
			s.src.SleepControl(func() { <-thaw })
		}
		return nil, nil, false
	})
	freeze := time.Now()
	for p := int32(0); p < 2; p++ {
		var d PartitionDescription
		waitCond(t, ctx, s.m, "frozen source shown", func() bool {
			d = describeOn(t, s.m, "k", "events", p)
			return !d.SourceUnreachableSince.IsZero()
		})
		require.False(t, d.SourceUnreachableSince.After(freeze.Add(500*time.Millisecond)), "within one socket.timeout.ms of the last answer")
		require.Equal(t, int64(-1), d.Lag())
		require.True(t, d.Failing())
	}
	mu.Lock()
	frozen = false
	close(thaw)
	mu.Unlock()
	s.produce(t, "after", 5)
	require.NoError(t, s.m.WaitForLag(ctx, "k", []string{"events"}, 0))
	for p := int32(0); p < 2; p++ {
		waitCond(t, ctx, s.m, "thawed", func() bool {
			d := describeOn(t, s.m, "k", "events", p)
			return d.SourceUnreachableSince.IsZero() && d.Lag() == 0 && d.DestinationOffset == 15
		})
	}
}

// TestFidelityPausedShowsLag: a PAUSED partition keeps its lag: the fidelity check
// reads the source end, so records produced while paused show as lag, with the time
// the source end was read.
func TestFidelityPausedShowsLag(t *testing.T) {
	ctx := testCtx(t)
	s := newFidelitySite(t, NewMemoryDestination("dst", fetcher.MemoryLogOptions{}), nil)
	mustOK(t)(s.m.PauseMirrorTopics(ctx, "k", []string{"events"}, LifecycleOptions{}))
	require.NoError(t, s.m.WaitForStates(ctx, "k", []string{"events"}, statemachine.Paused))
	s.produce(t, "paused", 7)
	for p := int32(0); p < 2; p++ {
		waitCond(t, ctx, s.m, "paused lag", func() bool {
			d := describeOn(t, s.m, "k", "events", p)
			return d.State == statemachine.Paused && d.SourceOffset == 17 && d.DestinationOffset == 10 &&
				d.Lag() == 7 && !d.SourceOffsetTime.IsZero()
		})
	}
}
