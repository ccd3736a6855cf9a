package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScaleGoals: each goal is judged at the partition count it names (not
// measured when that count did not run or failed), a miss says by how much, and
// names the CPU profile of the phase.
func TestScaleGoals(t *testing.T) {
	rep := &ScaleReport{
		Runs: []ScaleRun{
			{Partitions: 1000, StartAnswerSeconds: 0.5},
			{Partitions: 10000, StartAnswerSeconds: 3, StartLagZeroSeconds: 8,
				Profiles: []string{"p/dest-start-P10000.pprof", "p/dest-restart-P10000.pprof"}},
			{Partitions: 100000, Error: "timeout"},
		},
		Throughput: &ScaleThroughput{MBps6: 100, MBps1000: 90, StartToLagZero6: 2, StartToLagZero1000: 5, Profile: "p/dest-throughput.pprof"},
	}
	gs := scaleGoals(rep)
	by := map[string]ScaleGoal{}
	for _, g := range gs {
		by[g.Name] = g
	}
	answer := by["StartMirrorTopics answer, 10,000 partitions"]
	require.True(t, answer.Measured)
	require.False(t, answer.Reached)
	require.Equal(t, 3.0, answer.Value)
	require.Equal(t, "p/dest-start-P10000.pprof", answer.Profile)
	require.Equal(t, "missed by 1.0 s (1.5× the target)", answer.missedBy())

	lag := by["start -> all MIRRORING lag 0, 10,000 partitions"]
	require.True(t, lag.Reached)
	require.Empty(t, lag.Profile)

	stop := by["failover -> all STOPPED, 100,000 partitions"]
	require.False(t, stop.Measured, "the 100,000 run failed")
	require.Equal(t, "not measured in this run", stop.missedBy())

	copyRatio := by["1,000-partition / 6-partition MB/s (copy)"]
	require.True(t, copyRatio.Reached)
	require.InDelta(t, 0.9, copyRatio.Value, 1e-9)
	fromStart := by["1,000-partition / 6-partition MB/s (from the start)"]
	require.False(t, fromStart.Reached)
	require.InDelta(t, 0.4, fromStart.Value, 1e-9)
	require.Equal(t, "missed by 0.40 (50% of the target)", fromStart.missedBy())

	rep.Goals = gs
	md := ScaleMarkdownSection(rep)
	require.Contains(t, md, "| 100000 | failed: timeout |")
	require.Contains(t, md, "`p/dest-start-P10000.pprof`")
	require.True(t, strings.Contains(md, "| 10000 | 3.00 | 8.00 |"), md)
	png, err := ScaleChart(rep)
	require.NoError(t, err)
	require.NotEmpty(t, png)
}
