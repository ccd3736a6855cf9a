package epoch

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scripts in testdata/: cache operations (testdata/cache) and
// two-cluster divergence traces (testdata/divergence). Regenerate expectations with
// go test ./epoch -run TestDataDriven -rewrite, then review the diff.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c Cache
		logs := map[string]*simLog{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return runCommand(t, d, &c, logs)
		})
	})
}

func argInt(t *testing.T, d *datadriven.TestData, key string) int64 {
	t.Helper()
	var s string
	d.ScanArgs(t, key, &s)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%s=%q: %v", key, s, err)
	}
	return v
}

func argLog(t *testing.T, d *datadriven.TestData, logs map[string]*simLog, key string) *simLog {
	t.Helper()
	var name string
	d.ScanArgs(t, key, &name)
	l, ok := logs[name]
	if !ok {
		d.Fatalf(t, "no log %q", name)
	}
	return l
}

func runCommand(t *testing.T, d *datadriven.TestData, c *Cache, logs map[string]*simLog) string {
	switch d.Cmd {
	// ---- cache operations ----
	case "cache":
		var entries []Entry
		for _, line := range nonEmptyLines(d.Input) {
			var e Entry
			if _, err := fmt.Sscanf(line, "%d %d", &e.Epoch, &e.StartOffset); err != nil {
				d.Fatalf(t, "bad entry %q: %v", line, err)
			}
			entries = append(entries, e)
		}
		nc, err := NewCache(entries...)
		if err != nil {
			return "error: " + err.Error()
		}
		*c = *nc
		return c.String()
	case "assign":
		ok := c.Assign(int32(argInt(t, d, "epoch")), argInt(t, d, "offset"))
		if !ok {
			return "ignored " + c.String()
		}
		return c.String()
	case "end-offset":
		e, end := c.EndOffsetFor(int32(argInt(t, d, "epoch")), argInt(t, d, "leo"))
		return fmt.Sprintf("epoch=%d end=%d", e, end)
	case "truncate-end":
		c.TruncateFromEnd(argInt(t, d, "offset"))
		return c.String()
	case "truncate-start":
		c.TruncateFromStart(argInt(t, d, "offset"))
		return c.String()
	case "epoch-for":
		e, ok := c.EpochForOffset(argInt(t, d, "offset"))
		return fmt.Sprintf("epoch=%d ok=%v", e, ok)
	case "latest":
		l, ok := c.Latest()
		return fmt.Sprintf("%v ok=%v latest-epoch=%d", l, ok, c.LatestEpoch())
	case "earliest":
		e, ok := c.Earliest()
		return fmt.Sprintf("%v ok=%v", e, ok)
	case "encode":
		return string(EncodeCheckpoint(c.Entries()))
	case "decode":
		entries, err := DecodeCheckpoint([]byte(d.Input + "\n"))
		if err != nil {
			return "error: " + err.Error()
		}
		return (&Cache{entries: entries}).String()

	// ---- two-log traces ----
	case "log":
		var name string
		d.ScanArgs(t, "name", &name)
		l := &simLog{name: name}
		if d.HasArg("start") {
			l.start = argInt(t, d, "start")
		}
		for _, line := range nonEmptyLines(d.Input) {
			f := strings.Fields(line)
			e, err := strconv.ParseInt(f[0], 10, 32)
			if err != nil {
				d.Fatalf(t, "bad epoch in %q", line)
			}
			l.append(recs(int32(e), f[1:]...)...)
		}
		logs[name] = l
		return l.String()
	case "append":
		l := argLog(t, d, logs, "name")
		l.append(recs(int32(argInt(t, d, "epoch")), strings.Fields(d.Input)...)...)
		return l.String()
	case "show":
		return argLog(t, d, logs, "name").String()
	case "lme":
		l := argLog(t, d, logs, "name")
		lme := int32(argInt(t, d, "lme"))
		off, full := LMETruncationOffset(&l.cache, l.start, l.leo(), lme)
		if full {
			l.truncateFully(off)
		} else {
			l.truncateTo(off)
		}
		return fmt.Sprintf("LME %d -> truncate to %d (full=%v)\n%v", lme, off, full, l)
	case "diverge":
		leader, follower := argLog(t, d, logs, "leader"), argLog(t, d, logs, "follower")
		lfe, fo := follower.cache.LatestEpoch(), follower.leo()
		dv, div := LeaderDivergence(&leader.cache, leader.leo(), lfe, fo)
		if !div {
			return fmt.Sprintf("lastFetchedEpoch=%d fetchOffset=%d: no divergence", lfe, fo)
		}
		off, complete := FollowerTruncation(&follower.cache, follower.leo(), dv)
		return fmt.Sprintf("lastFetchedEpoch=%d fetchOffset=%d: diverging epoch=%d endOffset=%d; follower truncates to %d (complete=%v)",
			lfe, fo, dv.Epoch, dv.EndOffset, off, complete)
	case "fetch":
		line, _ := fetchRound(argLog(t, d, logs, "leader"), argLog(t, d, logs, "follower"))
		return line
	case "sync":
		leader, follower := argLog(t, d, logs, "leader"), argLog(t, d, logs, "follower")
		trace, done := syncLogs(leader, follower, 10)
		if !done {
			trace = append(trace, "not caught up after 10 rounds")
		}
		return strings.Join(trace, "\n") + "\n" + compareLogs(leader, follower)
	case "compare":
		return compareLogs(argLog(t, d, logs, "a"), argLog(t, d, logs, "b"))
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
		return ""
	}
}

func compareLogs(a, b *simLog) string {
	if off := firstDifference(a, b); off >= 0 {
		return fmt.Sprintf("%s and %s differ from offset %d", a.name, b.name, off)
	}
	return fmt.Sprintf("%s and %s identical (leo %d)", a.name, b.name, a.leo())
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
