package coordinatortest_test

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/coordinator/coordinatortest"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

var foo = records.UUID{0xf0, 0x0}

// The b1/b2 race of spec §9.6: a write of the old leader b1 that was in
// flight when leadership moved is refused once the new leader b2 has read.
func Example_leaderChange() {
	h, err := coordinatortest.New(coordinator.Config{NumPartitions: 3})
	if err != nil {
		panic(err)
	}
	defer h.Close()

	b1 := h.Leader("dr", foo, 0, 1)
	fmt.Println(b1.Write(statemachine.Preparing))
	fmt.Println(b1.Write(statemachine.Mirroring))

	b2 := h.Leader("dr", foo, 0, 2) // leadership moves; b2 reads first
	st, _ := b2.Read()
	fmt.Println(st.State, st.LeaderEpoch, st.StateEpoch)

	fmt.Println(b1.Write(statemachine.EpochFencing)) // b1's late write
	fmt.Println(b2.Write(statemachine.Pausing))
	fmt.Println(b2.StateEpoch)
	// Output:
	// NONE <nil>
	// NONE <nil>
	// MIRRORING 2 2
	// FENCED_LEADER_EPOCH <nil>
	// NONE <nil>
	// 3
}

// Optimistic concurrency: a write based on an outdated read is refused with
// FENCED_STATE_EPOCH, and an illegal move with INVALID_CLUSTER_MIRROR_STATES.
func Example_refusals() {
	h, _ := coordinatortest.New(coordinator.Config{NumPartitions: 1})
	defer h.Close()
	a := h.Leader("dr", foo, 1, 5)
	_ = coordinatortest.MustAccept(a.Write(statemachine.Preparing))
	stale := *a // a copy that keeps the old StateEpoch
	_ = coordinatortest.MustAccept(a.Write(statemachine.Mirroring))
	fmt.Println(coordinatortest.MustRefuse(admin.CodeFencedStateEpoch)(stale.Write(statemachine.Stopping)))
	fmt.Println(a.Write(statemachine.Stopped)) // MIRRORING -> STOPPED must pass STOPPING
	// Output:
	// <nil>
	// INVALID_CLUSTER_MIRROR_STATES <nil>
}

// Crashes and reloads: acknowledged writes survive, a failed append is
// rolled back, and the highest-seen leader epoch is durable.
func Example_crashAndReload() {
	h, _ := coordinatortest.New(coordinator.Config{NumPartitions: 2})
	defer h.Close()
	l := h.Leader("dr", foo, 0, 7)
	_, _ = l.Write(statemachine.Preparing)
	_, _ = l.WriteLME(4, 1200)

	h.FailNextAppend(errors.New("disk full"))
	fmt.Println(l.Write(statemachine.Mirroring))

	_ = h.Crash()
	st, _ := h.Read("dr", foo, 0, -1)
	fmt.Println(h.OwnerEpoch(), st.State, st.LeaderEpoch, st.StateEpoch, st.LastMirrorEpoch, st.LastMirrorOffset)

	old := h.Leader("dr", foo, 0, 6)
	fmt.Println(old.Write(statemachine.Mirroring))
	n, _ := h.DeleteMirror("dr")
	st, _ = h.Read("dr", foo, 0, -1)
	fmt.Println(n, st.State)
	// Output:
	// COORDINATOR_NOT_AVAILABLE <nil>
	// 2 PREPARING 7 1 4 1200
	// FENCED_LEADER_EPOCH <nil>
	// 1 UNKNOWN
}
