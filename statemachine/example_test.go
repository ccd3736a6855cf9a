package statemachine_test

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/statemachine"
)

// A reconciler step: the topic is stopped while the partition mirrors.
func ExampleNext() {
	next, actions, err := statemachine.Next(statemachine.DesiredStopped, statemachine.Mirroring, 5, statemachine.StopAbortOpenTxns)
	if err != nil {
		panic(err)
	}
	fmt.Println(next)
	fmt.Println(statemachine.FormatActions(actions))
	for _, a := range actions {
		if b, ok := a.(statemachine.BumpLeaderEpoch); ok {
			fmt.Println("phase", b.Phase, "lane", b.Lane, "min", b.Min)
		}
	}
	// Output:
	// STOPPING
	// StopFetcher ; PersistLME ; BumpLeaderEpoch(min=5) ; AbortOpenTransactions ; AppendPIDReset
	// phase 3 lane 0 min 5
}

func ExampleTransition() {
	s, actions, _ := statemachine.Transition(statemachine.Mirroring,
		statemachine.EpochExceeded{BatchEpoch: 9, LocalEpoch: 4})
	fmt.Println(s, statemachine.FormatActions(actions))

	_, _, err := statemachine.Transition(statemachine.Stopped, statemachine.PausedDesired{})
	fmt.Println(errors.Is(err, statemachine.ErrInvalidTransition), err)
	// Output:
	// EPOCH_FENCING StopFetcher ; BumpLeaderEpoch(min=9)
	// true statemachine: invalid transition: event PausedDesired in state STOPPED
}

func ExampleCheckOp() {
	err := statemachine.CheckOp(statemachine.OpPause, "orders", 3, statemachine.Paused)
	fmt.Println(errors.Is(err, statemachine.ErrInvalidStates))
	fmt.Println(err)
	// Output:
	// true
	// statemachine: cannot pause topic "orders" partition 3 in state PAUSED
}
