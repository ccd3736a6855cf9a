package mirrorsim_test

import (
	"fmt"

	"github.com/kmirror/kmirror/mirror/mirrorsim"
)

// Run one seed of two sites and one partition; a failing seed returns a
// *mirrorsim.Failure whose message holds the seed and the trace to replay.
func ExampleSim_Run() {
	s, err := mirrorsim.New(mirrorsim.Options{Sites: 2, Partitions: 1, Steps: 12})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Run(7))
	// Output: <nil>
}

// Replay returns the trace of a seed: the same steps every time.
func ExampleSim_Replay() {
	s, _ := mirrorsim.New(mirrorsim.Options{Sites: 2, Partitions: 1, Steps: 3})
	trace, err := s.Replay(7)
	fmt.Println(err)
	fmt.Println(trace[0])
	// Output:
	// <nil>
	// step 0: setup: 2 sites, topic orders with 1 partitions, id bxaX_XNg0LOm7H_3bc1Bdg, mirror.support.unclean.leader.election=true
}
