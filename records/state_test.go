package records

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

var testTopicID = UUID{0x3f, 0x1e, 0x2d, 0x4c, 0x5b, 0x6a, 0x79, 0x88, 0x97, 0xa6, 0xb5, 0xc4, 0xd3, 0xe2, 0xf1, 0x00}

func strp(s string) *string { return &s }

func TestStateRecordGolden(t *testing.T) {
	key, value := EncodeStateRecord(StateRecord{
		PartitionStateKey: &MirrorPartitionStateKey{MirrorName: "m1", TopicID: testTopicID, Partition: 3},
		PartitionState:    &MirrorPartitionStateValue{State: 3, LeaderEpoch: 5, StateEpoch: 9, ErrorMessage: strp("x"), RetryAttempt: 2, PreviousState: 3},
	})
	require.Equal(t,
		"0002"+ // record type MirrorPartitionState
			"0002"+"6d31"+ // MirrorName "m1" (int16 length)
			"3f1e2d4c5b6a798897a6b5c4d3e2f100"+ // TopicId
			"00000003", // Partition
		hex.EncodeToString(key))
	require.Equal(t,
		"0001"+ // value version 1
			"03"+ // State
			"00000005"+ // LeaderEpoch
			"00000009"+ // StateEpoch
			"0278"+ // ErrorMessage "x" (compact nullable: len+1)
			"0002"+ // RetryAttempt (version 1+)
			"03"+ // PreviousState (version 1+)
			"00", // no tagged fields
		hex.EncodeToString(value))

	// A version 0 value (written before RetryAttempt and PreviousState) still decodes,
	// with RetryAttempt 0 and PreviousState UNKNOWN.
	v0, err := hex.DecodeString("0000" + "03" + "00000005" + "00000009" + "0278" + "00")
	require.NoError(t, err)
	old, err := DecodeStateRecord(key, v0)
	require.NoError(t, err)
	require.Equal(t, &MirrorPartitionStateValue{State: 3, LeaderEpoch: 5, StateEpoch: 9, ErrorMessage: strp("x"), RetryAttempt: 0, PreviousState: -1}, old.PartitionState)
	v1, err := DecodeStateRecord(key, value)
	require.NoError(t, err)
	require.Equal(t, int16(2), v1.PartitionState.RetryAttempt)
	require.Equal(t, int8(3), v1.PartitionState.PreviousState)

	_, value = EncodeStateRecord(StateRecord{
		PartitionStateKey: &MirrorPartitionStateKey{MirrorName: "m1", TopicID: testTopicID, Partition: 3},
		PartitionState:    &MirrorPartitionStateValue{State: 8, LeaderEpoch: -1, RetryAttempt: NonRetryable, PreviousState: -1},
	})
	require.Equal(t, "0001"+"08"+"ffffffff"+"00000000"+"00"+"ffff"+"ff"+"00", hex.EncodeToString(value), "null ErrorMessage is 0")

	key, value = EncodeStateRecord(StateRecord{
		LastMirrorEpochsKey: &LastMirrorEpochsKey{MirrorName: "m1", TopicID: testTopicID, Partition: 3},
		LastMirrorEpochs:    &LastMirrorEpochsValue{LastMirrorEpoch: 12, LastMirrorOffset: 1000},
	})
	require.Equal(t, "0001"+"00026d31"+"3f1e2d4c5b6a798897a6b5c4d3e2f100"+"00000003", hex.EncodeToString(key))
	require.Equal(t, "0000"+"0000000c"+"00000000000003e8"+"00", hex.EncodeToString(value))
}

func stateRecordCases() []StateRecord {
	k := MirrorPartitionStateKey{MirrorName: "mirror-a", TopicID: testTopicID, Partition: 7}
	lk := LastMirrorEpochsKey{MirrorName: "mirror-a", TopicID: testTopicID, Partition: 7}
	return []StateRecord{
		{PartitionStateKey: &k, PartitionState: &MirrorPartitionStateValue{State: 8, LeaderEpoch: 4, StateEpoch: 2, ErrorMessage: strp("disk on fire")}},
		{PartitionStateKey: &k, PartitionState: &MirrorPartitionStateValue{State: 3, LeaderEpoch: -1, StateEpoch: 0, ErrorMessage: strp("")}},
		{PartitionStateKey: &k, PartitionState: &MirrorPartitionStateValue{State: -1, LeaderEpoch: 1 << 30}},
		{PartitionStateKey: &k},
		{LastMirrorEpochsKey: &lk, LastMirrorEpochs: &LastMirrorEpochsValue{LastMirrorEpoch: -1, LastMirrorOffset: -1}},
		{LastMirrorEpochsKey: &lk},
		{LastMirrorEpochsKey: &LastMirrorEpochsKey{MirrorName: "ünïcode ✓"}, LastMirrorEpochs: &LastMirrorEpochsValue{LastMirrorEpoch: 3, LastMirrorOffset: 1 << 50}},
	}
}

func TestStateRecordRoundTrip(t *testing.T) {
	for _, r := range stateRecordCases() {
		require.NoError(t, r.Validate())
		key, value := EncodeStateRecord(r)
		require.NotNil(t, key)
		require.Equal(t, r.IsTombstone(), value == nil)
		got, err := DecodeStateRecord(key, value)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
}

func TestStateRecordInvalid(t *testing.T) {
	k := &MirrorPartitionStateKey{MirrorName: "m"}
	lk := &LastMirrorEpochsKey{MirrorName: "m"}
	for _, r := range []StateRecord{
		{},
		{PartitionStateKey: k, LastMirrorEpochsKey: lk},
		{PartitionStateKey: k, LastMirrorEpochs: &LastMirrorEpochsValue{}},
		{LastMirrorEpochsKey: lk, PartitionState: &MirrorPartitionStateValue{}},
		{PartitionState: &MirrorPartitionStateValue{}},
		{LastMirrorEpochsKey: &LastMirrorEpochsKey{MirrorName: string(make([]byte, 40000))}},
	} {
		require.ErrorIs(t, r.Validate(), ErrBadRecord)
		key, value := EncodeStateRecord(r)
		require.Nil(t, key)
		require.Nil(t, value)
	}
}

func TestDecodeStateRecordErrors(t *testing.T) {
	r := stateRecordCases()[0]
	key, value := EncodeStateRecord(r)

	_, err := DecodeStateRecord([]byte{0}, value)
	require.ErrorIs(t, err, ErrBadRecord)

	_, err = DecodeStateRecord(append([]byte{0, 9}, key[2:]...), value)
	require.ErrorIs(t, err, ErrUnknownRecord)
	var re *RecordError
	require.ErrorAs(t, err, &re)
	require.Equal(t, int16(9), re.Type)

	_, err = DecodeStateRecord(key, append([]byte{0, 2}, value[2:]...))
	require.ErrorIs(t, err, ErrUnknownRecord, "value version 2 is not known yet")
	_, err = DecodeStateRecord(key, append([]byte{0xff, 0xff}, value[2:]...))
	require.ErrorIs(t, err, ErrUnknownRecord)

	for i := range len(key) - 1 {
		_, err = DecodeStateRecord(key[:i], value)
		require.Error(t, err, "key cut at %d", i)
	}
	for i := range len(value) {
		_, err = DecodeStateRecord(key, value[:i])
		require.ErrorIs(t, err, ErrBadRecord, "value cut at %d", i)
	}
	_, err = DecodeStateRecord(append(key, 0), value)
	require.ErrorIs(t, err, ErrBadRecord, "trailing key byte")
	_, err = DecodeStateRecord(key, append(value, 0))
	require.ErrorIs(t, err, ErrBadRecord, "trailing value byte")

	// Unknown tagged fields are skipped (forward compatibility).
	tagged := append(value[:len(value)-1:len(value)-1], 2, 5, 1, 0xaa, 9, 2, 0xbb, 0xcc)
	got, err := DecodeStateRecord(key, tagged)
	require.NoError(t, err)
	require.Equal(t, r, got)

	// An empty (non-nil) value is not a tombstone and is too short.
	_, err = DecodeStateRecord(key, []byte{})
	require.ErrorIs(t, err, ErrBadRecord)
}
