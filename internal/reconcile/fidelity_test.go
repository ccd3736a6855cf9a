package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// bareEngine is an Engine with what Health and the fidelity bookkeeping use.
func bareEngine(now *time.Time) *Engine {
	return &Engine{log: slog.New(slog.DiscardHandler), metrics: NopMetrics{}, clock: func() time.Time { return *now },
		cfg: Config{UnreachableAfter: time.Second}, ctx: context.Background(), changeCh: make(chan struct{})}
}

func barePartition(e *Engine, st statemachine.State) *Partition {
	r := &Partition{e: e}
	r.sched.Store(schedQueued) // a kick queues no turn: the test drives it
	r.health.init()
	r.fid.init()
	r.srcHW.Store(-1)
	r.pubState.Store(int32(st))
	return r
}

// TestHealthFrozenAndKeptThroughRetries: a MIRRORING partition with no fetch response
// for UnreachableAfter is shown unreachable (REQUEST_TIMED_OUT) since its last response,
// with an unknown time lag; a recorded source problem stays shown in FAILED and in the
// MIRRORING of a retry, and disappears in STOPPED and after a successful fetch.
func TestHealthFrozenAndKeptThroughRetries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	e := bareEngine(&now)
	r := barePartition(e, statemachine.Mirroring)
	r.health.fetchStart.Store(t0.UnixNano())
	r.health.lastFetch.Store(t0.Add(100 * time.Millisecond).UnixNano())
	now = t0.Add(time.Second)
	require.True(t, r.Health(0, now).SourceUnreachableSince.IsZero(), "answered 900 ms ago")
	now = t0.Add(1200 * time.Millisecond)
	h := r.Health(0, now)
	require.Equal(t, t0.Add(100*time.Millisecond), h.SourceUnreachableSince)
	require.Equal(t, admin.CodeRequestTimedOut, h.SourceErrorCode)
	require.Equal(t, time.Duration(-1), h.TimeLag, "never a stale 0")

	// A failed fetch counts from the last response.
	r.observeSourceError(errors.New("dial tcp: connection refused"))
	r.pubState.Store(int32(statemachine.Failed))
	r.fetcherStopped()
	require.Equal(t, t0.Add(100*time.Millisecond), r.Health(0, now).SourceUnreachableSince, "kept in FAILED")
	r.pubState.Store(int32(statemachine.Mirroring)) // the retry
	r.health.fetchStart.Store(now.UnixNano())
	require.Equal(t, admin.CodeNetworkException, r.Health(0, now).SourceErrorCode, "kept through the retry")
	r.pubState.Store(int32(statemachine.Stopped))
	require.True(t, r.Health(0, now).SourceUnreachableSince.IsZero(), "not in STOPPED")
	r.pubState.Store(int32(statemachine.Mirroring))
	r.observeProgress(fetcher.Progress{SourceHighWatermark: 5, LogEndOffset: 5, MaxTimestamp: -1})
	require.True(t, r.Health(0, now).SourceUnreachableSince.IsZero(), "a fetch reached the source")
}

// TestFidelityBookkeeping: a truncation lowers the verified offset to the log end and
// drops a check result read before it; a sweep never moves the verified offset; a
// mismatch lowers it to the mismatch, pushes a FAILED cause naming the offset, and is
// not retried.
func TestFidelityBookkeeping(t *testing.T) {
	now := time.Unix(1000, 0)
	e := bareEngine(&now)
	r := barePartition(e, statemachine.Mirroring)
	l := fetcher.NewMemoryLog(fetcher.MemoryLogOptions{})
	for i := range 5 {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: int64(i * 10), PartitionLeaderEpoch: 1,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, make([]records.Record, 10))
		require.NoError(t, err)
		require.NoError(t, l.Append(b))
	}
	r.log = l
	r.logReady.Store(true)
	tp := fetcher.TopicPartition{Topic: "t", Partition: 0}

	r.observeFidelity(fetcher.VerifyResult{TopicPartition: tp, VerifiedUpTo: 50, SourceHighWatermark: 60}, 0, false)
	v, at := r.Fidelity()
	require.Equal(t, int64(50), v)
	require.Equal(t, now, at)
	hw, hwAt := r.SourceEnd()
	require.Equal(t, int64(60), hw)
	require.Equal(t, now, hwAt)

	r.observeFidelity(fetcher.VerifyResult{TopicPartition: tp, VerifiedUpTo: 20}, 0, true)
	v, _ = r.Fidelity()
	require.Equal(t, int64(50), v, "a sweep moves only the sweep")
	require.Equal(t, int64(20), r.fid.sweep.Load())

	gen := r.fid.gen.Load()
	require.NoError(t, l.Truncate(30))
	r.fidelityTruncated()
	v, _ = r.Fidelity()
	require.Equal(t, int64(30), v)
	r.observeFidelity(fetcher.VerifyResult{TopicPartition: tp, VerifiedUpTo: 50}, gen, false)
	v, _ = r.Fidelity()
	require.Equal(t, int64(30), v, "a result read before the truncation is dropped")

	mm := &fetcher.FidelityMismatchError{TopicPartition: tp, Offset: 10, SourceCRC: 1, DestinationCRC: 2}
	r.observeFidelity(fetcher.VerifyResult{TopicPartition: tp, VerifiedUpTo: 10, Mismatch: mm}, r.fid.gen.Load(), true)
	v, _ = r.Fidelity()
	require.Equal(t, int64(10), v)
	require.Len(t, r.pending, 1)
	ev, ok := r.pending[0].(statemachine.Error)
	require.True(t, ok)
	require.Contains(t, ev.Reason, "offset 10")
	require.ErrorIs(t, ev.Cause, fetcher.ErrFidelityMismatch)
	require.True(t, nonRetryable(ev.Cause))
}
