package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Markers of the summary that opens docs/BENCHMARKS.md.
const (
	SummaryBegin = "<!-- bench:summary:begin (generated from docs/bench/results.json and docs/bench/latency.json; do not edit) -->"
	SummaryEnd   = "<!-- bench:summary:end -->"
)

// SummarySection renders the one current summary of the benchmarks: the newest
// throughput run and the newest latency run, one line per contender, and every goal
// of both with whether it was met. Either report may be nil (not run yet).
func SummarySection(tp *Report, lat *LatencyReport) string {
	var b strings.Builder
	b.WriteString("The newest run of each benchmark; how they were run, earlier runs and what the figures say are\nbelow.\n\n")
	if tp != nil {
		fmt.Fprintf(&b, "**Throughput** (%s, `%s`, %d partitions, %.0f MiB of lz4 batches, load %.1f→%.1f):\n\n",
			tp.Started.UTC().Format("2006-01-02"), tp.Command, tp.Partitions, mib(tp.SourceBytes), tp.LoadBefore, tp.LoadAfter)
		b.WriteString("| contender | MB/s | CPU s/GB | peak RSS MiB |\n|---|---:|---:|---:|\n")
		for _, r := range tp.Results {
			if r.Error != "" {
				fmt.Fprintf(&b, "| %s | failed: %s | | |\n", r.Contender, r.Error)
				continue
			}
			fmt.Fprintf(&b, "| %s | %.1f | %.2f | %.0f |\n", r.Contender, r.MBps, r.CPUSecondsPerGB, r.PeakRSSMiB)
		}
		b.WriteString("\n")
	}
	if lat != nil {
		fmt.Fprintf(&b, "**Replication latency** (%s, `%s`, %d partitions, load %.1f→%.1f), ms from the producer's send:\n\n",
			lat.Started.UTC().Format("2006-01-02"), lat.Command, lat.Partitions, lat.LoadBefore, lat.LoadAfter)
		b.WriteString("| contender | rate MB/s | p50 | p99 | p99 from the source's ack |\n|---|---:|---:|---:|---:|\n")
		for _, r := range lat.Results {
			if r.Error != "" {
				fmt.Fprintf(&b, "| %s | %.0f | failed: %s | | |\n", r.Contender, r.RateMBps, r.Error)
				continue
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.1f | %.1f |\n", r.Contender, r.RateMBps, r.P50Ms, r.P99Ms, r.FromAckP99Ms)
		}
		b.WriteString("\n")
	}
	var goals []Goal
	if tp != nil {
		goals = append(goals, tp.Goals...)
	}
	if lat != nil {
		goals = append(goals, lat.Goals...)
	}
	if len(goals) > 0 {
		b.WriteString("| goal | target | reached | met |\n|---|---|---:|---|\n")
		for _, g := range goals {
			met := "no"
			if g.Reached {
				met = "yes"
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f | %s |\n", g.Name, g.Target, g.Value, met)
		}
	}
	return b.String()
}

// WriteSummary renders the summary from the results JSON files of the two
// benchmarks (a missing file: that benchmark is left out) into the markdown
// document between SummaryBegin and SummaryEnd.
func WriteSummary(markdown, resultsJSON, latencyJSON string) error {
	tp, lat, err := ReadReports(resultsJSON, latencyJSON)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(markdown)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return writeFile(markdown, spliceBetween(old, SummaryBegin, SummaryEnd, SummarySection(tp, lat)))
}

// ReadReports reads the results JSON of the throughput and the latency benchmark;
// a path that is empty or names no file gives a nil report.
func ReadReports(resultsJSON, latencyJSON string) (*Report, *LatencyReport, error) {
	var tp Report
	var lat LatencyReport
	okTP, err := readJSON(resultsJSON, &tp)
	if err != nil {
		return nil, nil, err
	}
	okLat, err := readJSON(latencyJSON, &lat)
	if err != nil {
		return nil, nil, err
	}
	var tpp *Report
	var latp *LatencyReport
	if okTP {
		tpp = &tp
	}
	if okLat {
		latp = &lat
	}
	return tpp, latp, nil
}

func readJSON(path string, v any) (bool, error) {
	if path == "" {
		return false, nil
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bench: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("bench: %s: %w", path, err)
	}
	return true, nil
}
