package epoch_test

import (
	"fmt"

	"github.com/kmirror/kmirror/epoch"
)

// A follower (or the mirror fetcher) sends its latest epoch with each fetch; the leader
// answers with a DivergingEpoch when the follower's log went further in that epoch than the
// leader's; the follower truncates and fetches again.
func Example() {
	leader, _ := epoch.NewCache(epoch.Entry{Epoch: 0, StartOffset: 0}, epoch.Entry{Epoch: 10, StartOffset: 2})
	follower, _ := epoch.NewCache(epoch.Entry{Epoch: 0, StartOffset: 0})
	const leaderLEO, followerLEO = 4, 3

	d, diverged := epoch.LeaderDivergence(leader, leaderLEO, follower.LatestEpoch(), followerLEO)
	fmt.Println(diverged, d.Epoch, d.EndOffset)
	fmt.Println(epoch.FollowerTruncationOffset(follower, followerLEO, d))
	// Output:
	// true 0 2
	// 2
}

// The last mirror epoch (LME) read from the other cluster is turned into a local truncation
// offset: everything after the end of epoch LME goes.
func ExampleLMETruncationOffset() {
	local, _ := epoch.NewCache(epoch.Entry{Epoch: 0, StartOffset: 0}, epoch.Entry{Epoch: 1, StartOffset: 3})
	fmt.Println(epoch.LMETruncationOffset(local, 0, 4, 0))
	fmt.Println(epoch.LMETruncationOffset(local, 0, 4, -1))
	// Output:
	// 3 false
	// 0 true
}

func ExampleFence() {
	fmt.Println(epoch.Fence(5, -1))
	fmt.Println(epoch.Fence(5, 4))
	fmt.Println(epoch.Fence(5, 7))
	// Output:
	// 5 true
	// 5 false
	// 7 true
}

func ExampleDecodeCheckpoint() {
	entries, err := epoch.DecodeCheckpoint([]byte("0\n2\n0 0\n3 120\n"))
	fmt.Println(entries, err)
	_, err = epoch.DecodeCheckpoint([]byte("0\n2\n0 0\n"))
	fmt.Println(err)
	// Output:
	// [0@0 3@120] <nil>
	// epoch: corrupt leader-epoch checkpoint: line 4: count line announced 2 entries, found 1
}
