package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// gatedStore blocks Load until the gate is closed.
type gatedStore struct {
	Store
	gate chan struct{}
}

func (g *gatedStore) Load(ctx context.Context, p, e int32, fn func(records.StateRecord) error) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.Load(ctx, p, e, fn)
}

func newRuntime(t testing.TB, cfg Config, s Store) *Runtime {
	t.Helper()
	r, err := New(cfg, s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func loadAllParts(t testing.TB, r *Runtime, epoch int32) {
	t.Helper()
	for p := range r.Config().NumPartitions {
		require.NoError(t, r.Load(p, epoch))
	}
	for p := range r.Config().NumPartitions {
		require.NoError(t, r.WaitLoaded(context.Background(), p))
	}
}

func wreq(mirror string, parts ...WritePartition) WriteRequest {
	return WriteRequest{MirrorName: mirror, Partitions: parts}
}

func wp(p int32, st statemachine.State, le, se int32) WritePartition {
	return WritePartition{TopicID: topicFoo, Partition: p, State: st, LeaderEpoch: le, StateEpoch: se, LastMirrorEpoch: -1, LastMirrorOffset: -1}
}

func rreq(mirror string, le int32, parts ...int32) ReadRequest {
	req := ReadRequest{MirrorName: mirror}
	for _, p := range parts {
		req.Partitions = append(req.Partitions, ReadPartition{TopicID: topicFoo, Partition: p, LeaderEpoch: le})
	}
	return req
}

// preparedRuntime is a one-partition runtime over a memory store, appending
// each write at once, whose partition 0 of mirror "m" is PREPARING (state
// epoch 1).
func preparedRuntime(ctx context.Context, t *testing.T) (*Runtime, *MemoryStore) {
	t.Helper()
	ms := NewMemoryStore()
	r := newRuntime(t, Config{NumPartitions: 1, AppendLinger: -1}, ms)
	loadAllParts(t, r, 1)
	wr, err := r.WriteMirrorStates(ctx, wreq("m", wp(0, statemachine.Preparing, 1, 0)))
	require.NoError(t, err)
	require.Equal(t, admin.CodeNone, wr.Partitions[0].ErrorCode)
	return r, ms
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, Config{}.WithDefaults().Validate())
	d := Config{}.WithDefaults()
	require.Equal(t, int32(50), d.NumPartitions)
	require.Equal(t, 10*time.Millisecond, d.AppendLinger)
	require.Equal(t, 5*time.Second, d.WriteTimeout)
	require.Equal(t, 5<<20, d.LoadBufferSize)
	require.ErrorIs(t, Config{}.Validate(), ErrInvalidConfig)
	bad := d
	bad.MaxBatchRecords = -1
	require.ErrorIs(t, bad.Validate(), ErrInvalidConfig)
	_, err := New(Config{}, nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestRuntimeRoutingAndCodes(t *testing.T) {
	ctx := context.Background()
	gs := &gatedStore{Store: NewMemoryStore(), gate: make(chan struct{})}
	r := newRuntime(t, Config{NumPartitions: 3, AppendLinger: time.Millisecond}, gs)
	parts := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	// nothing owned
	rd, err := r.ReadMirrorStates(ctx, rreq("m", -1, parts...))
	require.NoError(t, err)
	for _, p := range rd.Partitions {
		require.Equal(t, admin.CodeNotCoordinator, p.ErrorCode)
	}
	// loading
	for p := range int32(3) {
		require.NoError(t, r.Load(p, 1))
	}
	wr, err := r.WriteMirrorStates(ctx, wreq("m", wp(0, statemachine.Preparing, 1, 0)))
	require.NoError(t, err)
	require.Equal(t, admin.CodeCoordinatorLoadInProgress, wr.Partitions[0].ErrorCode)
	require.Equal(t, int32(-1), wr.Partitions[0].StateEpoch)
	close(gs.gate)
	for p := range int32(3) {
		require.NoError(t, r.WaitLoaded(ctx, p))
	}
	var ws []WritePartition
	for _, p := range parts {
		ws = append(ws, wp(p, statemachine.Preparing, 1, 0))
	}
	wr, err = r.WriteMirrorStates(ctx, wreq("m", ws...))
	require.NoError(t, err)
	for i, p := range wr.Partitions {
		require.Equal(t, admin.CodeNone, p.ErrorCode)
		require.Equal(t, parts[i], p.Partition, "results in request order")
		require.Equal(t, int32(1), p.StateEpoch)
	}
	rd, err = r.ReadMirrorStates(ctx, rreq("m", -1, parts...))
	require.NoError(t, err)
	for i, p := range rd.Partitions {
		require.Equal(t, admin.CodeNone, p.ErrorCode)
		require.Equal(t, parts[i], p.Partition)
		require.Equal(t, statemachine.Preparing, p.State)
	}
	// unload one partition: only its keys answer NOT_COORDINATOR
	r.Unload(1, 1)
	rd, err = r.ReadMirrorStates(ctx, rreq("m", -1, parts...))
	require.NoError(t, err)
	for _, p := range rd.Partitions {
		if r.PartitionFor("m", topicFoo, p.Partition) == 1 {
			require.Equal(t, admin.CodeNotCoordinator, p.ErrorCode)
		} else {
			require.Equal(t, admin.CodeNone, p.ErrorCode)
		}
	}
	// stale epochs are ignored
	require.NoError(t, r.Load(1, 0))
	require.Error(t, r.WaitLoaded(ctx, 1))
	require.NoError(t, r.Load(1, 1), "same epoch as the unload: ignored")
	require.Error(t, r.WaitLoaded(ctx, 1))
	require.NoError(t, r.Load(1, 2))
	require.NoError(t, r.WaitLoaded(ctx, 1))
	r.Unload(1, 1) // stale unload ignored
	require.NoError(t, r.WaitLoaded(ctx, 1))
	require.Error(t, r.Load(3, 1), "out of range")

	// delete
	del, err := r.DeleteMirror(ctx, "m")
	require.NoError(t, err)
	require.Len(t, del.Partitions, len(parts))
	rd, err = r.ReadMirrorStates(ctx, rreq("m", -1, parts...))
	require.NoError(t, err)
	for _, p := range rd.Partitions {
		require.Equal(t, statemachine.Unknown, p.State)
	}
	require.NoError(t, r.Close())
	_, err = r.ReadMirrorStates(ctx, rreq("m", -1, 0))
	require.ErrorIs(t, err, ErrClosed)
}

func TestRuntimeFailedAppendRollsBack(t *testing.T) {
	ctx := context.Background()
	r, ms := preparedRuntime(ctx, t)

	boom := errors.New("disk on fire")
	ms.FailAppend(1, boom)
	wr, err := r.WriteMirrorStates(ctx, wreq("m", wp(0, statemachine.Mirroring, 1, 1)))
	require.NoError(t, err)
	require.Equal(t, admin.CodeCoordinatorNotAvailable, wr.Partitions[0].ErrorCode)
	require.True(t, admin.CodeCoordinatorNotAvailable.Retriable())

	rd, err := r.ReadMirrorStates(ctx, rreq("m", -1, 0))
	require.NoError(t, err)
	require.Equal(t, statemachine.Preparing, rd.Partitions[0].State, "rolled back to the committed view")
	require.Equal(t, int32(1), rd.Partitions[0].StateEpoch)

	// the retry succeeds with the same state epoch
	wr, err = r.WriteMirrorStates(ctx, wreq("m", wp(0, statemachine.Mirroring, 1, 1)))
	require.NoError(t, err)
	require.Equal(t, admin.CodeNone, wr.Partitions[0].ErrorCode)
	require.Equal(t, int32(2), wr.Partitions[0].StateEpoch)
	require.Len(t, ms.Records(0), 2)
}

// TestRuntimeBatching: writes queued while an append is blocked are batched
// into one append, and answered only after it is durable.
func TestRuntimeBatching(t *testing.T) {
	ctx := context.Background()
	ms := NewMemoryStore()
	r := newRuntime(t, Config{NumPartitions: 1, AppendLinger: time.Hour, MaxBatchRecords: 5}, ms)
	loadAllParts(t, r, 1)
	var wg sync.WaitGroup
	results := make([]WriteResponse, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			results[i], err = r.WriteMirrorStates(ctx, wreq("m", wp(int32(i), statemachine.Preparing, 1, 0)))
			require.NoError(t, err)
		}()
	}
	wg.Wait() // with a one-hour linger, only the max batch size can flush
	require.Equal(t, 1, ms.Appends())
	require.Len(t, ms.Records(0), 5)
	for _, res := range results {
		require.Equal(t, admin.CodeNone, res.Partitions[0].ErrorCode)
	}
}

// TestRuntimeMemoryCrashMidBatch crashes the memory store while a batch is
// being appended: acknowledged writes survive a reload, unacknowledged ones
// are not visible.
func TestRuntimeMemoryCrashMidBatch(t *testing.T) {
	ctx := context.Background()
	ms := NewMemoryStore()
	r := newRuntime(t, Config{NumPartitions: 1, AppendLinger: -1}, ms)
	loadAllParts(t, r, 1)
	for p := range int32(3) {
		wr, err := r.WriteMirrorStates(ctx, wreq("m", wp(p, statemachine.Preparing, 1, 0)))
		require.NoError(t, err)
		require.Equal(t, admin.CodeNone, wr.Partitions[0].ErrorCode)
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	ms.SetAppendHook(func(int32, []records.StateRecord) error {
		close(entered)
		<-release
		return nil
	})
	done := make(chan WriteResponse)
	go func() {
		wr, err := r.WriteMirrorStates(ctx, wreq("m", wp(3, statemachine.Preparing, 1, 0), wp(0, statemachine.Mirroring, 1, 1)))
		require.NoError(t, err)
		done <- wr
	}()
	<-entered
	ms.Crash()
	close(release)
	wr := <-done
	for _, p := range wr.Partitions {
		require.Equal(t, admin.CodeCoordinatorNotAvailable, p.ErrorCode)
	}
	ms.SetAppendHook(nil)
	require.NoError(t, r.Close())

	r2 := newRuntime(t, Config{NumPartitions: 1}, ms)
	loadAllParts(t, r2, 2)
	rd, err := r2.ReadMirrorStates(ctx, rreq("m", -1, 0, 1, 2, 3))
	require.NoError(t, err)
	for _, p := range rd.Partitions[:3] {
		require.Equal(t, statemachine.Preparing, p.State, "acknowledged write kept")
	}
	require.Equal(t, statemachine.Unknown, rd.Partitions[3].State, "unacknowledged write not visible")
}

func TestRuntimeFencedByNewerOwner(t *testing.T) {
	ctx := context.Background()
	ms := NewMemoryStore()
	old := newRuntime(t, Config{NumPartitions: 1, AppendLinger: -1}, ms)
	loadAllParts(t, old, 1)
	nu := newRuntime(t, Config{NumPartitions: 1, AppendLinger: -1}, ms)
	loadAllParts(t, nu, 2)
	for range 2 {
		wr, err := old.WriteMirrorStates(ctx, wreq("m", wp(0, statemachine.Preparing, 1, 0)))
		require.NoError(t, err)
		require.Equal(t, admin.CodeNotCoordinator, wr.Partitions[0].ErrorCode)
	}
	require.Empty(t, ms.Records(0))
	wr, err := nu.WriteMirrorStates(ctx, wreq("m", wp(0, statemachine.Preparing, 1, 0)))
	require.NoError(t, err)
	require.Equal(t, admin.CodeNone, wr.Partitions[0].ErrorCode)
}

func TestRuntimeCloseFailsWaiters(t *testing.T) {
	ctx := context.Background()
	ms := NewMemoryStore()
	r, err := New(Config{NumPartitions: 1, AppendLinger: time.Hour}, ms)
	require.NoError(t, err)
	loadAllParts(t, r, 1)
	type result struct {
		wr  WriteResponse
		err error
	}
	done := make(chan result)
	go func() {
		wr, err := r.WriteMirrorStates(ctx, wreq("m", wp(0, statemachine.Preparing, 1, 0)))
		done <- result{wr, err}
	}()
	// The write sits in the batch for an hour; Close must answer it.
	require.NoError(t, r.Close())
	res := <-done
	if res.err != nil {
		require.ErrorIs(t, res.err, ErrClosed) // Close won the race with the submission
	} else {
		require.Equal(t, admin.CodeNotCoordinator, res.wr.Partitions[0].ErrorCode)
	}
	require.Empty(t, ms.Records(0))
}

// TestRuntimeReadsDoNotWaitForAppends: a read that writes nothing is answered
// from the committed state while an append is in flight (a describe of a
// site does not queue behind a failover's state writes); a read that raises
// the stored leader epoch is a write and waits for its own batch.
func TestRuntimeReadsDoNotWaitForAppends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, ms := preparedRuntime(ctx, t)

	entered := make(chan struct{})
	release := make(chan struct{})
	var once, released sync.Once
	unblock := func() { released.Do(func() { close(release) }) }
	defer unblock() // a failed check must not leave Close waiting on the append
	ms.SetAppendHook(func(int32, []records.StateRecord) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	})
	written := make(chan WriteResponse, 1)
	go func() {
		wr, err := r.WriteMirrorStates(ctx, wreq("m", wp(0, statemachine.Mirroring, 1, 1)))
		if err != nil {
			wr = WriteResponse{}
		}
		written <- wr
	}()
	<-entered

	// The append is blocked: this read is answered, from what is committed.
	rd, err := r.ReadMirrorStates(ctx, rreq("m", -1, 0))
	require.NoError(t, err, "a read waited for the append in flight")
	require.Equal(t, statemachine.Preparing, rd.Partitions[0].State, "the uncommitted write is not visible")
	require.Equal(t, int32(1), rd.Partitions[0].StateEpoch)

	// A read that raises the leader epoch is queued behind the append.
	raised := make(chan ReadResponse, 1)
	go func() {
		rd, _ := r.ReadMirrorStates(ctx, rreq("m", 5, 0))
		raised <- rd
	}()
	select {
	case <-raised:
		t.Fatal("a read raising the leader epoch was answered before the append in flight was durable")
	case <-written:
		t.Fatal("the blocked append was answered")
	default:
	}
	unblock()
	require.Equal(t, admin.CodeNone, (<-written).Partitions[0].ErrorCode)
	rd = <-raised
	require.Equal(t, admin.CodeNone, rd.Partitions[0].ErrorCode)
	require.Equal(t, int32(5), rd.Partitions[0].LeaderEpoch)

	rd, err = r.ReadMirrorStates(ctx, rreq("m", -1, 0))
	require.NoError(t, err)
	require.Equal(t, statemachine.Mirroring, rd.Partitions[0].State)
	require.Equal(t, int32(5), rd.Partitions[0].LeaderEpoch)
	require.Len(t, ms.Records(0), 3, "the raise was appended")
}
