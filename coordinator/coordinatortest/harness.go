package coordinatortest

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// Harness is an in-process coordinator over a memory store.
type Harness struct {
	// Store is the memory store under the runtime; tests may use its fault
	// injection directly.
	Store *coordinator.MemoryStore

	cfg   coordinator.Config
	rt    *coordinator.Runtime
	epoch int32
	ctx   context.Context
}

// New returns a harness whose runtime owns and has loaded every
// __mirror_state partition with ownership epoch 1. A zero Config gets the
// runtime defaults except AppendLinger, which defaults to "no linger" here
// so that scripted steps are not slowed down.
func New(cfg coordinator.Config) (*Harness, error) {
	if cfg.AppendLinger == 0 {
		cfg.AppendLinger = -1
	}
	h := &Harness{Store: coordinator.NewMemoryStore(), cfg: cfg, ctx: context.Background()}
	if err := h.start(); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Harness) start() error {
	rt, err := coordinator.New(h.cfg, h.Store)
	if err != nil {
		return err
	}
	h.epoch++
	n := rt.Config().NumPartitions
	for p := range n {
		if err := rt.Load(p, h.epoch); err != nil {
			_ = rt.Close()
			return err
		}
	}
	for p := range n {
		if err := rt.WaitLoaded(h.ctx, p); err != nil {
			_ = rt.Close()
			return err
		}
	}
	h.rt = rt
	return nil
}

// Runtime returns the current runtime (it changes on Crash and Reload).
func (h *Harness) Runtime() *coordinator.Runtime { return h.rt }

// OwnerEpoch returns the ownership epoch of the current runtime.
func (h *Harness) OwnerEpoch() int32 { return h.epoch }

// Read reads one partition's state with the given leader epoch (-1 = none).
func (h *Harness) Read(mirror string, topicID records.UUID, partition, leaderEpoch int32) (coordinator.ReadPartitionResult, error) {
	res, err := h.rt.ReadMirrorStates(h.ctx, coordinator.ReadRequest{MirrorName: mirror,
		Partitions: []coordinator.ReadPartition{{TopicID: topicID, Partition: partition, LeaderEpoch: leaderEpoch}}})
	if err != nil {
		return coordinator.ReadPartitionResult{}, err
	}
	return res.Partitions[0], nil
}

// Write sends one partition write as given (MirrorName from mirror).
func (h *Harness) Write(mirror string, w coordinator.WritePartition) (coordinator.WritePartitionResult, error) {
	res, err := h.rt.WriteMirrorStates(h.ctx, coordinator.WriteRequest{MirrorName: mirror, Partitions: []coordinator.WritePartition{w}})
	if err != nil {
		return coordinator.WritePartitionResult{}, err
	}
	return res.Partitions[0], nil
}

// DeleteMirror tombstones every partition of mirror.
func (h *Harness) DeleteMirror(mirror string) (int, error) {
	res, err := h.rt.DeleteMirror(h.ctx, mirror)
	return len(res.Partitions), err
}

// FailNextAppend makes the next store append fail with err; the requests
// waiting on it are answered COORDINATOR_NOT_AVAILABLE and the shard is
// rolled back.
func (h *Harness) FailNextAppend(err error) { h.Store.FailAppend(1, err) }

// Crash crashes the store (appends in flight are lost), stops the runtime
// and starts a new owner with the next epoch, which replays the store.
func (h *Harness) Crash() error {
	h.Store.Crash()
	return h.Reload()
}

// Reload hands every partition to a new runtime with the next ownership
// epoch, which replays the store (a coordinator failover without a crash).
func (h *Harness) Reload() error {
	if err := h.rt.Close(); err != nil {
		return err
	}
	return h.start()
}

// Close stops the runtime.
func (h *Harness) Close() error { return h.rt.Close() }

// Leader is one data-partition leader: a broker that leads (mirror, topic,
// partition) with a leader epoch and remembers the StateEpoch of its last
// read or accepted write.
type Leader struct {
	h           *Harness
	Mirror      string
	TopicID     records.UUID
	Partition   int32
	LeaderEpoch int32
	// StateEpoch is what the leader will send with its next write.
	StateEpoch int32
}

// Leader returns a leader of the partition with the given leader epoch. It
// has not read yet: its StateEpoch is -1 (skip the check).
func (h *Harness) Leader(mirror string, topicID records.UUID, partition, leaderEpoch int32) *Leader {
	return &Leader{h: h, Mirror: mirror, TopicID: topicID, Partition: partition, LeaderEpoch: leaderEpoch, StateEpoch: -1}
}

// Read reads the partition with the leader's epoch (raising the
// coordinator's highest-seen epoch) and remembers the StateEpoch.
func (l *Leader) Read() (coordinator.ReadPartitionResult, error) {
	r, err := l.h.Read(l.Mirror, l.TopicID, l.Partition, l.LeaderEpoch)
	if err == nil && r.ErrorCode == admin.CodeNone {
		l.StateEpoch = r.StateEpoch
	}
	return r, err
}

// Write asks to move the partition to state with the leader's epoch and
// last known StateEpoch; on success the leader remembers the new StateEpoch.
// The returned code is the coordinator's answer (admin.CodeNone on success).
func (l *Leader) Write(state statemachine.State) (admin.Code, error) {
	return l.write(coordinator.WritePartition{TopicID: l.TopicID, Partition: l.Partition, State: state,
		LeaderEpoch: l.LeaderEpoch, StateEpoch: l.StateEpoch, LastMirrorEpoch: -1, LastMirrorOffset: -1})
}

// WriteLME persists the last mirror epoch (and offset) without changing the
// state (State Unknown in the request, spec §11.9).
func (l *Leader) WriteLME(lastMirrorEpoch int32, lastMirrorOffset int64) (admin.Code, error) {
	return l.write(coordinator.WritePartition{TopicID: l.TopicID, Partition: l.Partition, State: statemachine.Unknown,
		LeaderEpoch: l.LeaderEpoch, StateEpoch: -1, LastMirrorEpoch: lastMirrorEpoch, LastMirrorOffset: lastMirrorOffset})
}

func (l *Leader) write(w coordinator.WritePartition) (admin.Code, error) {
	r, err := l.h.Write(l.Mirror, w)
	if err != nil {
		return admin.CodeNone, err
	}
	if r.ErrorCode == admin.CodeNone {
		l.StateEpoch = r.StateEpoch
	}
	return r.ErrorCode, nil
}

// MustRefuse returns nil when code is the refusal want, and an error naming
// both otherwise. It reads well in scripted tests:
//
//	require.NoError(t, coordinatortest.MustRefuse(admin.CodeFencedLeaderEpoch)(b1.Write(s)))
func MustRefuse(want admin.Code) func(admin.Code, error) error {
	return func(got admin.Code, err error) error {
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("coordinatortest: got %v, want refusal %v", got, want)
		}
		return nil
	}
}

// MustAccept returns nil when code is admin.CodeNone, else an error.
func MustAccept(got admin.Code, err error) error {
	if err != nil {
		return err
	}
	if got != admin.CodeNone {
		return fmt.Errorf("coordinatortest: write refused with %v", got)
	}
	return nil
}
