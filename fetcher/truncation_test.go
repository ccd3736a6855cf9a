package fetcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// TestTruncationTraces runs the protocol traces in testdata/truncation/: a
// source log and a destination log, each a leader-epoch cache with a start
// and an end, and the loop's truncation decisions (truncation.go) between
// them. Answers are computed from the source the way a Kafka leader computes
// them (epoch.CheckFetch, Cache.EndOffsetFor), or given raw. Each decision is
// printed and then applied to the destination, as the loop applies it
// (without batches: a truncation cuts at the offset). Commands:
//
//	source start=S end=E          the source log; input lines "epoch startOffset"
//	dest [start=S] end=E          the destination log; input lines "epoch startOffset"
//	policy [probe=B] [stop=B]     the loop's OffsetForLeaderEpoch probing and StopOnDivergence
//	fetch                         one Fetch from the destination's end, answered by the source
//	probe                         OffsetForLeaderEpoch rounds until one cuts nothing
//	diverging epoch=N end=O       a raw DivergingEpoch answer
//	offsets-for-epoch epoch=N end=O  a raw OffsetForLeaderEpoch answer
//	out-of-range start=S end=E    a raw OFFSET_OUT_OF_RANGE, then ListOffsets start and end
//
// Regenerate with go test ./fetcher -run TestTruncationTraces -rewrite, then
// review the diff.
func TestTruncationTraces(t *testing.T) {
	datadriven.Walk(t, "testdata/truncation", func(t *testing.T, path string) {
		var tr trace
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return tr.run(t, d)
		})
	})
}

// traceLog is one side of a trace: a log without data, only its offsets and
// its leader-epoch cache.
type traceLog struct {
	start, end int64
	epochs     *epoch.Cache
}

func (l *traceLog) String() string {
	if l.epochs == nil {
		return "none"
	}
	return fmt.Sprintf("start=%d end=%d epochs=%v", l.start, l.end, l.epochs)
}

type trace struct {
	src, dst traceLog
	pol      policy
	stopped  bool
}

func (tr *trace) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "source", "dest":
		l := traceLog{start: argOffsetOr(t, d, "start", 0), end: argOffset(t, d, "end")}
		var entries []epoch.Entry
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			var e epoch.Entry
			if _, err := fmt.Sscanf(line, "%d %d", &e.Epoch, &e.StartOffset); err != nil {
				d.Fatalf(t, "bad epoch entry %q: %v", line, err)
			}
			entries = append(entries, e)
		}
		c, err := epoch.NewCache(entries...)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		l.epochs = c
		if d.Cmd == "source" {
			tr.src = l
		} else {
			tr.dst, tr.stopped = l, false
		}
		return d.Cmd + " " + l.String()
	case "policy":
		d.MaybeScanArgs(t, "probe", &tr.pol.probe)
		d.MaybeScanArgs(t, "stop", &tr.pol.stopOnDivergence)
		return fmt.Sprintf("probe=%v stop=%v", tr.pol.probe, tr.pol.stopOnDivergence)
	case "fetch":
		return tr.fetch()
	case "probe":
		return tr.probe()
	case "diverging":
		dv := epoch.Divergence{Epoch: int32(argOffset(t, d, "epoch")), EndOffset: argOffset(t, d, "end")}
		return tr.apply(decideDiverging(tr.local(), dv, tr.pol))
	case "offsets-for-epoch":
		dv := epoch.Divergence{Epoch: int32(argOffset(t, d, "epoch")), EndOffset: argOffset(t, d, "end")}
		return tr.apply(decideProbe(tr.local(), dv, tr.pol))
	case "out-of-range":
		start, end := argOffset(t, d, "start"), argOffset(t, d, "end")
		return tr.apply(decideOutOfRange(tr.local(), tr.dst.end, start, end, tr.pol))
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// argOffsetOr is the integer argument key, def when it is absent.
func argOffsetOr(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	if !d.HasArg(key) {
		return def
	}
	return argOffset(t, d, key)
}

// argOffset is the integer argument key, which must be given.
func argOffset(t *testing.T, d *datadriven.TestData, key string) int64 {
	var s string
	d.ScanArgs(t, key, &s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%s=%q: %v", key, s, err)
	}
	return n
}

func (tr *trace) local() localLog {
	return localLog{tp: TopicPartition{"t", 0}, end: tr.dst.end, epochs: tr.dst.epochs.Clone()}
}

// fetch is one Fetch from the destination's end with its latest epoch,
// answered by the source as a Kafka leader (LocalSource's rules): a
// DivergingEpoch, OFFSET_OUT_OF_RANGE (then ListOffsets), or data, which the
// destination appends up to the source's end.
func (tr *trace) fetch() string {
	if tr.stopped {
		return "stopped: no fetch"
	}
	off, lfe := tr.dst.end, tr.dst.epochs.LatestEpoch()
	head := fmt.Sprintf("Fetch offset=%d lastFetchedEpoch=%d -> ", off, lfe)
	dv, diverged, err := epoch.CheckFetch(tr.src.epochs, tr.src.start, tr.src.end, lfe, off)
	switch {
	case err == nil && diverged:
		return head + fmt.Sprintf("DivergingEpoch epoch=%d endOffset=%d\n", dv.Epoch, dv.EndOffset) +
			tr.apply(decideDiverging(tr.local(), dv, tr.pol))
	case err != nil || off < tr.src.start || off > tr.src.end:
		return head + fmt.Sprintf("OFFSET_OUT_OF_RANGE; ListOffsets start=%d end=%d\n", tr.src.start, tr.src.end) +
			tr.apply(decideOutOfRange(tr.local(), off, tr.src.start, tr.src.end, tr.pol))
	}
	for _, e := range tr.src.epochs.Entries() {
		if off < tr.src.end && e.StartOffset < tr.src.end {
			if next, ok := tr.src.nextStart(e.Epoch); !ok || next > off {
				tr.dst.epochs.Assign(e.Epoch, max(e.StartOffset, off))
			}
		}
	}
	from := tr.dst.end
	tr.dst.end = tr.src.end
	return head + fmt.Sprintf("data [%d, %d)\ndest %v", from, tr.src.end, &tr.dst)
}

// nextStart is the start offset of the epoch after e in l, false for none.
func (l *traceLog) nextStart(e int32) (int64, bool) {
	for _, x := range l.epochs.Entries() {
		if x.Epoch > e {
			return x.StartOffset, true
		}
	}
	return 0, false
}

// probe runs OffsetForLeaderEpoch rounds for the destination's latest epoch,
// answered by the source (Cache.EndOffsetFor), until a round cuts nothing or
// the partition stops.
func (tr *trace) probe() string {
	var b strings.Builder
	for round := 1; ; round++ {
		if tr.stopped {
			b.WriteString("stopped: no probe")
			return b.String()
		}
		le := tr.dst.epochs.LatestEpoch()
		if le == epoch.UndefinedEpoch {
			b.WriteString("no local epoch: fetch without a probe")
			return b.String()
		}
		if round > 20 {
			b.WriteString("error: the probe does not end")
			return b.String()
		}
		ep, end := tr.src.epochs.EndOffsetFor(le, tr.src.end)
		fmt.Fprintf(&b, "OffsetForLeaderEpoch epoch=%d -> epoch=%d endOffset=%d\n", le, ep, end)
		dec := decideProbe(tr.local(), epoch.Divergence{Epoch: ep, EndOffset: end}, tr.pol)
		b.WriteString(tr.apply(dec))
		if dec.cut == cutNone || dec.next != probeNow {
			return b.String()
		}
		b.WriteString("\n")
	}
}

// apply prints dec and applies it to the destination as Fetcher.carryOut does.
func (tr *trace) apply(dec decision) string {
	var b strings.Builder
	switch dec.cut {
	case cutNone:
		b.WriteString("keep the log")
	case cutTruncate:
		fmt.Fprintf(&b, "truncate to %d", dec.offset)
		if dec.offset < tr.dst.end {
			if dec.offset <= tr.dst.start {
				tr.dst.epochs.Clear()
				tr.dst.start = dec.offset
			}
			tr.dst.epochs.TruncateFromEnd(dec.offset)
			tr.dst.end = dec.offset
		}
	case cutStartAt:
		fmt.Fprintf(&b, "start the log at %d; lost [%d, %d), OnOutOfRange(fetchOffset=%d, sourceLogStart=%d, gap=%d)",
			dec.offset, dec.lostFrom, dec.offset, dec.fetchOffset, dec.offset, dec.offset-dec.lostFrom)
		tr.dst.epochs.Clear()
		tr.dst.start, tr.dst.end = dec.offset, dec.offset
	case cutFail:
		var ioe *InvalidOffsetError
		fmt.Fprintf(&b, "fail: %v (InvalidOffsetError %v, Is(ErrProtocol) %v)", dec.err, errors.As(dec.err, &ioe), errors.Is(dec.err, ErrProtocol))
		tr.stopped = true
		return b.String()
	}
	if dv := dec.diverged; dv != nil {
		fmt.Fprintf(&b, "; OnDivergence(epoch=%d endOffset=%d)", dv.Epoch, dv.EndOffset)
	}
	b.WriteString("; then " + map[next]string{
		fetchNow: "fetch", retryLater: "fetch after the backoff", probeNow: "probe",
		probeLater: "probe after the backoff", stopDiverged: "stop (DivergedError)",
	}[dec.next])
	if dec.next == stopDiverged {
		tr.stopped = true
	}
	fmt.Fprintf(&b, "\ndest %v", &tr.dst)
	return b.String()
}

// badDivergenceSource answers every fetch with a DivergingEpoch whose end
// offset no log has.
type badDivergenceSource struct{ Source }

func (s badDivergenceSource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	res, err := s.Source.Fetch(ctx, parts)
	for i := range res {
		res[i].ErrorCode, res[i].Records = CodeNone, nil
		res[i].DivergingEpoch = &epoch.Divergence{Epoch: epoch.UndefinedEpoch, EndOffset: -5}
	}
	return res, err
}

// TestFetcherFailsOnInvalidTruncationOffset: the loop carries out a failing
// decision: the partition stops with an *InvalidOffsetError and its log is
// not cut.
func TestFetcherFailsOnInvalidTruncationOffset(t *testing.T) {
	src := memLog(t, 0)
	appendAll(t, src, batch(t, 0, 0, 3, records.CompressionNone))
	local := NewLocalSource(ReadUncommitted)
	local.Add("t", records.UUID{}, 0, src)
	dst := memLog(t, 2)
	appendAll(t, dst, batch(t, 0, 0, 3, records.CompressionNone))
	ev := newRecorder()
	f, err := NewFetcher(badDivergenceSource{local}, Config{Events: ev})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: dst}))
	tp := TopicPartition{"t", 0}
	ev.waitUntil(t, waitLong, "failed", func() bool { return ev.failure(tp) != nil })
	var ioe *InvalidOffsetError
	require.ErrorAs(t, ev.failure(tp), &ioe)
	require.ErrorIs(t, ev.failure(tp), ErrProtocol)
	require.Equal(t, InvalidOffsetError{TopicPartition: tp, Op: "Fetch", Offset: -5}, *ioe)
	require.Equal(t, int64(3), dst.LogEndOffset(), "nothing cut")
	st := f.Status()
	require.Len(t, st, 1)
	require.ErrorIs(t, st[0].Err, ErrProtocol)
}
