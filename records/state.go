package records

import "fmt"

// Record types of the __mirror_state topic (the int16 that starts every
// key). The values follow the prototype (spec §9.4 [P]); the KIP's final
// numbers are an open question, so they live only here.
const (
	StateTypeLastMirrorEpochs     int16 = 1
	StateTypeMirrorPartitionState int16 = 2
)

var (
	defLastMirrorEpochs = recordDef{name: "LastMirrorEpochs", typ: StateTypeLastMirrorEpochs, valueVersion: 0}
	// Value version 1 adds RetryAttempt and PreviousState; version 0 values still
	// decode, with RetryAttempt 0 and PreviousState -1 (UNKNOWN).
	defMirrorPartitionState = recordDef{name: "MirrorPartitionState", typ: StateTypeMirrorPartitionState, valueVersion: 1}
)

// MirrorPartitionStateKey is the key of a MirrorPartitionState record.
type MirrorPartitionStateKey struct {
	MirrorName string
	TopicID    UUID
	Partition  int32
}

func (k *MirrorPartitionStateKey) fields() []field {
	return []field{
		{"MirrorName", 0, &k.MirrorName},
		{"TopicId", 0, &k.TopicID},
		{"Partition", 0, &k.Partition},
	}
}

// MirrorPartitionStateValue is the actual state of one mirror partition.
type MirrorPartitionStateValue struct {
	// State is the statemachine.State code (int8).
	State int8
	// LeaderEpoch is the highest leader epoch seen (fencing), -1 if none.
	LeaderEpoch int32
	// StateEpoch increases by one on every accepted state write.
	StateEpoch int32
	// ErrorMessage is the failure reason when FAILED; nil otherwise.
	ErrorMessage *string
	// RetryAttempt counts the automatic retries of a FAILED partition since it
	// last mirrored; -1 marks a failure that is not retried (value version 1+).
	RetryAttempt int16
	// PreviousState is the state code before FAILED, -1 (UNKNOWN) when none
	// (value version 1+).
	PreviousState int8
}

// NonRetryable is the RetryAttempt of a failure that is never retried automatically.
const NonRetryable int16 = -1

func (v *MirrorPartitionStateValue) fields() []field {
	return []field{
		{"State", 0, &v.State},
		{"LeaderEpoch", 0, &v.LeaderEpoch},
		{"StateEpoch", 0, &v.StateEpoch},
		{"ErrorMessage", 0, &v.ErrorMessage},
		{"RetryAttempt", 1, &v.RetryAttempt},
		{"PreviousState", 1, &v.PreviousState},
	}
}

// LastMirrorEpochsKey is the key of a LastMirrorEpochs record.
type LastMirrorEpochsKey struct {
	MirrorName string
	TopicID    UUID
	Partition  int32
}

func (k *LastMirrorEpochsKey) fields() []field {
	return []field{
		{"MirrorName", 0, &k.MirrorName},
		{"TopicId", 0, &k.TopicID},
		{"Partition", 0, &k.Partition},
	}
}

// LastMirrorEpochsValue is the LME of one mirror partition, written at
// STOPPING and read during failback.
type LastMirrorEpochsValue struct {
	// LastMirrorEpoch is the latest local leader epoch at stop, -1 if none.
	LastMirrorEpoch int32
	// LastMirrorOffset is the log end offset at stop, -1 if unknown.
	LastMirrorOffset int64
}

func (v *LastMirrorEpochsValue) fields() []field {
	return []field{
		{"LastMirrorEpoch", 0, &v.LastMirrorEpoch},
		{"LastMirrorOffset", 0, &v.LastMirrorOffset},
	}
}

// StateRecord is one record of the __mirror_state topic. Exactly one key is
// set; the value of the same kind may be nil, which is a tombstone.
type StateRecord struct {
	PartitionStateKey *MirrorPartitionStateKey
	PartitionState    *MirrorPartitionStateValue

	LastMirrorEpochsKey *LastMirrorEpochsKey
	LastMirrorEpochs    *LastMirrorEpochsValue
}

// IsTombstone reports whether r deletes its key.
func (r StateRecord) IsTombstone() bool { return r.PartitionState == nil && r.LastMirrorEpochs == nil }

// Validate reports whether r can be encoded: exactly one key set, no value
// of the other kind, key strings of at most 32767 bytes.
func (r StateRecord) Validate() error {
	_, _, err := r.encode()
	return err
}

// EncodeStateRecord encodes r as a __mirror_state key and value (value nil
// for a tombstone). Key: int16 record type, then the key fields at version
// 0 (non-flexible). Value: int16 version, then the value fields (flexible:
// compact strings, tagged fields). It returns nil, nil when r is invalid
// (see Validate).
func EncodeStateRecord(r StateRecord) (key, value []byte) {
	key, value, err := r.encode()
	if err != nil {
		return nil, nil
	}
	return key, value
}

func (r StateRecord) encode() (key, value []byte, err error) {
	switch {
	case r.PartitionStateKey != nil && r.LastMirrorEpochsKey == nil && r.LastMirrorEpochs == nil:
		var vf []field
		if r.PartitionState != nil {
			vf = r.PartitionState.fields()
		}
		return encodeKV(defMirrorPartitionState, r.PartitionStateKey.fields(), vf)
	case r.LastMirrorEpochsKey != nil && r.PartitionStateKey == nil && r.PartitionState == nil:
		var vf []field
		if r.LastMirrorEpochs != nil {
			vf = r.LastMirrorEpochs.fields()
		}
		return encodeKV(defLastMirrorEpochs, r.LastMirrorEpochsKey.fields(), vf)
	}
	return nil, nil, fmt.Errorf("%w: state record must set exactly one key and only its own value", ErrBadRecord)
}

// DecodeStateRecord decodes a __mirror_state key and value (nil value = a
// tombstone). Unknown record types and value versions return an error
// matching ErrUnknownRecord; malformed bytes one matching ErrBadRecord.
func DecodeStateRecord(key, value []byte) (StateRecord, error) {
	var out StateRecord
	typ, r, err := readType(key)
	if err != nil {
		return out, err
	}
	switch typ {
	case StateTypeMirrorPartitionState:
		k := new(MirrorPartitionStateKey)
		if err := decodeKey(defMirrorPartitionState, r, k.fields()); err != nil {
			return StateRecord{}, err
		}
		out.PartitionStateKey = k
		if value != nil {
			v := &MirrorPartitionStateValue{PreviousState: -1} // the version 0 default
			if err := decodeValue(defMirrorPartitionState, value, v.fields()); err != nil {
				return StateRecord{}, err
			}
			out.PartitionState = v
		}
	case StateTypeLastMirrorEpochs:
		k := new(LastMirrorEpochsKey)
		if err := decodeKey(defLastMirrorEpochs, r, k.fields()); err != nil {
			return StateRecord{}, err
		}
		out.LastMirrorEpochsKey = k
		if value != nil {
			v := new(LastMirrorEpochsValue)
			if err := decodeValue(defLastMirrorEpochs, value, v.fields()); err != nil {
				return StateRecord{}, err
			}
			out.LastMirrorEpochs = v
		}
	default:
		return StateRecord{}, recordErr(ErrUnknownRecord, "key", typ, "unknown __mirror_state record type")
	}
	return out, nil
}
