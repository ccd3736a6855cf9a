package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

var topicFoo = records.UUID{1, 2, 3}

// apply runs the records of a command through Replay, as the runtime does.
func apply(t testing.TB, s *Shard, recs []records.StateRecord) {
	t.Helper()
	for _, r := range recs {
		require.NoError(t, s.Replay(r))
	}
}

func write1(s *Shard, st statemachine.State, le, se int32) Result[WriteResponse] {
	return s.WriteMirrorStates(WriteRequest{MirrorName: "m", Partitions: []WritePartition{{
		TopicID: topicFoo, Partition: 0, State: st, LeaderEpoch: le, StateEpoch: se, LastMirrorEpoch: -1, LastMirrorOffset: -1}}})
}

func read1(s *Shard, le int32) Result[ReadResponse] {
	return s.ReadMirrorStates(ReadRequest{MirrorName: "m", Partitions: []ReadPartition{{TopicID: topicFoo, Partition: 0, LeaderEpoch: le}}})
}

// setup puts foo-0 in MIRRORING with highest LE 1 and stateEpoch 1... via
// legal moves: UNKNOWN -> PREPARING (se 1) -> MIRRORING (se 2). To match the
// §9.6 table (stateEpoch 1 at MIRRORING) the stored record is replayed
// directly.
func mirroringAt(t *testing.T, le, se int32) *Shard {
	s := NewShard()
	apply(t, s, []records.StateRecord{{
		PartitionStateKey: &records.MirrorPartitionStateKey{MirrorName: "m", TopicID: topicFoo, Partition: 0},
		PartitionState:    &records.MirrorPartitionStateValue{State: int8(statemachine.Mirroring), LeaderEpoch: le, StateEpoch: se},
	}})
	return s
}

// TestB1B2Race is the exact table of spec §9.6.
func TestB1B2Race(t *testing.T) {
	s := mirroringAt(t, 1, 1)
	// Step 1: b1 (LE 1) prepares MIRRORING -> EPOCH_FENCING with {LE 1, SE 1}; in flight.
	b1 := WritePartition{TopicID: topicFoo, Partition: 0, State: statemachine.EpochFencing, LeaderEpoch: 1, StateEpoch: 1, LastMirrorEpoch: -1}
	// Step 2: leadership moves to b2, LE 2. Steps 3-4: b2 reads with LE 2.
	rd := read1(s, 2)
	require.Len(t, rd.Records, 1, "a read that raises the leader epoch is a write")
	require.Equal(t, int32(2), rd.Records[0].PartitionState.LeaderEpoch)
	require.Equal(t, int32(1), rd.Records[0].PartitionState.StateEpoch)
	require.Equal(t, int32(2), rd.Response.Partitions[0].LeaderEpoch)
	require.Equal(t, int32(1), rd.Response.Partitions[0].StateEpoch)
	require.Equal(t, statemachine.Mirroring, rd.Response.Partitions[0].State)
	apply(t, s, rd.Records)
	// Step 5: b1's write arrives with LE 1: rejected.
	w := s.WriteMirrorStates(WriteRequest{MirrorName: "m", Partitions: []WritePartition{b1}})
	require.Empty(t, w.Records)
	require.Equal(t, admin.CodeFencedLeaderEpoch, w.Response.Partitions[0].ErrorCode)
	require.Equal(t, int32(-1), w.Response.Partitions[0].StateEpoch)
	// Step 6: b2 writes MIRRORING -> PAUSING with {LE 2, SE 1}: accepted, SE 2.
	w = write1(s, statemachine.Pausing, 2, 1)
	require.Equal(t, admin.CodeNone, w.Response.Partitions[0].ErrorCode)
	require.Equal(t, int32(2), w.Response.Partitions[0].StateEpoch)
	require.Len(t, w.Records, 1)
	apply(t, s, w.Records)
	got := read1(s, -1).Response.Partitions[0]
	require.Equal(t, statemachine.Pausing, got.State)
	require.Equal(t, int32(2), got.LeaderEpoch)
	require.Equal(t, int32(2), got.StateEpoch)
}

func TestWriteFencing(t *testing.T) {
	cases := []struct {
		name   string
		le, se int32
		to     statemachine.State
		want   admin.Code
	}{
		{"leader epoch equal accepted", 5, 3, statemachine.Pausing, admin.CodeNone},
		{"leader epoch higher accepted", 6, 3, statemachine.Pausing, admin.CodeNone},
		{"leader epoch lower refused", 4, 3, statemachine.Pausing, admin.CodeFencedLeaderEpoch},
		{"leader epoch -1 skips", -1, 3, statemachine.Pausing, admin.CodeNone},
		{"state epoch equal accepted", 5, 3, statemachine.Pausing, admin.CodeNone},
		{"state epoch higher accepted", 5, 4, statemachine.Pausing, admin.CodeNone},
		{"state epoch lower refused", 5, 2, statemachine.Pausing, admin.CodeFencedStateEpoch},
		{"state epoch -1 skips", 5, -1, statemachine.Pausing, admin.CodeNone},
		{"both -1 skip", -1, -1, statemachine.Pausing, admin.CodeNone},
		{"leader fence checked before state fence", 4, 2, statemachine.Pausing, admin.CodeFencedLeaderEpoch},
		{"fence before transition check", 4, 3, statemachine.Stopped, admin.CodeFencedLeaderEpoch},
		{"state fence before transition check", 5, 2, statemachine.Stopped, admin.CodeFencedStateEpoch},
		{"invalid transition refused", 5, 3, statemachine.Stopped, admin.CodeInvalidClusterMirrorStates},
		{"re-assert accepted", 5, 3, statemachine.Mirroring, admin.CodeNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mirroringAt(t, 5, 3)
			before := s.Dump()
			require.Equal(t, c.want, s.CheckWrite("m", WritePartition{TopicID: topicFoo, Partition: 0, State: c.to, LeaderEpoch: c.le, StateEpoch: c.se}))
			w := write1(s, c.to, c.le, c.se)
			require.Equal(t, before, s.Dump(), "commands never mutate")
			r := w.Response.Partitions[0]
			require.Equal(t, c.want, r.ErrorCode)
			if c.want != admin.CodeNone {
				require.Empty(t, w.Records)
				require.Equal(t, int32(-1), r.StateEpoch)
				require.NotEmpty(t, r.ErrorMessage)
				return
			}
			require.Len(t, w.Records, 1)
			require.Equal(t, int32(4), r.StateEpoch)
			v := w.Records[0].PartitionState
			require.Equal(t, int32(4), v.StateEpoch)
			require.Equal(t, int8(c.to), v.State)
			require.Equal(t, max(int32(5), c.le), v.LeaderEpoch)
		})
	}
}

func TestReadRaisesOnlyUpward(t *testing.T) {
	s := mirroringAt(t, 5, 3)
	for _, le := range []int32{-1, 0, 4, 5} {
		require.Empty(t, read1(s, le).Records, "le %d", le)
	}
	r := read1(s, 6)
	require.Len(t, r.Records, 1)
	// unknown partition: defaults, and a raise on an unknown partition is recorded.
	s = NewShard()
	r = read1(s, -1)
	require.Empty(t, r.Records)
	require.Equal(t, ReadPartitionResult{TopicID: topicFoo, State: statemachine.Unknown, LeaderEpoch: -1,
		StateEpoch: 0, LastMirrorEpoch: -1, LastMirrorOffset: -1, PreviousState: statemachine.Unknown}, r.Response.Partitions[0])
	r = read1(s, 3)
	require.Len(t, r.Records, 1)
	apply(t, s, r.Records)
	require.Equal(t, admin.CodeFencedLeaderEpoch, write1(s, statemachine.Preparing, 2, -1).Response.Partitions[0].ErrorCode)
	w := write1(s, statemachine.Preparing, 3, 0)
	require.Equal(t, admin.CodeNone, w.Response.Partitions[0].ErrorCode)
	require.Equal(t, int32(1), w.Response.Partitions[0].StateEpoch)
}

func TestLMEOnlyWrite(t *testing.T) {
	s := mirroringAt(t, 5, 3)
	w := s.WriteMirrorStates(WriteRequest{MirrorName: "m", Partitions: []WritePartition{{
		TopicID: topicFoo, State: statemachine.Unknown, LeaderEpoch: 5, StateEpoch: -1, LastMirrorEpoch: 9, LastMirrorOffset: 100}}})
	require.Equal(t, admin.CodeNone, w.Response.Partitions[0].ErrorCode)
	require.Equal(t, int32(3), w.Response.Partitions[0].StateEpoch, "LME-only write does not move the state epoch")
	require.Len(t, w.Records, 1)
	require.NotNil(t, w.Records[0].LastMirrorEpochs)
	apply(t, s, w.Records)
	got := read1(s, -1).Response.Partitions[0]
	require.Equal(t, statemachine.Mirroring, got.State)
	require.Equal(t, int32(9), got.LastMirrorEpoch)
	require.Equal(t, int64(100), got.LastMirrorOffset)
	// still fenced
	w = s.WriteMirrorStates(WriteRequest{MirrorName: "m", Partitions: []WritePartition{{
		TopicID: topicFoo, State: statemachine.Unknown, LeaderEpoch: 4, StateEpoch: -1, LastMirrorEpoch: 10}}})
	require.Equal(t, admin.CodeFencedLeaderEpoch, w.Response.Partitions[0].ErrorCode)
	require.Empty(t, w.Records)
	// LME-only write with a higher leader epoch persists the raise too.
	w = s.WriteMirrorStates(WriteRequest{MirrorName: "m", Partitions: []WritePartition{{
		TopicID: topicFoo, State: statemachine.Unknown, LeaderEpoch: 7, StateEpoch: -1, LastMirrorEpoch: 10}}})
	require.Len(t, w.Records, 2)
	require.Equal(t, int32(7), w.Records[0].PartitionState.LeaderEpoch)
	require.Equal(t, int32(3), w.Records[0].PartitionState.StateEpoch)
}

func TestSamePartitionTwiceInOneRequest(t *testing.T) {
	s := NewShard()
	w := s.WriteMirrorStates(WriteRequest{MirrorName: "m", Partitions: []WritePartition{
		{TopicID: topicFoo, State: statemachine.Preparing, LeaderEpoch: 1, StateEpoch: 0, LastMirrorEpoch: -1},
		{TopicID: topicFoo, State: statemachine.Mirroring, LeaderEpoch: 1, StateEpoch: 1, LastMirrorEpoch: -1},
		{TopicID: topicFoo, State: statemachine.Mirroring, LeaderEpoch: 1, StateEpoch: 1, LastMirrorEpoch: -1},
	}})
	require.Equal(t, admin.CodeNone, w.Response.Partitions[0].ErrorCode)
	require.Equal(t, admin.CodeNone, w.Response.Partitions[1].ErrorCode)
	require.Equal(t, admin.CodeFencedStateEpoch, w.Response.Partitions[2].ErrorCode)
	require.Len(t, w.Records, 2)
}

func TestDeleteMirror(t *testing.T) {
	s := NewShard()
	for p := int32(0); p < 3; p++ {
		w := s.WriteMirrorStates(WriteRequest{MirrorName: "m", Partitions: []WritePartition{{
			TopicID: topicFoo, Partition: p, State: statemachine.Preparing, LeaderEpoch: 1, StateEpoch: -1, LastMirrorEpoch: 2}}})
		apply(t, s, w.Records)
	}
	other := s.WriteMirrorStates(WriteRequest{MirrorName: "other", Partitions: []WritePartition{{
		TopicID: topicFoo, Partition: 0, State: statemachine.Preparing, LeaderEpoch: 1, StateEpoch: -1, LastMirrorEpoch: -1}}})
	apply(t, s, other.Records)
	require.Equal(t, 4, s.Len())
	d := s.DeleteMirror("m")
	require.Len(t, d.Response.Partitions, 3)
	require.Len(t, d.Records, 6)
	for i, r := range d.Records {
		require.Nil(t, r.PartitionState)
		require.Nil(t, r.LastMirrorEpochs)
		if i%2 == 0 {
			require.NotNil(t, r.PartitionStateKey)
		} else {
			require.NotNil(t, r.LastMirrorEpochsKey)
		}
	}
	apply(t, s, d.Records)
	require.Equal(t, 1, s.Len())
	// counters are gone: an old leader epoch is accepted again.
	got := read1(s, -1).Response.Partitions[0]
	require.Equal(t, int32(-1), got.LeaderEpoch)
	require.Equal(t, int32(0), got.StateEpoch)
	require.Empty(t, s.DeleteMirror("nope").Records)
}

func TestReplayInvalid(t *testing.T) {
	s := NewShard()
	require.ErrorIs(t, s.Replay(records.StateRecord{}), ErrInvalidRecord)
	require.ErrorIs(t, s.Replay(records.StateRecord{
		PartitionStateKey:   &records.MirrorPartitionStateKey{},
		LastMirrorEpochsKey: &records.LastMirrorEpochsKey{}}), ErrInvalidRecord)
	require.Equal(t, 0, s.Len())
}

// TestRetryAttemptAndPreviousState: RetryAttempt is stored with each state write;
// PreviousState is the state before FAILED, kept across FAILED re-writes, and both
// survive a replay into a fresh shard.
func TestRetryAttemptAndPreviousState(t *testing.T) {
	s := mirroringAt(t, 5, 3)
	msg := "source unreachable"
	fail := func(attempt int16, se int32) Result[WriteResponse] {
		return s.WriteMirrorStates(WriteRequest{MirrorName: "m", Partitions: []WritePartition{{
			TopicID: topicFoo, Partition: 0, State: statemachine.Failed, LeaderEpoch: 5, StateEpoch: se,
			LastMirrorEpoch: -1, LastMirrorOffset: -1, ErrorMessage: &msg, RetryAttempt: attempt}}})
	}
	w := fail(2, 3)
	require.Equal(t, admin.CodeNone, w.Response.Partitions[0].ErrorCode)
	apply(t, s, w.Records)
	got := read1(s, -1).Response.Partitions[0]
	require.Equal(t, int16(2), got.RetryAttempt)
	require.Equal(t, statemachine.Mirroring, got.PreviousState)
	w = fail(records.NonRetryable, 4) // FAILED again: PreviousState kept
	apply(t, s, w.Records)
	got = read1(s, -1).Response.Partitions[0]
	require.Equal(t, records.NonRetryable, got.RetryAttempt)
	require.Equal(t, statemachine.Mirroring, got.PreviousState)

	fresh := NewShard()
	apply(t, fresh, w.Records)
	require.Equal(t, s.Dump(), fresh.Dump())
	require.Contains(t, fresh.Dump(), "retry=-1 prev=MIRRORING")
	key, value := records.EncodeStateRecord(w.Records[0])
	dec, err := records.DecodeStateRecord(key, value)
	require.NoError(t, err)
	require.Equal(t, records.NonRetryable, dec.PartitionState.RetryAttempt)
	require.Equal(t, int8(statemachine.Mirroring), dec.PartitionState.PreviousState)

	w = write1(s, statemachine.Stopping, 5, 5) // leaving FAILED clears PreviousState
	require.Equal(t, admin.CodeNone, w.Response.Partitions[0].ErrorCode)
	apply(t, s, w.Records)
	got = read1(s, -1).Response.Partitions[0]
	require.Equal(t, int16(0), got.RetryAttempt)
	require.Equal(t, statemachine.Unknown, got.PreviousState)
}
