package twosites

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/records"
)

// drillSyncInterval is the drills' group-offset sync period
// (mirror.metadata.refresh.interval.ms of their mirrors).
const drillSyncInterval = 500 * time.Millisecond

// createDrillMirror creates mirror name on s with the source at bootstrap
// and the drills' short metadata (and group offset) sync interval.
func createDrillMirror(s *site, name, bootstrap string) {
	s.t.Helper()
	file := filepath.Join(s.t.TempDir(), name+".properties")
	require.NoError(s.t, os.WriteFile(file, []byte(fmt.Sprintf("bootstrap.servers=%s\nfetch.wait.max.ms=100\n"+
		"mirror.metadata.refresh.interval.ms=%d\n", bootstrap, drillSyncInterval.Milliseconds())), 0o600))
	s.ctl("--create", "--mirror", name, "--mirror-config", file)
}

// drillGroup is one consumer application with its own group, followed
// through the phases of a drill (one process per phase, the same group).
type drillGroup struct {
	kind   appKind
	group  string
	app    *consumerApp // the running one
	phases []drillPhase
}

// drillPhase is what one run of an application processed, and where.
type drillPhase struct {
	site    string
	records []consumed
	// lostFrom is, by partition, the offset from which the records this
	// run read were lost in the failover that ended it (written on the old
	// primary, never mirrored); absent when the run's whole log survived.
	lostFrom map[int32]int64
	// resumeAt is, by partition, the group's committed offset on this
	// phase's cluster when the run started (-1: none); nil for the first
	// run.
	resumeAt map[int32]int64
	// bound is, by partition, the offset from which this run's records
	// may be read again by the next run: the last group offsets the test
	// saw synced before the failover (unplanned), or the offsets committed
	// at the graceful stop (planned).
	bound   map[int32]int64
	planned bool // the run ended in a planned switchover
}

// drill is the set of applications of one drill.
type drill struct {
	t          testing.TB
	topic      string
	partitions int32
	groups     []*drillGroup
	producer   *producerApp
	began      time.Time
	last       time.Time
}

// step logs how long the drill took to reach a point (where a run under
// load spends its time).
func (d *drill) step(what string) {
	now := time.Now()
	d.t.Logf("drill step: %s: %v (%v in all)", what, now.Sub(d.last).Round(time.Millisecond), now.Sub(d.began).Round(time.Millisecond))
	d.last = now
}

func newDrill(t testing.TB, topic string, partitions int32, kinds []appKind) *drill {
	d := &drill{t: t, topic: topic, partitions: partitions, producer: newProducerApp(t, topic, partitions),
		began: time.Now(), last: time.Now()}
	for _, k := range kinds {
		d.groups = append(d.groups, &drillGroup{kind: k, group: "drill-" + string(k)})
	}
	return d
}

func (d *drill) groupNames() []string {
	var out []string
	for _, g := range d.groups {
		out = append(out, g.group)
	}
	return out
}

// startApps starts every application against addr (the same code and
// group ids each time), recording the groups' committed offsets there.
func (d *drill) startApps(s string, addr string) {
	d.t.Helper()
	cl := kgoClient(d.t, addr, byName())
	for _, g := range d.groups {
		var resume map[int32]int64
		if len(g.phases) > 0 {
			var err error
			resume, err = fetchOffsets(context.Background(), cl, g.group, d.topic, d.partitions)
			require.NoError(d.t, err, "group %s on %s", g.group, s)
		}
		g.phases = append(g.phases, drillPhase{site: s, resumeAt: resume})
		g.app = startApp(d.t, g.kind, addr, d.topic, g.group, d.partitions)
	}
}

// endApps ends the running applications: SIGKILL (a crash of their site)
// or, planned, SIGTERM (they commit what they processed and leave).
func (d *drill) endApps(planned bool) {
	d.t.Helper()
	for _, g := range d.groups {
		if planned {
			g.app.term(30 * time.Second)
		} else {
			g.app.kill9()
		}
		ph := &g.phases[len(g.phases)-1]
		ph.records, ph.planned = g.app.records(), planned
		g.app = nil
	}
}

// waitApps waits until every running application's records satisfy ok.
func (d *drill) waitApps(timeout time.Duration, what string, ok func(g *drillGroup, got []consumed) bool) {
	d.t.Helper()
	for _, g := range d.groups {
		g.app.waitFor(timeout, what, func(got []consumed) bool { return ok(g, got) })
	}
}

// perPartition reports whether every partition has a record that satisfies ok.
func perPartition(partitions int32, got []consumed, ok func(consumed) bool) bool {
	seen := map[int32]bool{}
	for _, c := range got {
		if ok(c) {
			seen[c.P] = true
		}
	}
	return len(seen) == int(partitions)
}

// syncWatch follows a mirror's group offset sync while the applications
// run on the source: round after round, it reads the groups' committed
// offsets on the source, then waits until the destination holds at least
// those. The last completed round is the last sync the test has seen.
type syncWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	rounds  int
	last    map[string]map[int32]int64
	changed chan struct{}
}

func watchSync(t testing.TB, srcAddr, dstAddr, topic string, partitions int32, groups []string) *syncWatch {
	t.Helper()
	src, dst := kgoClient(t, srcAddr, byName()), kgoClient(t, dstAddr, byName())
	ctx, cancel := context.WithCancel(context.Background())
	w := &syncWatch{cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	t.Cleanup(func() { w.halt() })
	tick := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			want := map[string]map[int32]int64{}
			for _, g := range groups {
				offs, err := fetchOffsets(ctx, src, g, topic, partitions)
				if err != nil {
					break
				}
				for p, o := range offs {
					if o >= 0 {
						if want[g] == nil {
							want[g] = map[int32]int64{}
						}
						want[g][p] = o
					}
				}
			}
			if len(want) < len(groups) { // a group has not committed yet
				if !tick() {
					return
				}
				continue
			}
			for {
				held := true
				for g, offs := range want {
					have, err := fetchOffsets(ctx, dst, g, topic, partitions)
					if err != nil {
						held = false
						break
					}
					for p, o := range offs {
						held = held && have[p] >= o
					}
				}
				if held {
					break
				}
				if !tick() {
					return
				}
			}
			w.mu.Lock()
			w.rounds++
			w.last = want
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
		}
	}()
	return w
}

// waitRounds waits until n rounds completed.
func (w *syncWatch) waitRounds(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		r, ch := w.rounds, w.changed
		w.mu.Unlock()
		if r >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("group offset sync: %d of %d rounds seen within %v", r, n, timeout)
		}
	}
}

// halt stops the watch and returns the last round's offsets by group.
func (w *syncWatch) halt() map[string]map[int32]int64 {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// barrierOffsets returns, by partition, the offset of the last
// MIRROR_PID_RESET batch of s's topic: the failover barrier, the end of the
// mirrored records.
func barrierOffsets(t testing.TB, s *site, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		out[p] = -1
		for _, b := range batches(t, rawLog(t, s.addr, topic, p)) {
			if !b.Attributes().IsControl() {
				continue
			}
			ct, err := b.ControlType()
			require.NoError(t, err)
			if ct == records.ControlMirrorPIDReset {
				out[p] = b.BaseOffset()
			}
		}
		require.GreaterOrEqual(t, out[p], int64(0), "site %s partition %d: no MIRROR_PID_RESET barrier", s.name, p)
	}
	return out
}

// truthLog returns the data records of s's topic by partition and offset.
func truthLog(t testing.TB, s *site, topic string, partitions int32) map[int32]map[int64]string {
	t.Helper()
	out := map[int32]map[int64]string{}
	for p := int32(0); p < partitions; p++ {
		out[p] = map[int64]string{}
		for _, r := range dataRecords(t, rawLog(t, s.addr, topic, p)) {
			out[p][r.Offset] = r.Value
		}
	}
	return out
}

// checkFence checks the producer's writes to a site that was a mirror until
// its failover (stop issued at stopAt): every write answered before stopAt
// was refused as a write to a mirror partition (INVALID_TOPIC_EXCEPTION, the
// code clients see for READ_ONLY_TOPIC) and none landed; there was at least
// one; the acknowledged ones were answered after stopAt and sit after the
// barrier, the first of each partition right after it.
func checkFence(t testing.TB, attempts []produced, run int, stopAt time.Time, barrier map[int32]int64, truth map[int32]map[int64]string) {
	t.Helper()
	refused := 0
	first := map[int32]int64{}
	values := map[string]bool{}
	for _, tr := range truth {
		for _, v := range tr {
			values[v] = true
		}
	}
	for _, a := range attempts {
		if a.Run != run {
			continue
		}
		if a.Err != nil {
			if errors.Is(a.Err, context.Canceled) || errors.Is(a.Err, kgo.ErrClientClosed) {
				continue // abandoned by halt
			}
			require.ErrorIs(t, a.Err, kerr.InvalidTopicException, "write %s to partition %d of %s", a.V, a.P, a.Addr)
			require.False(t, values[a.V], "refused write %s is in the log", a.V)
			refused++
			continue
		}
		require.True(t, a.At.After(stopAt), "write %s to partition %d acknowledged at offset %d before the failover", a.V, a.P, a.O)
		require.Greater(t, a.O, barrier[a.P], "write %s to partition %d", a.V, a.P)
		require.Equal(t, a.V, truth[a.P][a.O], "write %s to partition %d at %d", a.V, a.P, a.O)
		if _, ok := first[a.P]; !ok {
			first[a.P] = a.O
			require.Equal(t, barrier[a.P]+1, a.O, "partition %d: the first write after the barrier", a.P)
		}
	}
	require.NotZero(t, refused, "no write of run %d was refused before its failover", run)
}

// drillReport is what check found for one group.
type drillReport struct {
	dups      int   // records processed more than once
	byPhase   []int // duplicates explained by each switchover
	lost      int   // records processed from a log tail lost in a failover
	processed int
}

// check verifies one group across its phases against the final log:
// every record of it was processed (none skipped), each run after the
// first began at the group's committed offset, every duplicate is a record
// the previous run processed at or after the next run's start offset, and
// there are no more of those than the previous run processed from its
// bound (the last sync the test saw; none after a planned switchover).
func (d *drill) check(g *drillGroup, truth map[int32]map[int64]string) drillReport {
	t := d.t
	t.Helper()
	var rep drillReport
	seen := map[int32]map[int64]int{}
	for p := int32(0); p < d.partitions; p++ {
		seen[p] = map[int64]int{}
	}
	for i, ph := range g.phases {
		if i > 0 {
			// The run resumed at the group's committed offsets.
			firsts := map[int32]int64{}
			for _, c := range ph.records {
				if _, ok := firsts[c.P]; !ok {
					firsts[c.P] = c.O
				}
			}
			for p := int32(0); p < d.partitions; p++ {
				at, ok := ph.resumeAt[p]
				require.True(t, ok && at >= 0, "group %s on %s: no committed offset for partition %d", g.group, ph.site, p)
				want := int64(-1)
				for o := range truth[p] {
					if o >= at && (want < 0 || o < want) {
						want = o
					}
				}
				if want >= 0 {
					require.Equal(t, want, firsts[p], "group %s (%s) on %s partition %d: first record after the switchover (committed offset %d)",
						g.group, g.kind, ph.site, p, at)
				}
				prev := g.phases[i-1]
				b, ok := prev.bound[p]
				require.True(t, ok, "group %s: no bound for partition %d", g.group, p)
				require.GreaterOrEqual(t, at, b, "group %s partition %d: the committed offset on %s is below the last one seen synced", g.group, p, ph.site)
			}
		}
		for _, c := range ph.records {
			if lf, ok := ph.lostFrom[c.P]; ok && c.O >= lf {
				rep.lost++ // read on the old primary, gone with it
				continue
			}
			v, ok := truth[c.P][c.O]
			require.True(t, ok, "group %s on %s processed partition %d offset %d (%q), not in the log", g.group, ph.site, c.P, c.O, c.V)
			require.Equal(t, v, c.V, "group %s on %s partition %d offset %d", g.group, ph.site, c.P, c.O)
			seen[c.P][c.O]++
			rep.processed++
		}
	}
	// None skipped.
	for p, tr := range truth {
		var missing []int64
		for o := range tr {
			if seen[p][o] == 0 {
				missing = append(missing, o)
			}
		}
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		require.Empty(t, missing, "group %s (%s): partition %d records never processed", g.group, g.kind, p)
		for _, n := range seen[p] {
			rep.dups += n - 1
		}
	}
	// Every duplicate is explained by one switchover, within its bound.
	explained := 0
	for i := 0; i+1 < len(g.phases); i++ {
		prev, next := g.phases[i], g.phases[i+1]
		again, bound := 0, 0
		for _, c := range prev.records {
			if lf, ok := prev.lostFrom[c.P]; ok && c.O >= lf {
				continue
			}
			if c.O >= next.resumeAt[c.P] {
				again++
			}
			if c.O >= prev.bound[c.P] {
				bound++
			}
		}
		if prev.planned {
			bound = 0
		}
		require.LessOrEqual(t, again, bound, "group %s (%s): %s → %s: records read again", g.group, g.kind, prev.site, next.site)
		rep.byPhase = append(rep.byPhase, again)
		explained += again
	}
	require.Equal(t, explained, rep.dups, "group %s (%s): duplicates not explained by a switchover", g.group, g.kind)
	return rep
}

// report checks every group and logs its figures, one line per group that
// starts with "drill:".
func (d *drill) report(name string, truth map[int32]map[int64]string) {
	d.t.Helper()
	for _, g := range d.groups {
		rep := d.check(g, truth)
		var sites []string
		for _, ph := range g.phases {
			sites = append(sites, ph.site)
		}
		d.t.Logf("drill: %s: group %s (%s) on %s: %d records processed, %d duplicates (by switchover %v), 0 skipped, %d read from a lost tail",
			name, g.group, g.kind, strings.Join(sites, "→"), rep.processed, rep.dups, rep.byPhase, rep.lost)
	}
}

// ackedIn returns the producer's acknowledged writes of one run.
func ackedIn(attempts []produced, run int) []produced {
	var out []produced
	for _, a := range attempts {
		if a.Run == run && a.Err == nil {
			out = append(out, a)
		}
	}
	return out
}

// groupOffsets returns the group's committed offsets on addr.
func groupOffsets(t testing.TB, addr, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	cl := kgoClient(t, addr, byName())
	offs, err := fetchOffsets(context.Background(), cl, group, topic, partitions)
	require.NoError(t, err)
	return offs
}
