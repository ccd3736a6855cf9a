package fetcher

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// exampleB builds spec §6.4 Example B after B's failover: B (the new source)
// holds A's offsets 0-1 at LE 0, PID_RESET at offset 2 and its own data at
// offset 3, both at LE 10; A (the new destination) holds offsets 0-2 at LE 0
// after the LME truncation (its offset 3 at LE 1 is gone).
func exampleB(t *testing.T) (a, b *MemoryLog) {
	a0, a1, a2 := batch(t, 0, 0, 1, records.CompressionNone), batch(t, 1, 0, 1, records.CompressionNone), batch(t, 2, 0, 1, records.CompressionNone)
	b = memLog(t, 10)
	appendAll(t, b, a0, a1)
	_, err := b.AppendAsLeader(records.BuildControlBatch(records.ControlBatchSpec{
		ProducerID: -1, ProducerEpoch: -1, Timestamp: 1_700_000_000_500, Type: records.ControlMirrorPIDReset}))
	require.NoError(t, err)
	appendAll(t, b, batch(t, 3, 10, 1, records.CompressionNone))

	a = memLog(t, 11)
	appendAll(t, a, a0, a1, a2)
	return a, b
}

func TestLocalSourceExampleBDivergingEpoch(t *testing.T) {
	a, b := exampleB(t)
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{1}, 0, b)

	res, err := src.Fetch(context.Background(), []FetchPartition{{
		Topic: "t", Partition: 0, FetchOffset: a.LogEndOffset(), LastFetchedEpoch: a.LatestEpoch(),
		CurrentLeaderEpoch: 10, MaxBytes: 1 << 20,
	}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, CodeNone, res[0].ErrorCode)
	require.NotNil(t, res[0].DivergingEpoch)
	require.Equal(t, epoch.Divergence{Epoch: 0, EndOffset: 2}, *res[0].DivergingEpoch)
	require.Empty(t, res[0].Records)
	require.Equal(t, int64(4), res[0].HighWatermark)
	require.Equal(t, int64(2), epoch.FollowerTruncationOffset(a.Epochs(), a.LogEndOffset(), *res[0].DivergingEpoch))

	// After the follower truncation the next fetch is clean and returns B's tail.
	require.NoError(t, a.Truncate(2))
	res, err = src.Fetch(context.Background(), []FetchPartition{{
		Topic: "t", Partition: 0, FetchOffset: 2, LastFetchedEpoch: a.LatestEpoch(), CurrentLeaderEpoch: 10, MaxBytes: 1 << 20,
	}})
	require.NoError(t, err)
	require.Nil(t, res[0].DivergingEpoch)
	it := records.NewIterator(res[0].Records)
	var bases []int64
	for it.Next() {
		bases = append(bases, it.Batch().BaseOffset())
	}
	require.Equal(t, []int64{2, 3}, bases)
}

func TestFetcherExampleBConverges(t *testing.T) {
	a, b := exampleB(t)
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{1}, 0, b)
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: a}))
	tp := TopicPartition{"t", 0}
	ev.waitUntil(t, 10e9, "converged", func() bool { return a.LogEndOffset() == b.LogEndOffset() })
	requireSameBatches(t, b, a)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	require.Equal(t, []divergenceEvent{{epoch.Divergence{Epoch: 0, EndOffset: 2}, 2}}, ev.divergences[tp])
	require.Equal(t, []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 10, StartOffset: 2}}, a.Epochs().Entries())
}

func TestLocalSourceRules(t *testing.T) {
	l := memLog(t, 5)
	appendAll(t, l, batch(t, 0, 3, 2, records.CompressionNone), batch(t, 2, 5, 2, records.CompressionNone))
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{}, 0, l)
	ctx := context.Background()
	fetch := func(fp FetchPartition) FetchResult {
		t.Helper()
		fp.Topic, fp.MaxBytes = "t", 1<<20
		res, err := src.Fetch(ctx, []FetchPartition{fp})
		require.NoError(t, err)
		return res[0]
	}
	for _, tc := range []struct {
		name string
		fp   FetchPartition
		code int16
		div  *epoch.Divergence
		n    int // batches returned
	}{
		{"fenced", FetchPartition{CurrentLeaderEpoch: 4, LastFetchedEpoch: -1}, CodeFencedLeaderEpoch, nil, 0},
		{"unknown epoch", FetchPartition{CurrentLeaderEpoch: 6, LastFetchedEpoch: -1}, CodeUnknownLeaderEpoch, nil, 0},
		{"not given", FetchPartition{CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}, CodeNone, nil, 2},
		{"above end", FetchPartition{CurrentLeaderEpoch: 5, FetchOffset: 5, LastFetchedEpoch: -1}, CodeOffsetOutOfRange, nil, 0},
		{"at end", FetchPartition{CurrentLeaderEpoch: 5, FetchOffset: 4, LastFetchedEpoch: 5}, CodeNone, nil, 0},
		{"epoch above latest", FetchPartition{CurrentLeaderEpoch: 5, FetchOffset: 4, LastFetchedEpoch: 7}, CodeOffsetOutOfRange, nil, 0},
		{"diverged", FetchPartition{CurrentLeaderEpoch: 5, FetchOffset: 3, LastFetchedEpoch: 4}, CodeNone, &epoch.Divergence{Epoch: 3, EndOffset: 2}, 0},
		{"clean", FetchPartition{CurrentLeaderEpoch: 5, FetchOffset: 2, LastFetchedEpoch: 3}, CodeNone, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fetch(tc.fp)
			require.Equal(t, tc.code, r.ErrorCode)
			require.Equal(t, tc.div, r.DivergingEpoch)
			n := 0
			for it := records.NewIterator(r.Records); it.Next(); {
				n++
			}
			require.Equal(t, tc.n, n)
		})
	}

	res, err := src.Fetch(ctx, []FetchPartition{{Topic: "nope", LastFetchedEpoch: -1, CurrentLeaderEpoch: -1}})
	require.NoError(t, err)
	require.Equal(t, CodeUnknownTopicOrPartition, res[0].ErrorCode)

	eo, err := src.OffsetForLeaderEpoch(ctx, []EpochQuery{
		{Topic: "t", CurrentLeaderEpoch: 5, LeaderEpoch: 3},
		{Topic: "t", CurrentLeaderEpoch: 5, LeaderEpoch: 4},
		{Topic: "t", CurrentLeaderEpoch: 5, LeaderEpoch: 9},
		{Topic: "t", CurrentLeaderEpoch: 4, LeaderEpoch: 3},
	})
	require.NoError(t, err)
	require.Equal(t, []EpochResult{
		{Topic: "t", LeaderEpoch: 3, EndOffset: 2},
		{Topic: "t", LeaderEpoch: 3, EndOffset: 2},
		{Topic: "t", LeaderEpoch: -1, EndOffset: -1},
		{Topic: "t", ErrorCode: CodeFencedLeaderEpoch, LeaderEpoch: -1, EndOffset: -1},
	}, eo)

	lo, err := src.ListOffsets(ctx, []OffsetQuery{
		{Topic: "t", CurrentLeaderEpoch: -1, Timestamp: EarliestTimestamp},
		{Topic: "t", CurrentLeaderEpoch: -1, Timestamp: LatestTimestamp},
	})
	require.NoError(t, err)
	require.Equal(t, int64(0), lo[0].Offset)
	require.Equal(t, int32(3), lo[0].LeaderEpoch)
	require.Equal(t, int64(4), lo[1].Offset)

	info, err := src.PartitionInfo(ctx, "t", 0, true)
	require.NoError(t, err)
	require.Equal(t, int32(5), info.LeaderEpoch)
	_, err = src.PartitionInfo(ctx, "t", 1, true)
	require.ErrorIs(t, err, ErrUnknownPartition)
}

func TestLocalSourceReadCommittedStopsAtLSO(t *testing.T) {
	l := memLog(t, 0)
	appendAll(t, l, batch(t, 0, 0, 2, records.CompressionNone))
	txn, err := records.BuildBatch(records.BatchSpec{BaseOffset: 2, Transactional: true, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0},
		[]records.Record{{Value: []byte("x")}})
	require.NoError(t, err)
	appendAll(t, l, txn)
	require.Equal(t, int64(2), l.LastStableOffset())
	for _, tc := range []struct {
		iso  int8
		want int
	}{{ReadCommitted, 1}, {ReadUncommitted, 2}} {
		src := NewLocalSource(tc.iso)
		src.Add("t", records.UUID{}, 0, l)
		res, err := src.Fetch(context.Background(), []FetchPartition{{Topic: "t", LastFetchedEpoch: -1, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}})
		require.NoError(t, err)
		n := 0
		for it := records.NewIterator(res[0].Records); it.Next(); {
			n++
		}
		require.Equal(t, tc.want, n, "isolation %d", tc.iso)
	}
}

func TestFetcherStopOnDivergence(t *testing.T) {
	a, b := exampleB(t)
	src := NewLocalSource(ReadUncommitted)
	src.Add("t", records.UUID{1}, 0, b)
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev, StopOnDivergence: true})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: a}))
	ev.waitUntil(t, 10e9, "stopped", func() bool { st := f.Status(); return len(st) == 1 && st[0].Err != nil })
	var de *DivergedError
	require.ErrorAs(t, f.Status()[0].Err, &de)
	require.ErrorIs(t, de, ErrDiverged)
	require.Equal(t, epoch.Divergence{Epoch: 0, EndOffset: 2}, de.Divergence)
	require.Equal(t, int64(2), de.TruncatedTo)
	require.Equal(t, int64(2), a.LogEndOffset(), "truncated, nothing fetched after")
	// Re-adding after the reconciler's work resumes and converges.
	require.NoError(t, f.Remove("t", 0))
	f2, err := NewFetcher(src, Config{Events: ev})
	require.NoError(t, err)
	defer f2.Close()
	require.NoError(t, f2.Add(PartitionSpec{Topic: "t", Partition: 0, Log: a}))
	ev.waitUntil(t, 10e9, "converged", func() bool { return a.LogEndOffset() == b.LogEndOffset() })
	requireSameBatches(t, b, a)
}
