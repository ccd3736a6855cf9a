package bench

import (
	"os"
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

// TestScaleFlapGoal: the link flap is judged at 50,000 partitions, met only
// when the recovery is within 10 s and both sites then hold the same offsets;
// its row shows the freeze's rates, and a failed flap its error.
func TestScaleFlapGoal(t *testing.T) {
	flap := &ScaleFlap{FreezeSeconds: 60, FetchesPerSecond: 0.2, ErrorsPerSecond: 0.2, LogLinesPerSecond: 2.5, LogLinesMaxSecond: 60,
		OutageShown: 50000, Partitions: 50000, DestFDsBefore: 10000, DestFDsDuring: 10001, RecoverySeconds: 4.2, VerifiedSeconds: 1.1, Exact: true}
	rep := &ScaleReport{Runs: []ScaleRun{{Partitions: 50000, Flap: flap}, {Partitions: 1000, Flap: &ScaleFlap{Error: "bench: boom"}}}}
	goal := func() ScaleGoal {
		for _, g := range scaleGoals(rep) {
			if strings.HasPrefix(g.Name, "link flap") {
				return g
			}
		}
		t.Fatal("no link flap goal")
		return ScaleGoal{}
	}
	g := goal()
	require.True(t, g.Measured)
	require.True(t, g.Reached)
	require.Equal(t, 4.2, g.Value)
	flap.Exact = false
	require.False(t, goal().Reached, "offsets that differ miss the goal")
	flap.Exact, flap.RecoverySeconds = true, 12
	require.Equal(t, "missed by 2.0 s (1.2× the target)", goal().missedBy())

	rep.Goals = scaleGoals(rep)
	md := ScaleMarkdownSection(rep)
	require.Contains(t, md, "| 50000 partitions | 60 | 0.2 (0.2) | 2.5 (60) | 50000 of 50000 | 10000 → 10001 | 12.00 | 1.10 | true |")
	require.Contains(t, md, "| 1000 partitions | failed: bench: boom |")
}

// countLines counts the lines of a byte range, the most in one second and
// the lines by message.
func TestCountLines(t *testing.T) {
	path := t.TempDir() + "/dest.log"
	log := `{"time":"2026-12-03T11:00:00.1Z","msg":"before"}
{"time":"2026-12-03T11:00:01.1Z","msg":"a"}
{"time":"2026-12-03T11:00:01.5Z","msg":"a"}
{"time":"2026-12-03T11:00:02.0Z","msg":"b"}
gc 1 @0.1s
`
	require.NoError(t, os.WriteFile(path, []byte(log), 0o644))
	from := int64(strings.Index(log, "\n") + 1)
	n, most, msgs, err := countLines(path, from, int64(len(log)))
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, 2, most)
	require.Equal(t, map[string]int{"a": 2, "b": 1, "(not JSON)": 1}, msgs)
}
