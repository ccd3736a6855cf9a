package records

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type in a control record key.
type ControlType int16

// Control record types. Kafka defines 0-6 (2-6 are KRaft types that never
// appear in data partitions); KIP-1279 adds MIRROR_PID_RESET as 7.
const (
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlMirrorPIDReset ControlType = 7
)

// String returns Kafka's name of the type.
func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	case 2:
		return "LEADER_CHANGE"
	case 3:
		return "SNAPSHOT_HEADER"
	case 4:
		return "SNAPSHOT_FOOTER"
	case 5:
		return "KRAFT_VERSION"
	case 6:
		return "KRAFT_VOTERS"
	case ControlMirrorPIDReset:
		return "MIRROR_PID_RESET"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(t))
}

// ControlBatchSpec describes a control batch for BuildControlBatch.
type ControlBatchSpec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	// ProducerID and ProducerEpoch are the transaction's producer for ABORT
	// and COMMIT; they are ignored for MIRROR_PID_RESET (written as -1).
	ProducerID    int64
	ProducerEpoch int16
	// Timestamp is both the batch base/max timestamp and the record's
	// (delta 0), as Kafka writes markers.
	Timestamp int64
	Type      ControlType
	// CoordinatorEpoch is the transaction coordinator epoch written in the
	// value of ABORT and COMMIT; unused for other types.
	CoordinatorEpoch int32
}

// controlKeyVersion and the value versions Kafka writes.
const (
	controlKeyVersion     int16 = 0
	endTxnMarkerVersion   int16 = 0
	mirrorPIDResetVersion int16 = 0
	controlKeySize              = 4
	endTxnMarkerValueSize       = 6
)

// BuildControlBatch returns an uncompressed control batch holding one
// control record, byte-identical to what Kafka writes for the same inputs:
//
//   - ABORT / COMMIT (Kafka's MemoryRecords.withEndTransactionMarker):
//     attributes control|transactional, the given producer id and epoch,
//     base sequence -1, key {version 0, type}, value {version 0,
//     coordinatorEpoch}.
//   - MIRROR_PID_RESET (and any other type): written like Kafka's KRaft
//     control batches: attributes control only (not transactional),
//     producer id -1, epoch -1, sequence -1, key {version 0, type 7}, value
//     {version int16 0}. The barrier belongs to no producer, so it must not
//     carry one; a transactional bit would make it an end-transaction marker
//     to every reader.
//
// The record has attributes 0, timestamp delta 0, offset delta 0, no
// headers; base and max timestamp are s.Timestamp.
func BuildControlBatch(s ControlBatchSpec) []byte {
	key := make([]byte, 0, controlKeySize)
	key = binary.BigEndian.AppendUint16(key, uint16(controlKeyVersion))
	key = binary.BigEndian.AppendUint16(key, uint16(s.Type))

	spec := BatchSpec{
		BaseOffset:           s.BaseOffset,
		PartitionLeaderEpoch: s.PartitionLeaderEpoch,
		Control:              true,
		BaseSequence:         -1,
		BaseTimestamp:        s.Timestamp,
	}
	var value []byte
	if s.Type == ControlAbort || s.Type == ControlCommit {
		spec.Transactional = true
		spec.ProducerID, spec.ProducerEpoch = s.ProducerID, s.ProducerEpoch
		value = make([]byte, 0, endTxnMarkerValueSize)
		value = binary.BigEndian.AppendUint16(value, uint16(endTxnMarkerVersion))
		value = binary.BigEndian.AppendUint32(value, uint32(s.CoordinatorEpoch))
	} else {
		spec.ProducerID, spec.ProducerEpoch = -1, -1
		// MirrorPidResetRecord is a flexible ("0+") data message with one int16 field,
		// written without a version prefix as Kafka writes its KRaft control messages:
		// the field, then an empty tagged-field section (uvarint 0).
		value = binary.BigEndian.AppendUint16(nil, uint16(mirrorPIDResetVersion))
		value = append(value, 0)
	}
	attrs := AttrControl
	if spec.Transactional {
		attrs |= AttrTransactional
	}
	raw := appendRecord(nil, &Record{Key: key, Value: value})
	return buildBatch(spec, attrs, 0, s.Timestamp, 1, raw)
}

// ControlType returns the type of the first record of a control batch, as
// Kafka reads it: the key must hold at least 4 bytes with a non-negative
// version; newer key versions are read as version 0. Types Kafka does not
// know are returned as they are. Errors match ErrCorrupt.
func (b Batch) ControlType() (ControlType, error) {
	t, _, err := b.controlRecord()
	return t, err
}

func (b Batch) controlRecord() (ControlType, Record, error) {
	base := b.BaseOffset()
	if !b.Attributes().IsControl() {
		return 0, Record{}, corruptf(0, base, nil, "not a control batch (attributes %#04x)", uint16(b.Attributes()))
	}
	recs, err := b.Records()
	if err != nil {
		return 0, Record{}, err
	}
	if len(recs) == 0 {
		return 0, Record{}, corruptf(0, base, nil, "control batch holds no record")
	}
	key := recs[0].Key
	if len(key) < controlKeySize {
		return 0, Record{}, corruptf(HeaderSize, base, nil, "control record key has %d bytes, want at least %d", len(key), controlKeySize)
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return 0, Record{}, corruptf(HeaderSize, base, nil, "control record key version %d", v)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), recs[0], nil
}

// EndTxnMarker returns the type and coordinator epoch of an ABORT or COMMIT
// control batch, read as Kafka's EndTransactionMarker does (value of at
// least 6 bytes, non-negative version). Errors match ErrCorrupt.
func (b Batch) EndTxnMarker() (ControlType, int32, error) {
	t, rec, err := b.controlRecord()
	if err != nil {
		return 0, 0, err
	}
	base := b.BaseOffset()
	if t != ControlAbort && t != ControlCommit {
		return t, 0, corruptf(0, base, nil, "control type %v is not an end-transaction marker", t)
	}
	v := rec.Value
	if len(v) < endTxnMarkerValueSize {
		return t, 0, corruptf(HeaderSize, base, nil, "end-transaction marker value has %d bytes, want %d", len(v), endTxnMarkerValueSize)
	}
	if ver := int16(binary.BigEndian.Uint16(v)); ver < 0 {
		return t, 0, corruptf(HeaderSize, base, nil, "end-transaction marker version %d", ver)
	}
	return t, int32(binary.BigEndian.Uint32(v[2:])), nil
}
