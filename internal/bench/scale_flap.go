package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/statemachine"
)

// ScaleFlap is what a link flap measured: the source site frozen (SIGSTOP)
// for a while with every partition mirrored, then thawed (SIGCONT).
type ScaleFlap struct {
	// FreezeSeconds is how long the source was frozen.
	FreezeSeconds float64 `json:"freeze_seconds"`
	// FetchesPerSecond and ErrorsPerSecond are the destination's Fetch round
	// trips to the source (answered or failed: kmirror_fetch_latency_seconds_count)
	// and its failed ones (kmirror_fetch_request_errors_total), per second
	// of the freeze; LogLinesPerSecond the lines the destination logged.
	FetchesPerSecond  float64 `json:"fetches_per_second"`
	ErrorsPerSecond   float64 `json:"fetch_errors_per_second"`
	LogLinesPerSecond float64 `json:"log_lines_per_second"`
	// LogLinesMaxSecond is the most lines logged in one second of the freeze
	// (a burst hidden by the mean).
	LogLinesMaxSecond int `json:"log_lines_max_second"`
	// LogMessages counts the freeze's log lines by message.
	LogMessages map[string]int `json:"log_messages,omitempty"`
	// OutageShown counts the partitions whose describe showed the outage at
	// the end of the freeze (source unreachable, or FAILED), of Partitions.
	OutageShown int `json:"outage_shown"`
	Partitions  int `json:"partitions"`
	// DestFDsBefore and DestFDsDuring are the destination's descriptors
	// before the freeze and at its end (a reconnect storm would pile them up).
	DestFDsBefore int `json:"dest_fds_before"`
	DestFDsDuring int `json:"dest_fds_during"`
	// RecoverySeconds runs from SIGCONT to the describe that showed every
	// partition MIRRORING at lag 0 with a source offset read after SIGCONT.
	RecoverySeconds float64 `json:"recovery_seconds"`
	// VerifiedSeconds runs from the end of a produce of one more record into
	// every partition after the recovery to every partition MIRRORING with
	// its destination offset equal to the source's, which is then
	// 2 for every partition (Exact): nothing lost, nothing copied twice.
	VerifiedSeconds float64 `json:"verified_seconds"`
	Exact           bool    `json:"exact"`
	Error           string  `json:"error,omitempty"`
}

// runFlap freezes the source of a mirrored pair for cfg.FlapFreeze and
// measures what the destination does meanwhile and how it recovers. Every
// partition of topics (parts each) holds one record when it is called.
func runFlap(ctx context.Context, cfg *ScaleConfig, p *scalePair, topics []string, parts int, progress func(string, ...any)) (f ScaleFlap) {
	total := len(topics) * parts
	f.Partitions = total
	fail := func(err error) ScaleFlap {
		f.Error = err.Error()
		progress("link flap failed: %v", err)
		return f
	}
	logPath := filepath.Join(filepath.Dir(p.dst_.dir), p.dst_.name+".log")
	fetch0, err0 := scrapeFetches(ctx, p.dst_.metricsAddr)
	lines0, err1 := fileSize(logPath)
	if err0 != nil || err1 != nil {
		return fail(fmt.Errorf("bench: before the freeze: %v %v", err0, err1))
	}
	f.DestFDsBefore = p.dst_.fds()
	pid := p.src.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fail(fmt.Errorf("bench: SIGSTOP source: %w", err))
	}
	frozen := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer thaw()
	progress("source frozen for %s", cfg.FlapFreeze)
	select {
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(cfg.FlapFreeze):
	}
	// The outage as the destination shows it, before the source returns.
	c, err := describeCounts(ctx, p.dst, p.mirror, statemachine.Mirroring, nil)
	if err != nil {
		return fail(err)
	}
	f.OutageShown = c.unreachable
	f.DestFDsDuring = p.dst_.fds()
	fetch1, err0 := scrapeFetches(ctx, p.dst_.metricsAddr)
	lines1, err1 := fileSize(logPath)
	f.FreezeSeconds = time.Since(frozen).Seconds()
	thaw()
	t0 := time.Now()
	if err0 != nil || err1 != nil {
		return fail(fmt.Errorf("bench: end of the freeze: %v %v", err0, err1))
	}
	f.FetchesPerSecond = (fetch1.fetches - fetch0.fetches) / f.FreezeSeconds
	f.ErrorsPerSecond = (fetch1.errors - fetch0.errors) / f.FreezeSeconds
	n, most, msgs, err := countLines(logPath, lines0, lines1)
	if err != nil {
		return fail(err)
	}
	f.LogMessages = msgs
	f.LogLinesPerSecond, f.LogLinesMaxSecond = float64(n)/f.FreezeSeconds, most
	progress("freeze %.0fs: %.1f fetches/s (%.1f failed), %.1f log lines/s (at most %d in one second), %d of %d partitions show the outage, fds %d -> %d",
		f.FreezeSeconds, f.FetchesPerSecond, f.ErrorsPerSecond, f.LogLinesPerSecond, f.LogLinesMaxSecond, f.OutageShown, total, f.DestFDsBefore, f.DestFDsDuring)

	d, _, err := waitCountsFresh(ctx, p.dst, p.mirror, statemachine.Mirroring, nil, t0, cfg.Poll, t0, p.sampler.sample, progress,
		func(c partitionCounts) bool { return c.total == total && c.freshLagZero == total })
	if err != nil {
		return fail(err)
	}
	f.RecoverySeconds = d.Seconds()
	progress("link flap: every partition MIRRORING at lag 0 %.2fs after the source returned", f.RecoverySeconds)

	if err := produceOnePerPartition(ctx, p.srcCl, topics, parts); err != nil {
		return fail(err)
	}
	t1 := time.Now()
	d, last, err := waitCounts(ctx, p.dst, p.mirror, statemachine.Mirroring, nil, cfg.Poll, t1, p.sampler.sample, progress,
		func(c partitionCounts) bool { return c.total == total && (c.atTwo == total || c.overTwo > 0) })
	if err != nil {
		return fail(err)
	}
	f.VerifiedSeconds = d.Seconds()
	f.Exact = last.atTwo == total
	progress("link flap: one more record per partition mirrored in %.2fs; every partition holds exactly 2 offsets on both sites: %v", f.VerifiedSeconds, f.Exact)
	return f
}

// fetchCounts are the destination's fetch counters of one scrape.
type fetchCounts struct{ fetches, errors float64 }

// scrapeFetches reads the destination's Fetch round trips and failed
// fetches from its -metrics endpoint, summed over brokers.
func scrapeFetches(ctx context.Context, addr string) (fetchCounts, error) {
	var c fetchCounts
	if addr == "" {
		return c, fmt.Errorf("bench: the destination serves no metrics")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("bench: scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		_, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch name {
		case "kmirror_fetch_latency_seconds_count":
			c.fetches += v
		case "kmirror_fetch_request_errors_total":
			c.errors += v
		}
	}
	return c, sc.Err()
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// countLines counts the JSON log lines of path between the byte offsets from
// and to, the most of them logged within one second, and the lines by
// message.
func countLines(path string, from, to int64) (n, most int, msgs map[string]int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, from, to-from))
	if err != nil {
		return 0, 0, nil, err
	}
	perSecond := map[string]int{}
	msgs = map[string]int{}
	for line := range bytes.Lines(data) {
		n++
		var l struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(line, &l) == nil {
			msgs[l.Msg]++
		} else {
			msgs["(not JSON)"]++
		}
		// {"time":"2026-12-03T11:03:29.788144208Z",... : the second is the first 19 characters of the value
		if i := bytes.Index(line, []byte(`"time":"`)); i >= 0 && len(line) >= i+8+19 {
			sec := string(line[i+8 : i+8+19])
			perSecond[sec]++
			most = max(most, perSecond[sec])
		}
	}
	return n, most, msgs, nil
}
