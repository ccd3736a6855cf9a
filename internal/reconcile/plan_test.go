package reconcile

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// planLog is a log of batches of n records each at the given epochs, starting at 0.
func planLog(t *testing.T, batches ...[2]int32) fetcher.Log {
	t.Helper()
	l := fetcher.NewMemoryLog(fetcher.MemoryLogOptions{})
	var off int64
	for _, b := range batches {
		epoch, n := b[0], int(b[1])
		recs := make([]records.Record, n)
		for i := range recs {
			recs[i] = records.Record{Value: []byte("v")}
		}
		raw, err := records.BuildBatch(records.BatchSpec{BaseOffset: off, PartitionLeaderEpoch: epoch, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		require.NoError(t, err)
		require.NoError(t, l.Append(raw))
		off += int64(n)
	}
	return l
}

func TestPlanTruncation(t *testing.T) {
	// Epoch 0: offsets 0-4 (one batch of 5), epoch 2: 5-7 (3), epoch 4: 8-11 (4).
	l := planLog(t, [2]int32{0, 5}, [2]int32{2, 3}, [2]int32{4, 4})
	stopped := PlanState{State: statemachine.Stopped, LastMirrorOffset: 8}
	for _, tc := range []struct {
		name          string
		lme           int32
		st            PlanState
		off           int64
		full          bool
		removed, locl controller.OffsetRange
		refused       bool
	}{
		{name: "no LME: all goes, the writes after the stop are this site's", lme: -1, st: stopped, off: 0, full: true,
			removed: controller.OffsetRange{From: 0, To: 12, Records: 12}, locl: controller.OffsetRange{From: 8, To: 12, Records: 4}, refused: true},
		{name: "LME 2: the epoch-4 writes go, all local", lme: 2, st: stopped, off: 8,
			removed: controller.OffsetRange{From: 8, To: 12, Records: 4}, locl: controller.OffsetRange{From: 8, To: 12, Records: 4}, refused: true},
		{name: "LME 4: nothing goes", lme: 4, st: stopped, off: -1},
		{name: "LME 0: the mirrored epoch-2 records and the local ones go", lme: 0,
			st: PlanState{State: statemachine.Stopped, LastMirrorOffset: 8}, off: 5,
			removed: controller.OffsetRange{From: 5, To: 12, Records: 7}, locl: controller.OffsetRange{From: 8, To: 12, Records: 4}, refused: true},
		{name: "never mirrored: every record is this site's", lme: 2, st: PlanState{State: statemachine.Unknown, LastMirrorOffset: -1}, off: 8,
			removed: controller.OffsetRange{From: 8, To: 12, Records: 4}, locl: controller.OffsetRange{From: 8, To: 12, Records: 4}, refused: true},
		{name: "a FAILED mirror partition wrote nothing itself", lme: 2, st: PlanState{State: statemachine.Failed, LastMirrorOffset: -1, Previous: statemachine.Mirroring}, off: 8,
			removed: controller.OffsetRange{From: 8, To: 12, Records: 4}, locl: controller.OffsetRange{From: 12, To: 12}},
		{name: "FAILED in PREPARING, before its truncation: the writes after the stop are still this site's", lme: 2,
			st: PlanState{State: statemachine.Failed, LastMirrorOffset: 8, Previous: statemachine.Preparing}, off: 8,
			removed: controller.OffsetRange{From: 8, To: 12, Records: 4}, locl: controller.OffsetRange{From: 8, To: 12, Records: 4}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := planTruncation(l, 0, tc.lme, tc.st)
			require.NoError(t, err)
			require.Equal(t, tc.off, pl.TruncationOffset)
			require.Equal(t, tc.full, pl.FullTruncation)
			require.Equal(t, tc.removed, pl.Removed)
			require.Equal(t, tc.locl, pl.LocalWrites)
			require.Equal(t, tc.refused, pl.RemovesRecords())
		})
	}
}

// TestPlanTruncationKeepsStraddlingBatch: Truncate keeps a batch that starts below the
// offset whole, so the plan's range starts after it.
func TestPlanTruncationKeepsStraddlingBatch(t *testing.T) {
	l := planLog(t, [2]int32{0, 5}, [2]int32{1, 5})
	removed, local, err := countRemoved(l, 3, false, 0)
	require.NoError(t, err)
	require.Equal(t, controller.OffsetRange{From: 5, To: 10, Records: 5}, removed)
	require.Equal(t, controller.OffsetRange{From: 5, To: 10, Records: 5}, local)
	require.NoError(t, l.Truncate(3))
	require.Equal(t, removed.From, l.LogEndOffset(), "the plan's range starts where Truncate cut")
}

// TestGuardsLocalWrites: PREPARING needs an approval to remove this site's records
// when it follows a state in which the partition was writable (a start from UNKNOWN or
// STOPPED), a restart in PREPARING, or a failure before a truncation completed; not
// after a failure of a partition that mirrored (its log holds mirrored records).
func TestGuardsLocalWrites(t *testing.T) {
	for from, want := range map[statemachine.State]bool{
		statemachine.Unknown: true, statemachine.Stopped: true, statemachine.Preparing: true,
		statemachine.Mirroring: false, statemachine.EpochFencing: false, statemachine.Paused: false, statemachine.Pausing: false,
	} {
		r := &Partition{prepFrom: from}
		require.Equal(t, want, r.guardsLocalWrites(), "entered PREPARING from %s", from)
	}
	require.True(t, newPartition(&Engine{ctx: context.Background()}, &Runtime{name: "m"}, "t", records.UUID{}, 0).guardsLocalWrites(),
		"a new reconciler (a restart) is guarded until a transition says otherwise")
}
