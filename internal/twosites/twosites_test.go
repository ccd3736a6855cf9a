package twosites

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
)

const (
	topic      = "orders"
	partitions = int32(2)
)

// byPartition returns the data records of every partition of a site.
func byPartition(t *testing.T, s *site) (raw map[int32][]byte, recs map[int32][]rec, want map[int32]int) {
	t.Helper()
	raw, recs, want = map[int32][]byte{}, map[int32][]rec{}, map[int32]int{}
	for p := int32(0); p < partitions; p++ {
		raw[p] = rawLog(t, s.addr, topic, p)
		recs[p] = dataRecords(t, raw[p])
		want[p] = len(recs[p])
	}
	return raw, recs, want
}

// sameBytes requires both sites to serve identical bytes for every
// partition.
func sameBytes(t *testing.T, a, b *site) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		ra, rb := rawLog(t, a.addr, topic, p), rawLog(t, b.addr, topic, p)
		require.NotEmpty(t, ra)
		require.True(t, string(ra) == string(rb), "partition %d: %s holds %d bytes to offset %d, %s %d bytes to offset %d",
			p, a.name, len(ra), logEnd(t, ra), b.name, len(rb), logEnd(t, rb))
	}
}

// caughtUp waits until mirror name on dst is MIRRORING with the source's log
// end for every partition.
func caughtUp(t *testing.T, dst *site, name string, src *site) {
	t.Helper()
	ends := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		ends[p] = logEnd(t, rawLog(t, src.addr, topic, p))
	}
	dst.waitPartitions(name, topic, int(partitions), fmt.Sprintf("caught up to %v", ends), func(p partitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == ends[p.Partition]
	})
}

// lastBarrier returns the base offset of a partition's last batch, which
// must be MIRROR_PID_RESET.
func lastBarrier(t *testing.T, s *site, p int32) int64 {
	t.Helper()
	bs := batches(t, rawLog(t, s.addr, topic, p))
	require.NotEmpty(t, bs)
	last := bs[len(bs)-1]
	ct, err := last.ControlType()
	require.NoError(t, err)
	require.Equal(t, records.ControlMirrorPIDReset, ct, "site %s partition %d: last batch", s.name, p)
	return last.BaseOffset()
}

// requireReadOnly checks that a produce to every partition of s is refused
// with READ_ONLY_TOPIC (raw Produce and sarama) and appends nothing.
func requireReadOnly(t *testing.T, s *site) {
	t.Helper()
	before := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		before[p] = logEnd(t, rawLog(t, s.addr, topic, p))
	}
	for p, code := range produceRaw(t, s.addr, topic, partitions) {
		require.Equal(t, int16(admin.CodeReadOnlyTopic), code, "site %s partition %d", s.name, p)
	}
	err := produceSarama(t, s.addr, topic, 0)
	var ke sarama.KError
	require.True(t, errors.As(err, &ke), "sarama produce to read-only %s: %v", s.name, err)
	require.Equal(t, sarama.KError(admin.CodeReadOnlyTopic), ke)
	for p := int32(0); p < partitions; p++ {
		require.Equal(t, before[p], logEnd(t, rawLog(t, s.addr, topic, p)), "site %s partition %d grew", s.name, p)
	}
}

// requireClientsSeeSource checks that kgo, sarama and (cycle 1, when Java is
// there) kafka-console-consumer read dst and get src's records at src's
// offsets.
func requireClientsSeeSource(t *testing.T, dst, src *site, console bool) {
	t.Helper()
	_, truth, want := byPartition(t, src)
	require.Equal(t, truth, readKgo(t, dst.addr, topic, want), "kgo on %s", dst.name)
	require.Equal(t, truth, readSarama(t, dst.addr, topic, want), "sarama on %s", dst.name)
	if console {
		t.Run("kafka-console-consumer", func(t *testing.T) {
			require.Equal(t, truth[0], consoleConsume(t, dst.addr, topic, want[0]))
		})
	}
}

// TestFailoverFailback runs two full disaster-recovery cycles between two
// kmirrord processes: B mirrors A over TCP, clients read B, B refuses
// writes; A is cut off (B pauses), takes writes B never sees and is killed
// with SIGKILL; B fails over (mirrorctl --stop) and takes writes after its
// barrier; A restarts from its files and fails back from B (LME lookup on
// B, then DivergingEpoch truncates A's unmirrored tail to B's barrier); A and
// B then serve identical bytes; A stops its mirror and is the primary again.
func TestFailoverFailback(t *testing.T) {
	a, b := newSite(t, "A"), newSite(t, "B")
	createTopic(t, a.addr, topic, partitions)
	for cycle := 1; cycle <= 2; cycle++ {
		t.Logf("cycle %d", cycle)
		mirrorAtoB(t, a, b, cycle)
		st := failover(t, a, b, cycle)
		failback(t, a, b, cycle, st)
	}
	a.term()
	b.term()
}

// mirrorAtoB: A takes writes; B mirrors A; clients read B; B is read-only.
func mirrorAtoB(t *testing.T, a, b *site, cycle int) {
	t.Helper()
	produceKgo(t, a.addr, topic, partitions, 20, fmt.Sprintf("a%d", cycle))
	if cycle == 1 {
		b.createMirror("a-to-b", a)
		t.Run("kafka-console-producer", func(t *testing.T) {
			consoleProduce(t, a.addr, topic, []string{"ck1:console-1", "ck2:console-2", "ck3:console-3"})
		})
	}
	mark := b.mark()
	b.ctl("--start", "--mirror", "a-to-b", "--topics", topic)
	produceKgo(t, a.addr, topic, partitions, 10, fmt.Sprintf("a%d-live", cycle))
	caughtUp(t, b, "a-to-b", a)
	sameBytes(t, a, b)
	if cycle > 1 {
		// B restarted a-to-b from STOPPED: PREPARING looked up its LME on A.
		require.NotEmpty(t, b.logs(mark, func(l logLine) bool { return l.str("msg") == "mirror: LME truncation" }))
	}
	requireClientsSeeSource(t, b, a, cycle == 1)
	requireReadOnly(t, b)
}

// failover: B stops mirroring A after A was cut off and killed.
func failover(t *testing.T, a, b *site, cycle int) failbackState {
	t.Helper()
	b.ctl("--pause", "--mirror", "a-to-b", "--topics", topic)
	b.waitState("a-to-b", topic, int(partitions), "PAUSED")
	produceKgo(t, a.addr, topic, partitions, 7, fmt.Sprintf("a%d-lost", cycle))
	aEnds := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		aEnds[p] = logEnd(t, rawLog(t, a.addr, topic, p))
	}
	a.kill9()

	b.ctl("--stop", "--mirror", "a-to-b", "--topics", topic)
	b.waitState("a-to-b", topic, int(partitions), "STOPPED")
	barriers := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		barriers[p] = lastBarrier(t, b, p)
		require.Less(t, barriers[p], aEnds[p], "B partition %d holds A's unmirrored tail", p)
	}
	offs := produceKgo(t, b.addr, topic, partitions, 5, fmt.Sprintf("b%d", cycle))
	for p, o := range offs {
		require.Equal(t, barriers[p]+1, o[0], "B partition %d: first write after the barrier", p)
	}

	a.start()
	for p := int32(0); p < partitions; p++ {
		require.Equal(t, aEnds[p], logEnd(t, rawLog(t, a.addr, topic, p)), "A partition %d after kill -9 and restart", p)
	}
	return failbackState{aEnds: aEnds, barriers: barriers, lme: b.describe("a-to-b", topic)}
}

// failbackState is what failover saw: A's log ends when it was killed, B's
// barriers and B's partitions (with their LME).
type failbackState struct {
	aEnds, barriers map[int32]int64
	lme             []partitionDesc
}

// failback: A mirrors B back, truncating its unmirrored tail, then stops.
func failback(t *testing.T, a, b *site, cycle int, st failbackState) {
	t.Helper()
	if cycle == 1 {
		a.createMirror("b-to-a", b)
	}
	// The plan names A's unmirrored tail, cut at B's barrier by the first fetch: records
	// written on A, so the start is refused until --allow-truncation.
	start := []string{"--start", "--mirror", "b-to-a", "--topics", topic}
	out, _, code := a.ctlCode(append(start, "--dry-run", "--output", "json")...)
	require.Equal(t, 1, code, out)
	_, plan := onePlan(t, out)
	for p := int32(0); p < partitions; p++ {
		require.Equal(t, st.barriers[p], plan[p].DivergenceOffset, "A partition %d: planned cut at B's barrier", p)
		require.Equal(t, [3]int64{st.barriers[p], st.aEnds[p], 7}, [3]int64{plan[p].LocalWrites.From, plan[p].LocalWrites.To, plan[p].LocalWrites.Records},
			"A partition %d: the 7 records B never got", p)
	}
	mark := a.mark()
	a.ctl(append(start, "--allow-truncation")...)
	caughtUp(t, a, "b-to-a", b)
	sameBytes(t, a, b)

	lmeOf := map[int32]int32{}
	for _, p := range st.lme {
		lmeOf[p.Partition] = p.LastMirrorEpoch
	}
	for p := int32(0); p < partitions; p++ {
		lt := a.logs(mark, func(l logLine) bool {
			return l.str("msg") == "mirror: LME truncation" && l.num("partition") == int64(p) && l.str("mirror") == "b-to-a"
		})
		require.NotEmpty(t, lt, "A partition %d: no LME truncation", p)
		require.Equal(t, int64(lmeOf[p]), lt[0].num("lme"), "A partition %d: LME looked up on B", p)
		// A's unmirrored tail is in the LME epoch: the LME step keeps it and
		// the first fetch's DivergingEpoch cuts it at B's barrier.
		require.Equal(t, st.aEnds[p], lt[0].num("offset"), "A partition %d: LME truncation offset", p)
		dv := a.logs(mark, func(l logLine) bool {
			return l.str("msg") == "diverging epoch from source; truncated" && l.str("partition") == fmt.Sprintf("%s-%d", topic, p)
		})
		require.NotEmpty(t, dv, "A partition %d: no DivergingEpoch", p)
		require.Equal(t, st.aEnds[p], dv[0].num("from"), "A partition %d", p)
		require.Equal(t, st.barriers[p], dv[0].num("to"), "A partition %d: truncated to B's barrier", p)
	}
	requireReadOnly(t, a)

	a.ctl("--stop", "--mirror", "b-to-a", "--topics", topic)
	a.waitState("b-to-a", topic, int(partitions), "STOPPED")
	offs := produceKgo(t, a.addr, topic, partitions, 3, fmt.Sprintf("a%d-back", cycle))
	for p, o := range offs {
		require.Greater(t, o[0], st.barriers[p], "A partition %d writes after failback", p)
	}
}

// TestChained: C mirrors B while B mirrors A; all three serve A's bytes.
func TestChained(t *testing.T) {
	a, b, c := newSite(t, "A"), newSite(t, "B"), newSite(t, "C")
	createTopic(t, a.addr, topic, partitions)
	produceKgo(t, a.addr, topic, partitions, 15, "first")
	b.createMirror("a-to-b", a)
	b.ctl("--start", "--mirror", "a-to-b", "--topics", topic)
	c.createMirror("b-to-c", b)
	c.ctl("--start", "--mirror", "b-to-c", "--topics", topic)
	produceKgo(t, a.addr, topic, partitions, 15, "second")
	caughtUp(t, b, "a-to-b", a)
	caughtUp(t, c, "b-to-c", b)
	sameBytes(t, a, b)
	sameBytes(t, a, c)
	_, truth, want := byPartition(t, a)
	require.Equal(t, truth, readKgo(t, c.addr, topic, want))
	requireReadOnly(t, c)
	for _, s := range []*site{c, b, a} {
		s.term()
	}
}
