package bench

import (
	"os"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/doccheck"
)

// TestBenchmarksSummaryIsCurrent checks that docs/BENCHMARKS.md opens (before its
// first section) with the summary of the committed results files. The bench
// program writes both; KMIRROR_UPDATE_DOCS=1 renews the summary from the files.
func TestBenchmarksSummaryIsCurrent(t *testing.T) {
	tp, lat, err := ReadReports("../../docs/bench/results.json", "../../docs/bench/latency.json")
	if err != nil {
		t.Fatal(err)
	}
	if tp == nil || lat == nil {
		t.Fatal("docs/bench/results.json or latency.json is missing")
	}
	body := SummarySection(tp, lat)
	for _, want := range []string{"kmirror", "mm2", tp.Command, lat.Command} {
		if !strings.Contains(body, want) {
			t.Errorf("the summary does not name %q", want)
		}
	}
	const doc = "../../docs/BENCHMARKS.md"
	if os.Getenv(doccheck.UpdateEnv) == "1" {
		if err := WriteSummary(doc, "../../docs/bench/results.json", "../../docs/bench/latency.json"); err != nil {
			t.Fatal(err)
		}
	}
	md, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(md), "\n## ")
	if !strings.Contains(head, SummaryBegin+"\n"+body+SummaryEnd) {
		t.Errorf("docs/BENCHMARKS.md does not open with the current summary; renew it with\n\t%s=1 go test -run TestBenchmarksSummaryIsCurrent ./internal/bench/", doccheck.UpdateEnv)
	}
}
