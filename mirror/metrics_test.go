package mirror

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// metricsRecorder keeps every Metrics call.
type metricsRecorder struct {
	NopMetrics  // the fidelity check's reports are asserted in fidelity_test.go
	mu          sync.Mutex
	states      map[PartitionRef]statemachine.State
	gone        map[PartitionRef]bool
	transitions map[[2]statemachine.State]int
	lagOffsets  map[PartitionRef]int64
	lagUpTo     map[PartitionRef]time.Time
	bytes       int64
	records     int64
	fetches     int
	fetchErrs   int
	truncations map[TruncationCause]int
	bumps       map[EpochBumpCause]int
	stopping    []time.Duration
	coordWrites int
	admin       map[string]admin.Code
}

func newMetricsRecorder() *metricsRecorder {
	return &metricsRecorder{states: map[PartitionRef]statemachine.State{}, gone: map[PartitionRef]bool{},
		transitions: map[[2]statemachine.State]int{}, lagOffsets: map[PartitionRef]int64{}, lagUpTo: map[PartitionRef]time.Time{},
		truncations: map[TruncationCause]int{}, bumps: map[EpochBumpCause]int{}, admin: map[string]admin.Code{}}
}

func (r *metricsRecorder) PartitionState(p PartitionRef, s statemachine.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states[p] = s
}

func (r *metricsRecorder) PartitionGone(p PartitionRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone[p] = true
}

func (r *metricsRecorder) StateTransition(_ PartitionRef, from, to statemachine.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transitions[[2]statemachine.State{from, to}]++
}

func (r *metricsRecorder) Lag(p PartitionRef, offsets int64, upTo time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lagOffsets[p], r.lagUpTo[p] = offsets, upTo
}

func (r *metricsRecorder) Mirrored(_ PartitionRef, bytes, records int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bytes += bytes
	r.records += records
}

func (r *metricsRecorder) Fetch(_ string, _ int32, _ time.Duration, err error, _ []int16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetches++
	if err != nil {
		r.fetchErrs++
	}
}

func (r *metricsRecorder) Truncation(_ PartitionRef, c TruncationCause, _ int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.truncations[c]++
}

func (r *metricsRecorder) LeaderEpochBump(_ PartitionRef, c EpochBumpCause, _, _ int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bumps[c]++
}

func (r *metricsRecorder) StoppingDuration(_ PartitionRef, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopping = append(r.stopping, d)
}

func (r *metricsRecorder) CoordinatorWrite(string, int, time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.coordWrites++
}

func (r *metricsRecorder) AdminRequest(o admin.RequestObservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.admin[o.API] = o.Code
}

// TestMetricsAndHonestLagOnKfake mirrors a kfake topic with a recording Metrics: the
// state, byte, record, lag, fetch, epoch-bump and coordinator series move; describe
// reports a time lag of 0 and the last fetch once caught up; a stop reports its
// STOPPING duration; with the source gone, describe names the cause while the state
// stays MIRRORING. (The admin request metrics and the health over the wire are checked
// in mirror/adminhandler, TestAdminPeerOverHandler.)
func TestMetricsAndHonestLagOnKfake(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events", "other"))
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()
	const n = 20
	for _, topic := range []string{"events", "other"} {
		for i := 0; i < n; i++ {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strings.Repeat(fmt.Sprint(i), 10))}).FirstErr())
		}
	}
	rec := newMetricsRecorder()
	dest := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	defer dest.Close()
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		WithMetrics(rec), WithSourceUnreachableAfter(0),
		WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil }))
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "50"}))
	mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"events", "other"}, StartOptions{}))
	require.NoError(t, m.WaitForLag(ctx, "k", []string{"events", "other"}, 0))
	d := describeOn(t, m, "k", "events", 0)
	require.Equal(t, int64(n), d.SourceOffset)
	require.Equal(t, time.Duration(0), d.TimeLag)
	require.False(t, d.LastFetch.IsZero())
	require.Equal(t, admin.CodeNone, d.SourceErrorCode)

	ref := PartitionRef{Mirror: "k", Topic: "events", Partition: 0}
	rec.mu.Lock()
	require.Equal(t, statemachine.Mirroring, rec.states[ref])
	require.Equal(t, int64(0), rec.lagOffsets[ref])
	require.False(t, rec.lagUpTo[ref].IsZero(), "batches were mirrored")
	secs, ok := LagSeconds(rec.lagOffsets[ref], rec.lagUpTo[ref], time.Now())
	require.True(t, ok)
	require.Equal(t, 0.0, secs)
	require.Positive(t, rec.bytes)
	require.Equal(t, int64(2*n), rec.records)
	require.Positive(t, rec.fetches)
	require.Positive(t, rec.coordWrites)
	require.Positive(t, rec.bumps[EpochBumpAhead], "PREPARING raises the epoch above the source's")
	require.Positive(t, rec.transitions[[2]statemachine.State{statemachine.Preparing, statemachine.Mirroring}])
	rec.mu.Unlock()

	mustOK(t)(m.StopMirrorTopics(ctx, "k", []string{"other"}, StopOptions{Wait: true}))
	rec.mu.Lock()
	require.Len(t, rec.stopping, 1)
	require.Positive(t, rec.bumps[EpochBumpState], "STOPPING bumps the leader epoch")
	require.Equal(t, statemachine.Stopped, rec.states[PartitionRef{Mirror: "k", Topic: "other", Partition: 0}])
	require.Negative(t, rec.lagOffsets[PartitionRef{Mirror: "k", Topic: "other", Partition: 0}], "no fetcher: lag unknown")
	rec.mu.Unlock()
	stopped := describeOn(t, m, "k", "other", 0)
	require.Equal(t, int64(-1), stopped.Lag(), "lag of a partition without a fetcher is unknown, not 0")
	require.Equal(t, time.Duration(-1), stopped.TimeLag)

	src.Close() // the source goes away
	waitCond(t, ctx, m, "source error in describe", func() bool {
		return describeOn(t, m, "k", "events", 0).SourceErrorCode != admin.CodeNone
	})
	d = describeOn(t, m, "k", "events", 0)
	require.Equal(t, statemachine.Mirroring, d.State, "the state stays the KIP's")
	require.NotEmpty(t, d.SourceErrorMessage)
	require.False(t, d.SourceUnreachableSince.IsZero())
}

func TestLagSeconds(t *testing.T) {
	now := time.UnixMilli(10_000)
	_, ok := LagSeconds(-1, now, now)
	require.False(t, ok)
	s, ok := LagSeconds(0, time.Time{}, now)
	require.True(t, ok)
	require.Equal(t, 0.0, s)
	_, ok = LagSeconds(3, time.Time{}, now)
	require.False(t, ok, "behind, nothing mirrored yet: unknown")
	s, ok = LagSeconds(3, time.UnixMilli(7_500), now)
	require.True(t, ok)
	require.Equal(t, 2.5, s)
}
