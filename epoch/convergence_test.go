package epoch

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestFetchConvergesAfterRandomElections drives three replicas through random terms: each
// term elects a random replica (clean or not), which registers its epoch at its log end as
// a Kafka leader does, appends records, and lets random followers copy a random amount.
// Records of an epoch are written only by that epoch's leader, the property Kafka's
// divergence protocol relies on. At the end a final leader is elected and every other
// replica runs the fetch loop (CheckFetch on the leader, FollowerTruncation on the
// follower): each must end with exactly the leader's records, within a bounded number of
// rounds.
func TestFetchConvergesAfterRandomElections(t *testing.T) {
	scenarios := 5_000
	if testing.Short() {
		scenarios = 1_000
	}
	rng := rand.New(rand.NewPCG(279, 320))
	maxRounds := 0
	for sc := 0; sc < scenarios; sc++ {
		maxRounds = max(maxRounds, runElections(t, rng, sc))
	}
	t.Logf("%d scenarios, at most %d fetch rounds to converge", scenarios, maxRounds)
}

func runElections(t *testing.T, rng *rand.Rand, sc int) int {
	reps := []*simLog{{name: "r0"}, {name: "r1"}, {name: "r2"}}
	var history []string
	epoch := int32(0)
	terms := 1 + rng.IntN(6)
	for term := 0; term < terms; term++ {
		epoch += 1 + rng.Int32N(2)
		leader := reps[rng.IntN(len(reps))]
		leader.cache.Assign(epoch, leader.leo()) // makeLeader: the new epoch starts at the LEO
		n := rng.IntN(4)
		for i := 0; i < n; i++ {
			leader.append(simRecord{Epoch: epoch, Label: fmt.Sprintf("e%d.%d", epoch, i)})
		}
		history = append(history, fmt.Sprintf("term %d: %s leads, writes %d", epoch, leader.name, n))
		for _, f := range reps {
			if f == leader || rng.IntN(2) == 0 {
				continue
			}
			for r := rng.IntN(4); r > 0; r-- {
				line, _ := fetchRoundN(leader, f, rng.IntN(3))
				history = append(history, "  "+f.name+" "+line)
			}
		}
	}
	epoch++
	leader := reps[rng.IntN(len(reps))]
	leader.cache.Assign(epoch, leader.leo())
	history = append(history, fmt.Sprintf("final term %d: %s leads", epoch, leader.name))
	rounds := 0
	for _, f := range reps {
		if f == leader {
			continue
		}
		trace, done := syncLogs(leader, f, 20)
		rounds = max(rounds, len(trace))
		if !done || firstDifference(leader, f) >= 0 {
			t.Fatalf("scenario %d: %s did not converge to %s\n%s\nsync:\n%s\n%v\n%v", sc, f.name, leader.name,
				strings.Join(history, "\n"), strings.Join(trace, "\n"), leader, f)
		}
	}
	return rounds
}
