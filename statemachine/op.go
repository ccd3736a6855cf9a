package statemachine

import (
	"fmt"
	"strings"
)

// Op is an admin lifecycle operation on mirror topics.
type Op int8

// The operations.
const (
	OpStart Op = iota
	OpStop
	OpPause
	OpResume
	OpDelete
	numOps
)

var opNames = [numOps]string{"start", "stop", "pause", "resume", "delete"}

// Ops returns every operation in declaration order.
func Ops() []Op { return []Op{OpStart, OpStop, OpPause, OpResume, OpDelete} }

// String returns the operation's lower-case name ("start", "stop", ...).
func (o Op) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int8(o))
}

// ParseOp parses an operation name (ASCII case-insensitive).
func ParseOp(s string) (Op, error) {
	name := strings.TrimSpace(s)
	for i, n := range opNames {
		if asciiUpper(n) == asciiUpper(name) {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("statemachine: unknown op %q", s)
}

// opUse says what an operation does in a state.
type opUse int8

const (
	opRefused opUse = iota // INVALID_CLUSTER_MIRROR_STATES
	opAllowed              // the operation proceeds
	opNoOp                 // accepted; nothing to do
)

// opTable is the one table of which actual partition states allow which
// operation (spec §11.5-11.7, §14.3-14.6; open question A4: stop is allowed
// from FAILED; §5.4 row 11: stop is allowed from every transient state that
// can move to STOPPING).
var opTable = [numOps]map[State]opUse{
	OpStart: {Unknown: opAllowed, Stopped: opAllowed, Mirroring: opNoOp},
	OpStop: {Mirroring: opAllowed, Paused: opAllowed, Failed: opAllowed, Preparing: opAllowed,
		EpochFencing: opAllowed, ULELogTruncation: opAllowed, Pausing: opAllowed},
	OpPause:  {Mirroring: opAllowed},
	OpResume: {Paused: opAllowed},
	OpDelete: {Stopped: opAllowed},
}

func opUseOf(op Op, s State) opUse {
	if op < 0 || op >= numOps || !s.Valid() {
		return opRefused
	}
	return opTable[op][s] // missing = opRefused
}

// CheckOp reports whether operation op may be applied to partition
// (topic, partition) whose actual state is s. It returns nil or an
// *InvalidStatesError (errors.Is ErrInvalidStates) naming the partition and
// its state, e.g.
// `statemachine: cannot pause topic "orders" partition 3 in state PAUSED`.
//
//	start   UNKNOWN, STOPPED; MIRRORING is accepted as a no-op (see IsNoOp)
//	stop    MIRRORING, PAUSED, FAILED, PREPARING, EPOCH_FENCING, ULE_LOG_TRUNCATION, PAUSING
//	pause   MIRRORING
//	resume  PAUSED
//	delete  STOPPED
func CheckOp(op Op, topic string, partition int32, s State) error {
	if opUseOf(op, s) == opRefused {
		return &InvalidStatesError{Op: op, Topic: topic, Partition: partition, State: s}
	}
	return nil
}

// IsNoOp reports whether op is accepted in state s with nothing to do (start
// on a partition that is already MIRRORING).
func IsNoOp(op Op, s State) bool { return opUseOf(op, s) == opNoOp }
