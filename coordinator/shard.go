package coordinator

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// PartitionKey names one mirror partition inside a mirror: the destination
// (= source) topic id and the partition index.
type PartitionKey struct {
	TopicID   records.UUID
	Partition int32
}

// ReadPartition is one partition of a ReadMirrorStates request.
type ReadPartition struct {
	TopicID   records.UUID
	Partition int32
	// LeaderEpoch is the reader's current leader epoch of the data
	// partition; -1 means "not given". A value above the stored
	// highest-seen leader epoch raises it (spec §9.6 Read rule).
	LeaderEpoch int32
}

// ReadRequest is the shard's form of ReadMirrorStates for one mirror.
type ReadRequest struct {
	MirrorName string
	Partitions []ReadPartition
}

// ReadPartitionResult is the answer for one partition of a read. A partition
// without a stored state reads as State Unknown, LeaderEpoch -1, StateEpoch 0,
// LastMirrorEpoch -1, LastMirrorOffset -1 (the record defaults of §9.4).
type ReadPartitionResult struct {
	TopicID          records.UUID
	Partition        int32
	State            statemachine.State
	LeaderEpoch      int32
	StateEpoch       int32
	LastMirrorEpoch  int32
	LastMirrorOffset int64
	// ErrorMessage is the stored failure reason (state FAILED), or nil.
	ErrorMessage *string
	// RetryAttempt counts the automatic retries of a FAILED partition since
	// it last mirrored; -1 (records.NonRetryable) marks a failure that is not
	// retried automatically.
	RetryAttempt int16
	// PreviousState is the state the partition had before it went FAILED
	// (Unknown when none).
	PreviousState statemachine.State
	// ErrorCode is admin.CodeNone from the shard; the runtime sets the
	// coordinator codes (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...).
	ErrorCode admin.Code
}

// ReadResponse answers a ReadRequest, one result per requested partition, in
// request order.
type ReadResponse struct {
	Partitions []ReadPartitionResult
}

// WritePartition is one partition of a WriteMirrorStates request.
type WritePartition struct {
	TopicID   records.UUID
	Partition int32
	// State is the new actual state. statemachine.Unknown means "only update
	// the LME" (spec §11.9): the fencing checks still run, no transition is
	// made and StateEpoch does not move.
	State statemachine.State
	// LeaderEpoch is the writer's leader epoch; -1 skips the check.
	LeaderEpoch int32
	// StateEpoch is the state epoch the writer last read; -1 skips the check.
	StateEpoch int32
	// LastMirrorEpoch, when not -1, is persisted as the partition's LME
	// together with LastMirrorOffset.
	LastMirrorEpoch  int32
	LastMirrorOffset int64
	// ErrorMessage is the failure reason stored with the state (FAILED).
	ErrorMessage *string
	// RetryAttempt is stored with the state: the automatic retries so far, -1
	// (records.NonRetryable) for a failure that is not retried. The shard
	// derives PreviousState itself: the stored state when the write enters
	// FAILED from another state, kept while FAILED, Unknown otherwise.
	RetryAttempt int16
}

// WriteRequest is the shard's form of WriteMirrorStates for one mirror.
type WriteRequest struct {
	MirrorName string
	Partitions []WritePartition
}

// WritePartitionResult is the answer for one partition of a write.
type WritePartitionResult struct {
	TopicID   records.UUID
	Partition int32
	// StateEpoch is the state epoch after the write, or -1 when refused.
	StateEpoch   int32
	ErrorCode    admin.Code
	ErrorMessage string
}

// WriteResponse answers a WriteRequest, one result per requested partition,
// in request order.
type WriteResponse struct {
	Partitions []WritePartitionResult
}

// DeleteResponse answers DeleteMirror: the partitions whose keys were
// tombstoned, sorted by topic id then partition.
type DeleteResponse struct {
	Partitions []PartitionKey
}

// Result is what a shard command returns: the records to append (possibly
// none) and the response to send once they are durable. Commands never
// mutate the shard; the caller applies Records with Replay.
type Result[R any] struct {
	Records  []records.StateRecord
	Response R
}

// entryKey identifies a mirror partition in the shard.
type entryKey struct {
	mirror    string
	topicID   records.UUID
	partition int32
}

// entry is the cached state of one mirror partition: the MirrorPartitionState
// value and the LastMirrorEpochs value, each possibly absent.
type entry struct {
	hasState     bool
	state        statemachine.State
	leaderEpoch  int32 // highest leader epoch seen
	stateEpoch   int32
	errorMessage *string
	retryAttempt int16
	prevState    statemachine.State

	hasLME           bool
	lastMirrorEpoch  int32
	lastMirrorOffset int64
}

func newEntry() entry {
	return entry{state: statemachine.Unknown, prevState: statemachine.Unknown, leaderEpoch: epoch.UndefinedEpoch,
		lastMirrorEpoch: epoch.UndefinedEpoch, lastMirrorOffset: -1}
}

// Shard is the deterministic state of one __mirror_state partition: the
// actual state, fencing counters and LME of every mirror partition whose key
// hashes to it. Commands (ReadMirrorStates, WriteMirrorStates, DeleteMirror)
// read it and return records plus a response; Replay is the only mutation.
// A Shard does no I/O, reads no clock and starts no goroutines. It is not
// safe for concurrent use.
type Shard struct {
	entries map[entryKey]*entry
}

// NewShard returns an empty shard.
func NewShard() *Shard {
	return &Shard{entries: make(map[entryKey]*entry)}
}

// Len returns the number of mirror partitions with a live record.
func (s *Shard) Len() int { return len(s.entries) }

// Clone returns a deep copy of s (used by the runtime to roll back).
func (s *Shard) Clone() *Shard {
	c := &Shard{entries: make(map[entryKey]*entry, len(s.entries))}
	for k, e := range s.entries {
		ne := *e
		c.entries[k] = &ne
	}
	return c
}

func (s *Shard) lookup(k entryKey) entry {
	if e, ok := s.entries[k]; ok {
		return *e
	}
	return newEntry()
}

func stateRecord(k entryKey, e entry) records.StateRecord {
	return records.StateRecord{
		PartitionStateKey: &records.MirrorPartitionStateKey{MirrorName: k.mirror, TopicID: k.topicID, Partition: k.partition},
		PartitionState: &records.MirrorPartitionStateValue{State: int8(e.state), LeaderEpoch: e.leaderEpoch,
			StateEpoch: e.stateEpoch, ErrorMessage: e.errorMessage, RetryAttempt: e.retryAttempt, PreviousState: int8(e.prevState)},
	}
}

func lmeRecord(k entryKey, e entry) records.StateRecord {
	return records.StateRecord{
		LastMirrorEpochsKey: &records.LastMirrorEpochsKey{MirrorName: k.mirror, TopicID: k.topicID, Partition: k.partition},
		LastMirrorEpochs:    &records.LastMirrorEpochsValue{LastMirrorEpoch: e.lastMirrorEpoch, LastMirrorOffset: e.lastMirrorOffset},
	}
}

// ReadMirrorStates answers a read. A partition whose requested LeaderEpoch is
// above the stored highest-seen leader epoch gets a MirrorPartitionState
// record carrying the raised epoch (same State and StateEpoch), so that the
// fence survives a coordinator move: a read that raises the epoch is a write.
// The response reflects the raised epoch.
func (s *Shard) ReadMirrorStates(req ReadRequest) Result[ReadResponse] {
	var res Result[ReadResponse]
	res.Response.Partitions = make([]ReadPartitionResult, 0, len(req.Partitions))
	var overlay map[entryKey]entry // raises made earlier in this request
	for _, p := range req.Partitions {
		k := entryKey{req.MirrorName, p.TopicID, p.Partition}
		e, ok := overlay[k]
		if !ok {
			e = s.lookup(k)
		}
		if p.LeaderEpoch > e.leaderEpoch {
			e.leaderEpoch = p.LeaderEpoch
			e.hasState = true
			res.Records = append(res.Records, stateRecord(k, e))
			if overlay == nil {
				overlay = make(map[entryKey]entry)
			}
			overlay[k] = e
		}
		res.Response.Partitions = append(res.Response.Partitions, ReadPartitionResult{
			TopicID: p.TopicID, Partition: p.Partition, State: e.state, LeaderEpoch: e.leaderEpoch,
			StateEpoch: e.stateEpoch, LastMirrorEpoch: e.lastMirrorEpoch, LastMirrorOffset: e.lastMirrorOffset,
			ErrorMessage: e.errorMessage, RetryAttempt: e.retryAttempt, PreviousState: e.prevState,
		})
	}
	return res
}

// CheckWrite runs the checks of one partition write against the stored state,
// in the order of spec §9.6: leader epoch fence, state epoch fence, then the
// transition check. It returns admin.CodeNone when the write would be
// accepted, else CodeFencedLeaderEpoch, CodeFencedStateEpoch or
// CodeInvalidClusterMirrorStates. It does not allocate.
func (s *Shard) CheckWrite(mirror string, p WritePartition) admin.Code {
	if e, ok := s.entries[entryKey{mirror, p.TopicID, p.Partition}]; ok {
		return checkWrite(e, &p)
	}
	e := newEntry()
	return checkWrite(&e, &p)
}

// checkWrite is the fence-first check on an entry.
//
// Decision (open-questions A8): a write whose State is not a legal move from
// the stored state (statemachine.ValidMove) is refused with
// INVALID_CLUSTER_MIRROR_STATES and writes nothing, rather than the
// prototype's silent success: a silent success would make the leader run the
// new state's side effects although the coordinator never recorded it.
func checkWrite(e *entry, p *WritePartition) admin.Code {
	if _, ok := epoch.Fence(e.leaderEpoch, p.LeaderEpoch); !ok {
		return admin.CodeFencedLeaderEpoch
	}
	if _, ok := epoch.Fence(e.stateEpoch, p.StateEpoch); !ok {
		return admin.CodeFencedStateEpoch
	}
	if p.State != statemachine.Unknown && !statemachine.ValidMove(e.state, p.State) {
		return admin.CodeInvalidClusterMirrorStates
	}
	return admin.CodeNone
}

// WriteMirrorStates answers a write. Per partition, fencing comes first
// (leader epoch, then state epoch; -1 skips a check), then the transition
// check. An accepted state write stores the new State, raises the
// highest-seen leader epoch to the request's, increments StateEpoch and
// emits a MirrorPartitionState record. A write with State Unknown only
// updates the LME (and, if it raises the leader epoch, persists that raise
// without moving StateEpoch). A LastMirrorEpoch other than -1 emits a
// LastMirrorEpochs record. A refusal is a per-partition error code with no
// records. Several entries for the same partition in one request are
// applied in order.
func (s *Shard) WriteMirrorStates(req WriteRequest) Result[WriteResponse] {
	var res Result[WriteResponse]
	res.Response.Partitions = make([]WritePartitionResult, 0, len(req.Partitions))
	var overlay map[entryKey]entry
	for i := range req.Partitions {
		p := &req.Partitions[i]
		k := entryKey{req.MirrorName, p.TopicID, p.Partition}
		e, ok := overlay[k]
		if !ok {
			e = s.lookup(k)
		}
		r := WritePartitionResult{TopicID: p.TopicID, Partition: p.Partition, StateEpoch: -1}
		if code := checkWrite(&e, p); code != admin.CodeNone {
			r.ErrorCode = code
			r.ErrorMessage = refusalMessage(code, e, p)
			res.Response.Partitions = append(res.Response.Partitions, r)
			continue
		}
		le, _ := epoch.Fence(e.leaderEpoch, p.LeaderEpoch)
		switch {
		case p.State != statemachine.Unknown:
			e.prevState = previousState(e, p.State)
			e.hasState = true
			e.state = p.State
			e.leaderEpoch = le
			e.stateEpoch++
			e.errorMessage = p.ErrorMessage
			e.retryAttempt = p.RetryAttempt
			res.Records = append(res.Records, stateRecord(k, e))
		case le != e.leaderEpoch:
			e.hasState = true
			e.leaderEpoch = le
			res.Records = append(res.Records, stateRecord(k, e))
		}
		if p.LastMirrorEpoch != epoch.UndefinedEpoch {
			e.hasLME = true
			e.lastMirrorEpoch = p.LastMirrorEpoch
			e.lastMirrorOffset = p.LastMirrorOffset
			res.Records = append(res.Records, lmeRecord(k, e))
		}
		if overlay == nil {
			overlay = make(map[entryKey]entry)
		}
		overlay[k] = e
		r.StateEpoch = e.stateEpoch
		res.Response.Partitions = append(res.Response.Partitions, r)
	}
	return res
}

// previousState is the PreviousState stored when e moves to state to: the state before
// FAILED, kept across FAILED re-assertions; Unknown for every other state.
func previousState(e entry, to statemachine.State) statemachine.State {
	switch {
	case to != statemachine.Failed:
		return statemachine.Unknown
	case e.state == statemachine.Failed:
		return e.prevState
	}
	return e.state
}

func refusalMessage(code admin.Code, e entry, p *WritePartition) string {
	switch code {
	case admin.CodeFencedLeaderEpoch:
		return fmt.Sprintf("leader epoch %d is older than the highest seen leader epoch %d", p.LeaderEpoch, e.leaderEpoch)
	case admin.CodeFencedStateEpoch:
		return fmt.Sprintf("state epoch %d is older than the current state epoch %d", p.StateEpoch, e.stateEpoch)
	default:
		return fmt.Sprintf("partition %d: invalid transition %s -> %s", p.Partition, e.state, p.State)
	}
}

// DeleteMirror returns tombstones for both keys (MirrorPartitionState and
// LastMirrorEpochs) of every partition of the mirror held by the shard, in
// a deterministic order (topic id, then partition).
func (s *Shard) DeleteMirror(mirror string) Result[DeleteResponse] {
	var res Result[DeleteResponse]
	for k := range s.entries {
		if k.mirror == mirror {
			res.Response.Partitions = append(res.Response.Partitions, PartitionKey{k.topicID, k.partition})
		}
	}
	slices.SortFunc(res.Response.Partitions, func(a, b PartitionKey) int {
		if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	for _, p := range res.Response.Partitions {
		res.Records = append(res.Records,
			records.StateRecord{PartitionStateKey: &records.MirrorPartitionStateKey{MirrorName: mirror, TopicID: p.TopicID, Partition: p.Partition}},
			records.StateRecord{LastMirrorEpochsKey: &records.LastMirrorEpochsKey{MirrorName: mirror, TopicID: p.TopicID, Partition: p.Partition}})
	}
	return res
}

// Replay applies one record to the shard; it is the only mutation. A value
// sets the corresponding half of the partition's entry; a tombstone clears it
// and the entry (with its epoch counters) is removed once both halves are
// gone. A record with no key, or with both keys, is refused with
// ErrInvalidRecord and changes nothing.
func (s *Shard) Replay(r records.StateRecord) error {
	switch {
	case r.PartitionStateKey != nil && r.LastMirrorEpochsKey == nil && r.LastMirrorEpochs == nil:
		k := entryKey{r.PartitionStateKey.MirrorName, r.PartitionStateKey.TopicID, r.PartitionStateKey.Partition}
		e := s.entries[k]
		if v := r.PartitionState; v != nil {
			if e == nil {
				ne := newEntry()
				e = &ne
				s.entries[k] = e
			}
			e.hasState = true
			e.state = statemachine.State(v.State)
			e.leaderEpoch = v.LeaderEpoch
			e.stateEpoch = v.StateEpoch
			e.errorMessage = v.ErrorMessage
			e.retryAttempt = v.RetryAttempt
			e.prevState = statemachine.State(v.PreviousState)
			return nil
		}
		if e != nil {
			lme := *e
			*e = newEntry()
			e.hasLME, e.lastMirrorEpoch, e.lastMirrorOffset = lme.hasLME, lme.lastMirrorEpoch, lme.lastMirrorOffset
			s.dropIfEmpty(k, e)
		}
		return nil
	case r.LastMirrorEpochsKey != nil && r.PartitionStateKey == nil && r.PartitionState == nil:
		k := entryKey{r.LastMirrorEpochsKey.MirrorName, r.LastMirrorEpochsKey.TopicID, r.LastMirrorEpochsKey.Partition}
		e := s.entries[k]
		if v := r.LastMirrorEpochs; v != nil {
			if e == nil {
				ne := newEntry()
				e = &ne
				s.entries[k] = e
			}
			e.hasLME = true
			e.lastMirrorEpoch = v.LastMirrorEpoch
			e.lastMirrorOffset = v.LastMirrorOffset
			return nil
		}
		if e != nil {
			e.hasLME = false
			e.lastMirrorEpoch = epoch.UndefinedEpoch
			e.lastMirrorOffset = -1
			s.dropIfEmpty(k, e)
		}
		return nil
	default:
		return ErrInvalidRecord
	}
}

func (s *Shard) dropIfEmpty(k entryKey, e *entry) {
	if !e.hasState && !e.hasLME {
		delete(s.entries, k)
	}
}

// Equal reports whether two shards hold exactly the same state.
func (s *Shard) Equal(o *Shard) bool {
	if len(s.entries) != len(o.entries) {
		return false
	}
	for k, e := range s.entries {
		f, ok := o.entries[k]
		if !ok || !entryEqual(*e, *f) {
			return false
		}
	}
	return true
}

func entryEqual(a, b entry) bool {
	am, bm := a.errorMessage, b.errorMessage
	a.errorMessage, b.errorMessage = nil, nil
	if a != b {
		return false
	}
	if (am == nil) != (bm == nil) {
		return false
	}
	return am == nil || *am == *bm
}

// Dump returns a deterministic text rendering of the shard, one line per
// mirror partition, for tests and debugging.
func (s *Shard) Dump() string {
	keys := make([]entryKey, 0, len(s.entries))
	for k := range s.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b entryKey) int {
		if c := cmp.Compare(a.mirror, b.mirror); c != 0 {
			return c
		}
		if c := bytes.Compare(a.topicID[:], b.topicID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	var buf bytes.Buffer
	for _, k := range keys {
		e := s.entries[k]
		fmt.Fprintf(&buf, "%s:%s:%d", k.mirror, k.topicID, k.partition)
		if e.hasState {
			fmt.Fprintf(&buf, " state=%s le=%d se=%d", e.state, e.leaderEpoch, e.stateEpoch)
			if e.errorMessage != nil {
				fmt.Fprintf(&buf, " err=%q", *e.errorMessage)
			}
			if e.retryAttempt != 0 || e.prevState != statemachine.Unknown {
				fmt.Fprintf(&buf, " retry=%d prev=%s", e.retryAttempt, e.prevState)
			}
		}
		if e.hasLME {
			fmt.Fprintf(&buf, " lme=%d lmo=%d", e.lastMirrorEpoch, e.lastMirrorOffset)
		}
		buf.WriteByte('\n')
	}
	return buf.String()
}
