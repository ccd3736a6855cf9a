package consumergroup

// Kafka's error codes a Group answers.
const (
	CodeNone                     int16 = 0
	CodeUnsupportedVersion       int16 = 35
	CodeUnknownMemberID          int16 = 25
	CodeInvalidRequest           int16 = 42
	CodeGroupMaxSizeReached      int16 = 81
	CodeFencedInstanceID         int16 = 82
	CodeFencedMemberEpoch        int16 = 110
	CodeUnreleasedInstanceID     int16 = 111
	CodeUnsupportedAssignor      int16 = 112
	CodeStaleMemberEpoch         int16 = 113
	CodeInvalidRegularExpression int16 = 128
)

// Member epochs with a meaning of their own.
const (
	// EpochJoin is the epoch of a member joining (or rejoining) the group.
	EpochJoin int32 = 0
	// EpochLeave is the epoch of a member leaving the group.
	EpochLeave int32 = -1
	// EpochLeaveStatic is the epoch of a static member leaving temporarily: it
	// keeps its assignment until its session expires or its instance id rejoins.
	EpochLeaveStatic int32 = -2
)

// Assignor names.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// Group states, as Kafka names them (ListGroups, ConsumerGroupDescribe).
const (
	StateEmpty       = "Empty"
	StateAssigning   = "Assigning"
	StateReconciling = "Reconciling"
	StateStable      = "Stable"
)
