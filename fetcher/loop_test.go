package fetcher

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

const waitLong = 20 * time.Second

// emptyBatch crafts a 0-record batch covering base..base+delta, as Kafka's log
// cleaner leaves to keep producer state.
func emptyBatch(t testing.TB, base int64, ple int32, delta int32, pid int64) []byte {
	t.Helper()
	b, err := records.BuildBatch(records.BatchSpec{BaseOffset: base, PartitionLeaderEpoch: ple, ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0}, nil)
	require.NoError(t, err)
	binary.BigEndian.PutUint32(b[23:], uint32(delta))
	binary.BigEndian.PutUint32(b[17:], records.Batch(b).ComputeCRC())
	require.NoError(t, records.Batch(b).VerifyCRC())
	return b
}

func mixedSource(t *testing.T, l Log) {
	t.Helper()
	txn, err := records.BuildBatch(records.BatchSpec{BaseOffset: 13, PartitionLeaderEpoch: 1, Transactional: true, ProducerID: 9,
		ProducerEpoch: 2, BaseSequence: 0, Compression: records.CompressionZstd}, []records.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	require.NoError(t, err)
	appendAll(t, l,
		batch(t, 0, 0, 3, records.CompressionNone),
		batch(t, 3, 0, 3, records.CompressionGzip),
		emptyBatch(t, 6, 0, 2, 4),
		batch(t, 9, 1, 2, records.CompressionSnappy), // gap 6..8 -> 9: compacted
		batch(t, 11, 1, 2, records.CompressionLZ4),
		txn,
		records.BuildControlBatch(records.ControlBatchSpec{BaseOffset: 15, PartitionLeaderEpoch: 1, ProducerID: 9, ProducerEpoch: 2, Type: records.ControlAbort}),
	)
}

func TestFetcherMirrorsMixedBatchesFromLocalSource(t *testing.T) {
	src := NewLocalSource(ReadUncommitted)
	srcLogs := []*MemoryLog{memLog(t, 1), memLog(t, 1)}
	dst := []*MemoryLog{memLog(t, 5), memLog(t, 5)}
	for p, l := range srcLogs {
		mixedSource(t, l)
		src.Add("t", records.UUID{7}, int32(p), l)
	}
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev, PartitionMaxBytes: 200}) // small: many round trips, partial reads
	require.NoError(t, err)
	defer f.Close()
	for p, l := range dst {
		require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: int32(p), Log: l}))
	}
	ev.waitUntil(t, waitLong, "both converged", func() bool {
		return dst[0].LogEndOffset() == 16 && dst[1].LogEndOffset() == 16
	})
	for p := range dst {
		requireSameBatches(t, srcLogs[p], dst[p])
		require.Equal(t, srcLogs[p].Epochs().Entries(), dst[p].Epochs().Entries())
		require.Equal(t, srcLogs[p].OpenTransactions(), dst[p].OpenTransactions())
	}
	// More data keeps flowing; lag goes to zero.
	appendAll(t, srcLogs[1], batch(t, 16, 1, 4, records.CompressionNone))
	tp1 := TopicPartition{"t", 1}
	ev.waitUntil(t, waitLong, "tail mirrored", func() bool { return dst[1].LogEndOffset() == 20 })
	ev.waitUntil(t, waitLong, "lag 0", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		return ev.progress[tp1].Lag == 0 && ev.progress[tp1].SourceHighWatermark == 20
	})
	ev.mu.Lock()
	require.Positive(t, ev.bytes[tp1])
	require.Empty(t, ev.failed)
	require.Empty(t, ev.divergences)
	ev.mu.Unlock()

	st := f.Status()
	require.Len(t, st, 2)
	for _, s := range st {
		require.NoError(t, s.Err)
		require.Equal(t, int32(1), s.SourceLeaderEpoch)
	}
}

func TestFetcherOutOfRangeStartsAtSourceLogStart(t *testing.T) {
	s := memLog(t, 0)
	require.NoError(t, s.TruncateFullyAndStartAt(100))
	appendAll(t, s, batch(t, 100, 0, 5, records.CompressionNone))
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{}, 0, s)
	d := memLog(t, 3)
	appendAll(t, d, batch(t, 0, 0, 10, records.CompressionNone)) // 10..99 were deleted on the source
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	ev.waitUntil(t, waitLong, "caught up", func() bool { return d.LogEndOffset() == 105 })
	require.Equal(t, int64(100), d.LogStartOffset())
	requireSameBatches(t, s, d)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	require.Equal(t, []int64{90}, ev.outOfRange[TopicPartition{"t", 0}])
}

func TestFetcherSourceBehindTruncates(t *testing.T) {
	// The source's end is below ours (unclean election there, no epoch
	// history to compare): truncate to the source end, as Kafka's follower.
	s := memLog(t, 0)
	appendAll(t, s, batch(t, 0, 0, 4, records.CompressionNone))
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{}, 0, s)
	d := memLog(t, 3)
	appendAll(t, d, batch(t, 0, 0, 4, records.CompressionNone), batch(t, 4, 0, 4, records.CompressionNone))
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	ev.waitUntil(t, waitLong, "truncated", func() bool { return d.LogEndOffset() == 4 })
	appendAll(t, s, batch(t, 4, 0, 2, records.CompressionGzip))
	ev.waitUntil(t, waitLong, "caught up", func() bool { return d.LogEndOffset() == 6 })
	requireSameBatches(t, s, d)
}

func TestFetcherEpochFencingStopsPartition(t *testing.T) {
	s := memLog(t, 7)
	appendAll(t, s, batch(t, 0, 0, 2, records.CompressionNone), batch(t, 2, 4, 2, records.CompressionNone), batch(t, 4, 7, 2, records.CompressionNone))
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{}, 0, s)
	d := memLog(t, 5)
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	tp := TopicPartition{"t", 0}
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	ev.waitUntil(t, waitLong, "fenced", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		_, ok := ev.fencing[tp]
		return ok
	})
	ev.mu.Lock()
	require.Equal(t, [2]int32{7, 5}, ev.fencing[tp])
	ev.mu.Unlock()
	require.Equal(t, int64(4), d.LogEndOffset(), "batches below the fencing batch are kept")
	st := f.Status()
	require.Len(t, st, 1)
	var fe *EpochFencingError
	require.ErrorAs(t, st[0].Err, &fe)
	require.ErrorIs(t, st[0].Err, ErrEpochFencing)
	require.Equal(t, int64(4), fe.Offset)
	require.NoError(t, f.Remove("t", 0))
	require.Empty(t, f.Status())
}

// corruptingSource flips one byte in the batch at offset bad of partition p.
type corruptingSource struct {
	Source
	p   int32
	bad int64
}

func (c corruptingSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	res, err := c.Source.Fetch(ctx, parts)
	if err != nil {
		return nil, err
	}
	for i := range res {
		if res[i].Partition != c.p {
			continue
		}
		buf := append([]byte(nil), res[i].Records...)
		for it := records.NewIterator(buf); it.Next(); {
			if b := it.Batch(); b.BaseOffset() == c.bad {
				b[len(b)-1] ^= 0x40
			}
		}
		res[i].Records = buf
	}
	return res, nil
}

func TestFetcherCorruptBatchFailsOnlyItsPartition(t *testing.T) {
	local := NewLocalSource(ReadUncommitted)
	srcLogs := []*MemoryLog{memLog(t, 0), memLog(t, 0)}
	for p, l := range srcLogs {
		appendAll(t, l, batch(t, 0, 0, 3, records.CompressionNone), batch(t, 3, 0, 3, records.CompressionSnappy), batch(t, 6, 0, 3, records.CompressionNone))
		local.Add("t", records.UUID{}, int32(p), l)
	}
	dst := []*MemoryLog{memLog(t, 2), memLog(t, 2)}
	ev := newRecorder()
	f, err := NewFetcher(corruptingSource{Source: local, p: 0, bad: 3}, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	for p, l := range dst {
		require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: int32(p), Log: l}))
	}
	tp0 := TopicPartition{"t", 0}
	ev.waitUntil(t, waitLong, "p0 failed", func() bool { return ev.failure(tp0) != nil })
	err = ev.failure(tp0)
	var ce *CorruptBatchError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, ErrCorruptBatch)
	require.ErrorIs(t, err, records.ErrCorrupt)
	require.Equal(t, int64(3), ce.Offset)
	require.Contains(t, err.Error(), "offset 3")
	require.Equal(t, int64(3), dst[0].LogEndOffset(), "the good batches before the bad one are kept, nothing after")

	// The other partition keeps mirroring.
	appendAll(t, srcLogs[1], batch(t, 9, 0, 3, records.CompressionNone))
	ev.waitUntil(t, waitLong, "p1 mirrored", func() bool { return dst[1].LogEndOffset() == 12 })
	requireSameBatches(t, srcLogs[1], dst[1])
	require.Nil(t, ev.failure(TopicPartition{"t", 1}))
}

// noDivergenceSource behaves like kfake: it ignores LastFetchedEpoch.
type noDivergenceSource struct{ Source }

func (n noDivergenceSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	cp := append([]FetchPartition(nil), parts...)
	for i := range cp {
		cp[i].LastFetchedEpoch = -1
	}
	return n.Source.Fetch(ctx, cp)
}

func (noDivergenceSource) DivergenceViaOffsetForLeaderEpoch() bool { return true }

func TestFetcherProbeWithOffsetForLeaderEpochConverges(t *testing.T) {
	a, b := exampleB(t)
	local := NewLocalSource(ReadUncommitted)
	local.Add("t", records.UUID{1}, 0, b)
	ev := newRecorder()
	f, err := NewFetcher(noDivergenceSource{local}, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: a}))
	ev.waitUntil(t, waitLong, "converged", func() bool { return a.LogEndOffset() == b.LogEndOffset() })
	requireSameBatches(t, b, a)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	require.Equal(t, []divergenceEvent{{epoch.Divergence{Epoch: 0, EndOffset: 2}, 2}}, ev.divergences[TopicPartition{"t", 0}])
}

// undefinedEpochSource answers every OffsetForLeaderEpoch below the current
// epoch with (-1, -1), like kfake's gap.
type undefinedEpochSource struct {
	noDivergenceSource
	current int32
}

func (u undefinedEpochSource) OffsetForLeaderEpoch(ctx context.Context, qs []EpochQuery) ([]EpochResult, error) {
	res, err := u.Source.OffsetForLeaderEpoch(ctx, qs)
	for i := range res {
		if err == nil && qs[i].LeaderEpoch != u.current && qs[i].LeaderEpoch > 0 {
			res[i].LeaderEpoch, res[i].EndOffset = -1, -1
		}
	}
	return res, err
}

func TestFetcherProbeHandlesUndefinedAnswer(t *testing.T) {
	// Destination: epochs 0 (0-1) and 1 (2-3); source: epoch 0 (0-1), epoch 1
	// (2-3, same bytes) then epoch 2. The source wrongly answers (-1,-1) for
	// epoch 1: the loop drops epoch 1 locally, probes epoch 0, and refetches.
	s := memLog(t, 2)
	b0, b1 := batch(t, 0, 0, 2, records.CompressionNone), batch(t, 2, 1, 2, records.CompressionNone)
	appendAll(t, s, b0, b1, batch(t, 4, 2, 2, records.CompressionNone))
	d := memLog(t, 5)
	appendAll(t, d, b0, b1)
	local := NewLocalSource(ReadUncommitted)
	local.Add("t", records.UUID{}, 0, s)
	ev := newRecorder()
	f, err := NewFetcher(undefinedEpochSource{noDivergenceSource{local}, 2}, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	ev.waitUntil(t, waitLong, "converged", func() bool { return d.LogEndOffset() == 6 })
	requireSameBatches(t, s, d)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	require.Equal(t, []divergenceEvent{{epoch.Divergence{Epoch: -1, EndOffset: -1}, 2}}, ev.divergences[TopicPartition{"t", 0}])
}

func TestFetcherFollowsSourceLeaderEpoch(t *testing.T) {
	s := memLog(t, 0)
	appendAll(t, s, batch(t, 0, 0, 2, records.CompressionNone))
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{}, 0, s)
	d := memLog(t, 10)
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	ev.waitUntil(t, waitLong, "first", func() bool { return d.LogEndOffset() == 2 })
	// A leader change on the source: the fetcher's CurrentLeaderEpoch 0 is
	// fenced; it refreshes metadata and goes on.
	_, err = s.BumpLeaderEpoch(0)
	require.NoError(t, err)
	_, err = s.AppendAsLeader(batch(t, 0, 0, 3, records.CompressionLZ4))
	require.NoError(t, err)
	ev.waitUntil(t, waitLong, "second", func() bool { return d.LogEndOffset() == 5 })
	requireSameBatches(t, s, d)
	require.Equal(t, []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 2}}, d.Epochs().Entries())
	ev.waitUntil(t, waitLong, "status", func() bool { return f.Status()[0].SourceLeaderEpoch == 1 })
}

func TestFetcherLifecycle(t *testing.T) {
	src := NewLocalSource(ReadUncommitted)
	_, err := NewFetcher(nil, Config{})
	require.Error(t, err)
	_, err = NewFetcher(src, Config{PartitionMaxBytes: -1})
	require.Error(t, err)
	f, err := NewFetcher(src, Config{})
	require.NoError(t, err)
	l := memLog(t, 0)
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: l}))
	require.ErrorIs(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: l}), ErrDuplicatePartition)
	require.Error(t, f.Add(PartitionSpec{Topic: "t", Partition: 1}))
	require.NoError(t, f.Remove("t", 0))
	require.NoError(t, f.Remove("t", 0))
	require.NoError(t, f.Close())
	require.ErrorIs(t, f.Close(), ErrFetcherClosed)
	require.ErrorIs(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: l}), ErrFetcherClosed)
	require.ErrorIs(t, f.Remove("t", 0), ErrFetcherClosed)
}

func TestFetcherAppendFailureFailsPartition(t *testing.T) {
	s := memLog(t, 0)
	appendAll(t, s, batch(t, 0, 0, 2, records.CompressionNone))
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{}, 0, s)
	d := NewMemoryLog(MemoryLogOptions{FailAppendN: 1})
	_, err := d.BumpLeaderEpoch(3)
	require.NoError(t, err)
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	tp := TopicPartition{"t", 0}
	ev.waitUntil(t, waitLong, "failed", func() bool { return ev.failure(tp) != nil })
	require.True(t, errors.Is(ev.failure(tp), ErrInjected))
}

func TestFetcherAddSeveralIsAllOrNothing(t *testing.T) {
	src := NewLocalSource(ReadUncommitted)
	f, err := NewFetcher(src, Config{})
	require.NoError(t, err)
	defer f.Close()
	a, b := memLog(t, 0), memLog(t, 0)
	require.ErrorIs(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: a}, PartitionSpec{Topic: "t", Partition: 0, Log: b}), ErrDuplicatePartition)
	require.Empty(t, f.Status())
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: a}, PartitionSpec{Topic: "t", Partition: 1, Log: b}))
	require.Len(t, f.Status(), 2)
	require.NoError(t, f.Add())
}

// leaderPerPartitionSource puts every partition on a source broker of its
// own (leader id = partition) and holds partition 0's fetches until release
// is closed, like a broker that stopped answering.
type leaderPerPartitionSource struct {
	Source
	t       *testing.T
	release chan struct{}
	held    atomic.Int64 // fetches of partition 0 held so far
}

func (s *leaderPerPartitionSource) PartitionInfo(ctx context.Context, topic string, partition int32, refresh bool) (PartitionInfo, error) {
	info, err := s.Source.PartitionInfo(ctx, topic, partition, refresh)
	info.Leader = partition
	return info, err
}

func (s *leaderPerPartitionSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	for _, p := range parts[1:] {
		if p.Partition != parts[0].Partition {
			s.t.Errorf("one Fetch mixes partitions %d and %d of different leaders", parts[0].Partition, p.Partition)
		}
	}
	if parts[0].Partition == 0 {
		s.held.Add(1)
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Source.Fetch(ctx, parts)
}

func TestFetcherSlowLeaderDoesNotHoldBackOthers(t *testing.T) {
	local := NewLocalSource(ReadUncommitted)
	srcLogs := []*MemoryLog{memLog(t, 0), memLog(t, 0)}
	for p, l := range srcLogs {
		appendAll(t, l, batch(t, 0, 0, 3, records.CompressionNone))
		local.Add("t", records.UUID{}, int32(p), l)
	}
	src := &leaderPerPartitionSource{Source: local, t: t, release: make(chan struct{})}
	dst := []*MemoryLog{memLog(t, 1), memLog(t, 1)}
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev, IdleWait: time.Millisecond})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: dst[0]}, PartitionSpec{Topic: "t", Partition: 1, Log: dst[1]}))

	// Partition 1 follows its source round after round while partition 0's
	// broker holds its first fetch.
	for i := range int64(20) {
		base := 3 + 3*i
		appendAll(t, srcLogs[1], batch(t, base, 0, 3, records.CompressionLZ4))
		ev.waitUntil(t, waitLong, "p1 caught up", func() bool { return dst[1].LogEndOffset() == base+3 })
	}
	requireSameBatches(t, srcLogs[1], dst[1])
	require.Equal(t, int64(0), dst[0].LogEndOffset())
	require.Equal(t, int64(1), src.held.Load(), "partition 0's fetch is still the first one, held")

	// An op interrupts the held fetch; once the broker answers again,
	// partition 0 converges too.
	require.NoError(t, f.Remove("t", 1))
	close(src.release)
	ev.waitUntil(t, waitLong, "p0 caught up", func() bool { return dst[0].LogEndOffset() == 3 })
	requireSameBatches(t, srcLogs[0], dst[0])
}

// holdingSource is a Source whose first Fetch is a long poll that lasts until
// release is closed (or its context is cancelled, which it counts); every
// Fetch's partitions are recorded.
type holdingSource struct {
	Source
	release   chan struct{}
	held      chan struct{} // closed once the first Fetch waits
	mu        sync.Mutex
	fetches   int
	cancelled int
	requests  [][]int32 // the partitions of each Fetch
}

func (s *holdingSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	s.mu.Lock()
	s.fetches++
	first := s.fetches == 1
	ps := make([]int32, len(parts))
	for i, p := range parts {
		ps[i] = p.Partition
	}
	s.requests = append(s.requests, ps)
	s.mu.Unlock()
	if first {
		close(s.held)
		select {
		case <-s.release:
		case <-ctx.Done():
			s.mu.Lock()
			s.cancelled++
			s.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	return s.Source.Fetch(ctx, parts)
}

// TestFetcherRemoveCancelsNoFetch removes half of the partitions of a long
// poll in flight: Remove returns without cancelling it (a cancelled fetch
// resets its fetch session, and a failover of thousands of partitions then
// refetched every partition of the broker once per batch of removes), the
// answer's data for the removed partitions is dropped, and the next fetch
// names only the partitions left.
func TestFetcherRemoveCancelsNoFetch(t *testing.T) {
	const n = 10
	local := NewLocalSource(ReadUncommitted)
	srcs, dsts := make([]*MemoryLog, n), make([]*MemoryLog, n)
	for i := range n {
		srcs[i], dsts[i] = memLog(t, 0), memLog(t, 1)
		local.Add("t", records.UUID{1}, int32(i), srcs[i])
	}
	src := &holdingSource{Source: local, release: make(chan struct{}), held: make(chan struct{})}
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	specs := make([]PartitionSpec, n)
	for i := range n {
		specs[i] = PartitionSpec{Topic: "t", Partition: int32(i), Log: dsts[i]}
	}
	require.NoError(t, f.Add(specs...))
	select {
	case <-src.held:
	case <-time.After(waitLong):
		require.FailNow(t, "no fetch was sent")
	}

	removed := make(chan error, 1)
	go func() {
		var err error
		for i := range n / 2 {
			err = errors.Join(err, f.Remove("t", int32(i)))
		}
		removed <- err
	}()
	select {
	case err := <-removed:
		require.NoError(t, err)
	case <-time.After(waitLong):
		require.FailNow(t, "Remove waited for the fetch in flight")
	}
	for i := range n {
		appendAll(t, srcs[i], batch(t, 0, 0, 1, records.CompressionNone))
	}
	close(src.release)
	ev.waitUntil(t, waitLong, "the partitions left mirrored", func() bool {
		for i := n / 2; i < n; i++ {
			if dsts[i].LogEndOffset() != 1 {
				return false
			}
		}
		return true
	})
	ev.waitUntil(t, waitLong, "a fetch after the answer", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return len(src.requests) > 1
	})
	for i := range n / 2 {
		require.Zero(t, dsts[i].LogEndOffset(), "partition %d was removed before the answer came", i)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	require.Zero(t, src.cancelled, "a remove cancelled the fetch in flight")
	require.Len(t, src.requests[0], n)
	for _, req := range src.requests[1:] {
		for _, p := range req {
			require.GreaterOrEqual(t, p, int32(n/2), "a later fetch names removed partition %d", p)
		}
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for i := range n / 2 {
		require.NotContains(t, ev.progress, TopicPartition{"t", int32(i)}, "an event after Remove returned")
	}
}
