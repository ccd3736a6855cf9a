package records

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestControllerRecordGolden(t *testing.T) {
	key, value := EncodeControllerRecord(ControllerRecord{TopicState: &MirrorTopicStateChangeRecord{
		TopicID: testTopicID, TopicName: "orders", MirrorName: "m1", DesiredState: 3,
	}})
	require.Equal(t, "001d"+"3f1e2d4c5b6a798897a6b5c4d3e2f100", hex.EncodeToString(key))
	require.Equal(t, "0000"+"076f7264657273"+"036d31"+"03"+"00", hex.EncodeToString(value))

	key, value = EncodeControllerRecord(ControllerRecord{Mirror: &ClusterMirrorRecord{
		MirrorName: "m1",
		Configs:    []ConfigEntry{{Name: "a", Value: strp("1")}, {Name: "b"}},
	}})
	require.Equal(t, "001e"+"00026d31", hex.EncodeToString(key))
	require.Equal(t, "0000"+"03"+"0261"+"0231"+"00"+"0262"+"00"+"00"+"00", hex.EncodeToString(value))

	key, value = EncodeControllerRecord(ControllerRecord{MirrorTombstone: "m1"})
	require.Equal(t, "001e00026d31", hex.EncodeToString(key))
	require.Nil(t, value)
}

func TestControllerRecordRoundTrip(t *testing.T) {
	for _, r := range []ControllerRecord{
		{TopicState: &MirrorTopicStateChangeRecord{TopicID: testTopicID, TopicName: "t", MirrorName: "m", DesiredState: 7}},
		{TopicState: &MirrorTopicStateChangeRecord{TopicName: "dissociated", DesiredState: -1}},
		{Mirror: &ClusterMirrorRecord{MirrorName: "m"}},
		{Mirror: &ClusterMirrorRecord{MirrorName: "m", Configs: []ConfigEntry{
			{Name: "bootstrap.servers", Value: strp("a:9092,b:9092")},
			{Name: "unset"},
			{Name: "empty", Value: strp("")},
		}}},
		{MirrorTombstone: "gone"},
	} {
		require.NoError(t, r.Validate())
		key, value := EncodeControllerRecord(r)
		got, err := DecodeControllerRecord(key, value)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
}

func TestControllerRecordErrors(t *testing.T) {
	for _, r := range []ControllerRecord{
		{},
		{TopicState: &MirrorTopicStateChangeRecord{}, MirrorTombstone: "x"},
		{Mirror: &ClusterMirrorRecord{}, TopicState: &MirrorTopicStateChangeRecord{}},
		{Mirror: &ClusterMirrorRecord{MirrorName: string(make([]byte, 1<<15))}},
	} {
		require.ErrorIs(t, r.Validate(), ErrBadRecord)
		k, v := EncodeControllerRecord(r)
		require.Nil(t, k)
		require.Nil(t, v)
	}
	key, value := EncodeControllerRecord(ControllerRecord{TopicState: &MirrorTopicStateChangeRecord{TopicName: "t"}})
	_, err := DecodeControllerRecord(key, nil)
	require.ErrorIs(t, err, ErrBadRecord, "topic state has no tombstone")
	_, err = DecodeControllerRecord([]byte{0, 2, 0, 0}, value)
	require.ErrorIs(t, err, ErrUnknownRecord, "a state-store type is not a controller type")
	_, err = DecodeControllerRecord(key, append([]byte{0, 5}, value[2:]...))
	require.ErrorIs(t, err, ErrUnknownRecord)
	_, err = DecodeControllerRecord([]byte{0, 30, 0, 0}, nil)
	require.ErrorIs(t, err, ErrBadRecord, "tombstone of empty mirror name")

	mk, mv := EncodeControllerRecord(ControllerRecord{Mirror: &ClusterMirrorRecord{MirrorName: "m", Configs: []ConfigEntry{{Name: "a"}}}})
	for i := range len(mv) {
		_, err = DecodeControllerRecord(mk, mv[:i])
		require.ErrorIs(t, err, ErrBadRecord, "cut at %d", i)
	}
	// An array length the bytes cannot hold fails before allocating.
	_, err = DecodeControllerRecord(mk, []byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x07, 0})
	require.ErrorIs(t, err, ErrBadRecord)
}

// TestControllerRecordApprovals: a topic record with approvals is written at value
// version 1 and reads back whole; one without is still version 0 (what a reader of
// version 0 reads), and a truncated approval list is refused.
func TestControllerRecordApprovals(t *testing.T) {
	r := ControllerRecord{TopicState: &MirrorTopicStateChangeRecord{TopicID: testTopicID, TopicName: "orders", MirrorName: "m1", DesiredState: 2,
		Approvals: []RemovalApproval{{Partition: 1, RemovedFrom: 10, RemovedTo: 40}}}}
	key, value := EncodeControllerRecord(r)
	require.Equal(t, "0001"+"076f7264657273"+"036d31"+"02"+"02"+"00000001"+"000000000000000a"+"0000000000000028"+"00"+"00", hex.EncodeToString(value))
	got, err := DecodeControllerRecord(key, value)
	require.NoError(t, err)
	require.Equal(t, r, got)

	_, v0 := EncodeControllerRecord(ControllerRecord{TopicState: &MirrorTopicStateChangeRecord{TopicID: testTopicID, TopicName: "orders", MirrorName: "m1", DesiredState: 2}})
	require.Equal(t, "0000", hex.EncodeToString(v0[:2]), "no approvals: version 0")

	_, err = DecodeControllerRecord(key, value[:len(value)-10])
	require.ErrorIs(t, err, ErrBadRecord)
	bad := append([]byte(nil), value...)
	bad[0], bad[1] = 0, 2
	_, err = DecodeControllerRecord(key, bad)
	require.ErrorIs(t, err, ErrUnknownRecord, "a newer version than this code reads")
}
