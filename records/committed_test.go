package records

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommittedBatches(t *testing.T) {
	data := func(base int64, txn bool, pid int64) Batch {
		b, err := BuildBatch(BatchSpec{BaseOffset: base, Transactional: txn, ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0},
			[]Record{{Value: []byte{byte(base)}}})
		require.NoError(t, err)
		return b
	}
	marker := func(base int64, pid int64, typ ControlType) Batch {
		return Batch(BuildControlBatch(ControlBatchSpec{BaseOffset: base, ProducerID: pid, Type: typ}))
	}
	bs := []Batch{
		data(0, false, -1),
		data(1, true, 7), // aborted below
		data(2, true, 8), // committed below
		data(3, false, -1),
		data(4, true, 7),
		marker(5, 7, ControlAbort),
		marker(6, 8, ControlCommit),
		Batch(BuildControlBatch(ControlBatchSpec{BaseOffset: 7, Type: ControlMirrorPIDReset})),
		data(8, true, 9), // open: at the LSO
		data(9, false, -1),
	}
	offsets := func(bs []Batch) []int64 {
		var out []int64
		for _, b := range bs {
			out = append(out, b.BaseOffset())
		}
		return out
	}
	require.Equal(t, []int64{0, 2, 3}, offsets(CommittedBatches(bs, 8)))
	require.Equal(t, []int64{0, 2, 3, 8, 9}, offsets(CommittedBatches(bs, 10)), "an LSO past the open transaction exposes it")
	require.Empty(t, CommittedBatches(bs, 0))
}
