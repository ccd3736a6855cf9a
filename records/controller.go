package records

import "fmt"

// Record types of the controller store (desired state and mirror
// definitions), framed like the __mirror_state records. 29 is the api key
// the prototype gives MirrorTopicStateChangeRecord in the KRaft metadata
// log; Kafka keeps mirror definitions as ConfigRecords of resource type
// CLUSTER_MIRROR, which has no single record, so 30 is kmirror's own choice
// for ClusterMirrorRecord.
const (
	ControllerTypeMirrorTopicState int16 = 29
	ControllerTypeClusterMirror    int16 = 30
)

var (
	// Value version 1 adds Approvals; a record without approvals is still written at
	// version 0 (a reader of version 0 reads it), and version 0 values decode with none.
	defMirrorTopicState = recordDef{name: "MirrorTopicStateChangeRecord", typ: ControllerTypeMirrorTopicState, valueVersion: 1}
	defClusterMirror    = recordDef{name: "ClusterMirrorRecord", typ: ControllerTypeClusterMirror, valueVersion: 0}
)

// MirrorTopicStateChangeRecord associates a topic with a mirror and its
// desired state. The key is the TopicID (one live record per topic); a
// topic is dissociated by writing MirrorName "" and DesiredState -1.
type MirrorTopicStateChangeRecord struct {
	TopicID      UUID
	TopicName    string
	MirrorName   string
	DesiredState int8
	// Approvals are the removals of records written on this site that the operator
	// allowed the start (or recover) that wrote this record to make, one per
	// partition (value version 1+).
	Approvals []RemovalApproval
}

// RemovalApproval allows PREPARING of one partition to remove records written on
// this site within the offsets [RemovedFrom, RemovedTo): the plan's removed range.
type RemovalApproval struct {
	Partition   int32
	RemovedFrom int64
	RemovedTo   int64
}

func (r *MirrorTopicStateChangeRecord) keyFields() []field {
	return []field{{"TopicId", 0, &r.TopicID}}
}

func (r *MirrorTopicStateChangeRecord) valueFields() []field {
	return []field{
		{"TopicName", 0, &r.TopicName},
		{"MirrorName", 0, &r.MirrorName},
		{"DesiredState", 0, &r.DesiredState},
		{"Approvals", 1, &r.Approvals},
	}
}

// valueVersion is the oldest value version that holds r: 0 without approvals.
func (r *MirrorTopicStateChangeRecord) valueVersion() int16 {
	if len(r.Approvals) > 0 {
		return 1
	}
	return 0
}

// ConfigEntry is one mirror-level config; Value nil means "unset".
type ConfigEntry struct {
	Name  string
	Value *string
}

// ClusterMirrorRecord is the definition of one cluster mirror (the
// CLUSTER_MIRROR resource and its configs). The key is the MirrorName;
// Configs keep the caller's order.
type ClusterMirrorRecord struct {
	MirrorName string
	Configs    []ConfigEntry
}

func (r *ClusterMirrorRecord) keyFields() []field {
	return []field{{"MirrorName", 0, &r.MirrorName}}
}

func (r *ClusterMirrorRecord) valueFields() []field {
	return []field{{"Configs", 0, &r.Configs}}
}

// ControllerRecord is one record of the controller store: exactly one of
// TopicState, Mirror, or MirrorTombstone (the name of a deleted mirror,
// encoded as the mirror's key with a nil value).
type ControllerRecord struct {
	TopicState      *MirrorTopicStateChangeRecord
	Mirror          *ClusterMirrorRecord
	MirrorTombstone string
}

// Validate reports whether r can be encoded.
func (r ControllerRecord) Validate() error {
	_, _, err := r.encode()
	return err
}

// EncodeControllerRecord encodes r (key: int16 type + key fields,
// non-flexible; value: int16 version + flexible fields, nil for the mirror
// tombstone). It returns nil, nil when r is invalid (see Validate).
func EncodeControllerRecord(r ControllerRecord) (key, value []byte) {
	key, value, err := r.encode()
	if err != nil {
		return nil, nil
	}
	return key, value
}

func (r ControllerRecord) encode() (key, value []byte, err error) {
	switch {
	case r.TopicState != nil && r.Mirror == nil && r.MirrorTombstone == "":
		return encodeKVAt(defMirrorTopicState, r.TopicState.valueVersion(), r.TopicState.keyFields(), r.TopicState.valueFields())
	case r.Mirror != nil && r.TopicState == nil && r.MirrorTombstone == "":
		return encodeKV(defClusterMirror, r.Mirror.keyFields(), r.Mirror.valueFields())
	case r.MirrorTombstone != "" && r.TopicState == nil && r.Mirror == nil:
		m := ClusterMirrorRecord{MirrorName: r.MirrorTombstone}
		return encodeKV(defClusterMirror, m.keyFields(), nil)
	}
	return nil, nil, fmt.Errorf("%w: controller record must set exactly one of TopicState, Mirror, MirrorTombstone", ErrBadRecord)
}

// DecodeControllerRecord decodes a controller store key and value. A nil
// value is a tombstone, defined only for mirror records (an empty mirror
// name in a tombstone is refused). Unknown types and versions match
// ErrUnknownRecord; malformed bytes match ErrBadRecord.
func DecodeControllerRecord(key, value []byte) (ControllerRecord, error) {
	typ, r, err := readType(key)
	if err != nil {
		return ControllerRecord{}, err
	}
	switch typ {
	case ControllerTypeMirrorTopicState:
		ts := new(MirrorTopicStateChangeRecord)
		if err := decodeKey(defMirrorTopicState, r, ts.keyFields()); err != nil {
			return ControllerRecord{}, err
		}
		if value == nil {
			return ControllerRecord{}, recordErr(ErrBadRecord, "value", typ, "MirrorTopicStateChangeRecord has no tombstone form")
		}
		if err := decodeValue(defMirrorTopicState, value, ts.valueFields()); err != nil {
			return ControllerRecord{}, err
		}
		return ControllerRecord{TopicState: ts}, nil
	case ControllerTypeClusterMirror:
		m := new(ClusterMirrorRecord)
		if err := decodeKey(defClusterMirror, r, m.keyFields()); err != nil {
			return ControllerRecord{}, err
		}
		if value == nil {
			if m.MirrorName == "" {
				return ControllerRecord{}, recordErr(ErrBadRecord, "key", typ, "tombstone of a mirror with an empty name")
			}
			return ControllerRecord{MirrorTombstone: m.MirrorName}, nil
		}
		if err := decodeValue(defClusterMirror, value, m.valueFields()); err != nil {
			return ControllerRecord{}, err
		}
		return ControllerRecord{Mirror: m}, nil
	}
	return ControllerRecord{}, recordErr(ErrUnknownRecord, "key", typ, "unknown controller record type")
}
