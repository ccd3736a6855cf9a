package twosites

import (
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/internal/kafkatest"
)

// The disaster-recovery drills: real applications (Kafka's console consumer
// on both group protocols, kgo consumers, a kgo producer) run against a
// primary while a kmirrord site mirrors it with the group offsets; the
// primary is lost, the site fails over, and the same applications, with
// the same group ids, move to it. They must resume from the synced offsets,
// skip nothing, and read again at most what they processed after the last
// offset sync. Each group's figures are logged on a line starting with
// "drill:".

const (
	drillTopic      = "payments"
	drillPartitions = int32(3)
	drillWait       = 60 * time.Second // bound of every condition a drill waits on
)

// drillSiteFlags are the kmirrord flags of the drills' sites: a group's
// first rebalance does not wait for more members, and the offset sync does
// not wait after a start for members to rejoin (the drills know where their
// members are: a restarted site of theirs has none).
var drillSiteFlags = []string{"-group.initial.rebalance.delay.ms", "0", "-group.rejoin.grace.ms", "0"}

// drillKinds are the applications every drill runs, each with its group.
var drillKinds = []appKind{appConsoleClassic, appConsoleConsumer, appKgoGroup, appKgoAssign}

// TestDrillKafkaToSite is the first drill: the applications consume and
// produce on a real Kafka 4.4 cluster (private to the test, one broker) that
// a kmirrord site mirrors with the group offsets (synced every 500 ms). The
// cluster is stopped, the applications die with it; the site fails over
// (mirrorctl --stop --wait) and the same applications are pointed at it:
// the producer's writes are refused until the failover and land after the
// barrier once it is done; every group resumes from its synced offsets and
// processes every record of the site's log.
func TestDrillKafkaToSite(t *testing.T) {
	java(t) // the console consumers; skips, or fails with KMIRROR_REQUIRE_KAFKA=1, without a JDK or the jars
	kafka := kafkatest.StartPrivate(t, kafkatest.PrivateOptions{NoAuthorizer: true})
	kafkaAddr := kafka.Addr()
	kafkatest.CreateTopic(t, kafkatest.NewClient(t, kafka.Brokers()), drillTopic, drillPartitions, 1, nil)
	site := newSite(t, "DR", drillSiteFlags...)
	createDrillMirror(site, "kafka-to-dr", kafkaAddr)
	site.ctl("--start", "--mirror", "kafka-to-dr", "--topics", drillTopic)

	d := newDrill(t, drillTopic, drillPartitions, drillKinds)
	srcRun := d.producer.start(kafkaAddr)
	d.startApps("kafka", kafkaAddr)
	d.waitApps(drillWait, "50 records of each partition processed", func(_ *drillGroup, got []consumed) bool {
		return perPartition(drillPartitions, got, func(c consumed) bool { return c.O >= 50 })
	})
	d.step("on Kafka: 50 records of each partition processed")
	w := watchSync(t, kafkaAddr, site.addr, drillTopic, drillPartitions, d.groupNames())
	w.waitRounds(t, 2, drillWait)
	lastSync := w.halt()

	d.step("two group offset sync rounds seen")
	// The disaster: the cluster goes, with its applications.
	kafka.Kill()
	d.endApps(false)
	d.producer.halt()
	srcAcked := ackedIn(d.producer.attempts(), srcRun)

	// The producer moves to the site: refused while it mirrors.
	siteRun := d.producer.start(site.addr)
	d.producer.waitFor(drillWait, "refused by the mirror", func(as []produced) bool {
		n := 0
		for _, a := range as {
			if a.Run == siteRun && a.Err != nil {
				n++
			}
		}
		return n >= 3
	})
	d.step("writes refused by the mirror")
	stopAt := time.Now()
	site.ctl("--stop", "--wait", "--mirror", "kafka-to-dr", "--topics", drillTopic)
	barrier := barrierOffsets(t, site, drillTopic, drillPartitions)
	for _, g := range d.groups {
		g.phases[0].bound, g.phases[0].lostFrom = lastSync[g.group], barrier
	}

	d.step("failed over")
	// The same applications on the site.
	d.startApps("site", site.addr)
	d.producer.waitFor(drillWait, "writing to the site", func(as []produced) bool {
		return perPartitionProduced(drillPartitions, ackedIn(as, siteRun))
	})
	d.waitApps(drillWait, "records after the barrier processed", func(_ *drillGroup, got []consumed) bool {
		return perPartition(drillPartitions, got, func(c consumed) bool { return c.O > barrier[c.P] })
	})
	d.step("on the site: records after the barrier processed")
	d.producer.halt()
	truth := truthLog(t, site, drillTopic, drillPartitions)
	d.waitApps(drillWait, "every record of the site processed", func(_ *drillGroup, got []consumed) bool {
		return processedAll(got, truth)
	})
	d.step("on the site: every record processed")
	d.endApps(false)

	attempts := d.producer.attempts()
	checkFence(t, attempts, siteRun, stopAt, barrier, truth)
	lostAcks := 0
	for _, a := range srcAcked {
		if a.O >= barrier[a.P] {
			lostAcks++ // acknowledged by the cluster, never mirrored before it went
			continue
		}
		require.Equal(t, a.V, truth[a.P][a.O], "acknowledged write %s at partition %d offset %d", a.V, a.P, a.O)
	}
	t.Logf("drill: kafka-to-site: %d writes acknowledged by Kafka, %d of them after the mirrored end %v (lost with the cluster); %d acknowledged by the site after its failover",
		len(srcAcked), lostAcks, barrier, len(ackedIn(attempts, siteRun)))
	d.report("kafka-to-site", truth)
	site.term()
}

// perPartitionProduced reports whether every partition has an acknowledged write.
func perPartitionProduced(partitions int32, acked []produced) bool {
	seen := map[int32]bool{}
	for _, a := range acked {
		seen[a.P] = true
	}
	return len(seen) == int(partitions)
}

// processedAll reports whether got reaches the last record of every
// partition of truth.
func processedAll(got []consumed, truth map[int32]map[int64]string) bool {
	high := map[int32]int64{}
	for _, c := range got {
		if h, ok := high[c.P]; !ok || c.O > h {
			high[c.P] = c.O
		}
	}
	for p, tr := range truth {
		for o := range tr {
			if h, ok := high[p]; !ok || o > h {
				return false
			}
		}
	}
	return true
}

// TestDrillFailback is the second drill, between two kmirrord sites, with
// failback: site A is the primary with the applications, site B mirrors it
// with the group offsets. The link is cut (B pauses) while A goes on taking
// writes, then A is killed (kill -9) with its applications; B fails over and the applications move to B, where they consume and write.
// A restarts from its files and fails back: it mirrors B (B → A, truncating
// A's tail B never got, once the plan showed exactly those records), the
// applications stop on B in order, A's groups reach B's offsets, A stops its
// mirror, and the applications move back to A. No group skips a record;
// the unplanned failover reads again at most what was processed after the
// last sync the test saw, the planned failback nothing.
func TestDrillFailback(t *testing.T) {
	java(t)
	a := newSite(t, "A", drillSiteFlags...)
	b := newSite(t, "B", drillSiteFlags...)
	createTopic(t, a.addr, drillTopic, drillPartitions)
	createDrillMirror(b, "a-to-b", a.addr)
	b.ctl("--start", "--mirror", "a-to-b", "--topics", drillTopic)

	d := newDrill(t, drillTopic, drillPartitions, drillKinds)
	runA := d.producer.start(a.addr)
	d.startApps("A", a.addr)
	d.waitApps(drillWait, "50 records of each partition processed", func(_ *drillGroup, got []consumed) bool {
		return perPartition(drillPartitions, got, func(c consumed) bool { return c.O >= 50 })
	})
	d.step("on A: 50 records of each partition processed")
	w := watchSync(t, a.addr, b.addr, drillTopic, drillPartitions, d.groupNames())
	w.waitRounds(t, 2, drillWait)
	lastSync := w.halt()

	d.step("two group offset sync rounds seen")
	// The link to B is cut first (B pauses), so A takes writes, and its
	// applications read records, that B never gets; then A is lost with
	// its applications.
	b.ctl("--pause", "--wait", "--mirror", "a-to-b", "--topics", drillTopic)
	paused := map[int32]int64{}
	for _, p := range b.describe("a-to-b", drillTopic) {
		paused[p.Partition] = p.DestinationOffset
	}
	d.waitApps(drillWait, "records B never got processed", func(_ *drillGroup, got []consumed) bool {
		return perPartition(drillPartitions, got, func(c consumed) bool { return c.O >= paused[c.P]+5 })
	})
	d.step("on A: records B never got processed")
	a.kill9()
	d.endApps(false)
	d.producer.halt()
	aAcked := ackedIn(d.producer.attempts(), runA)

	// Failover to B.
	runB := d.producer.start(b.addr)
	waitRefused(t, d.producer, runB)
	d.step("writes refused by B")
	stopB := time.Now()
	b.ctl("--stop", "--wait", "--mirror", "a-to-b", "--topics", drillTopic)
	barrierB := barrierOffsets(t, b, drillTopic, drillPartitions)
	for _, g := range d.groups {
		g.phases[0].bound, g.phases[0].lostFrom = lastSync[g.group], barrierB
	}
	d.step("B failed over")
	d.startApps("B", b.addr)
	d.producer.waitFor(drillWait, "writing to B", func(as []produced) bool {
		return perPartitionProduced(drillPartitions, ackedIn(as, runB))
	})
	d.waitApps(drillWait, "records after B's barrier processed", func(_ *drillGroup, got []consumed) bool {
		return perPartition(drillPartitions, got, func(c consumed) bool { return c.O > barrierB[c.P] })
	})

	d.step("on B: records after the barrier processed")
	// Failback: A restarts and mirrors B. Its records B never got (after
	// B's barrier) are exactly what the plan says the start removes.
	a.start()
	aEnds := map[int32]int64{}
	for p := int32(0); p < drillPartitions; p++ {
		aEnds[p] = logEnd(t, rawLog(t, a.addr, drillTopic, p))
		require.Greater(t, aEnds[p], barrierB[p], "A partition %d: records after B's barrier", p)
	}
	createDrillMirror(a, "b-to-a", b.addr)
	start := []string{"--start", "--mirror", "b-to-a", "--topics", drillTopic}
	out, errOut, code := a.ctlCode(append(start, "--dry-run", "--output", "json")...)
	plan := drillPlan(t, out)
	tail := 0
	for p := int32(0); p < drillPartitions; p++ {
		n := aEnds[p] - barrierB[p]
		tail += int(n)
		if n > 0 {
			lw := plan[p].LocalWrites
			require.Equal(t, [3]int64{barrierB[p], aEnds[p], n}, [3]int64{lw.From, lw.To, lw.Records},
				"A partition %d: the records B never mirrored", p)
		}
	}
	// The drill means to drop them: they are the failover's loss.
	require.Equal(t, 1, code, "the start would remove %d records of A: stdout %s stderr %s", tail, out, errOut)
	a.ctl(append(start, "--allow-truncation")...)

	d.step("A restarted and mirrors B")
	// The planned switchover back: the applications stop on B (they commit
	// what they processed), the writes stop, A catches up with B's log and
	// its groups with B's offsets; then A stops its mirror.
	d.producer.halt()
	d.endApps(true)
	bEnds := map[int32]int64{}
	for p := int32(0); p < drillPartitions; p++ {
		bEnds[p] = logEnd(t, rawLog(t, b.addr, drillTopic, p))
	}
	a.waitPartitions("b-to-a", drillTopic, int(drillPartitions), fmt.Sprintf("caught up to %v", bEnds), func(p partitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == bEnds[p.Partition]
	})
	d.step("the applications stopped on B, A caught up")
	for _, g := range d.groups {
		onB := groupOffsets(t, b.addr, g.group, drillTopic, drillPartitions)
		waitGroupOffsets(t, a, g.group, onB)
		ph := &g.phases[len(g.phases)-1]
		ph.bound = onB
	}
	d.step("A's groups at B's offsets")
	runA2 := d.producer.start(a.addr)
	waitRefused(t, d.producer, runA2)
	d.step("writes refused by A")
	stopA := time.Now()
	a.ctl("--stop", "--wait", "--mirror", "b-to-a", "--topics", drillTopic)
	barrierA := barrierOffsets(t, a, drillTopic, drillPartitions)
	for p := int32(0); p < drillPartitions; p++ {
		require.Equal(t, bEnds[p], barrierA[p], "A partition %d: the failback barrier is after B's last record", p)
	}

	d.step("A failed back")
	// The applications back on A.
	d.startApps("A", a.addr)
	d.producer.waitFor(drillWait, "writing to A", func(as []produced) bool {
		return perPartitionProduced(drillPartitions, ackedIn(as, runA2))
	})
	d.waitApps(drillWait, "records after A's barrier processed", func(_ *drillGroup, got []consumed) bool {
		return perPartition(drillPartitions, got, func(c consumed) bool { return c.O > barrierA[c.P] })
	})
	d.step("on A: records after the barrier processed")
	d.producer.halt()
	truth := truthLog(t, a, drillTopic, drillPartitions)
	d.waitApps(drillWait, "every record of A processed", func(_ *drillGroup, got []consumed) bool {
		return processedAll(got, truth)
	})
	d.step("on A: every record processed")
	d.endApps(false)

	attempts := d.producer.attempts()
	checkFence(t, attempts, runB, stopB, barrierB, truth)
	checkFence(t, attempts, runA2, stopA, barrierA, truth)
	lost := 0
	for _, w := range aAcked {
		if w.O >= barrierB[w.P] {
			lost++ // acknowledged by A, never mirrored to B, removed by the failback
			continue
		}
		require.Equal(t, w.V, truth[w.P][w.O], "write %s acknowledged by A at partition %d offset %d", w.V, w.P, w.O)
	}
	require.Equal(t, tail, lost+unackedTail(t, aAcked, aEnds, barrierB), "A's removed tail")
	t.Logf("drill: failback: %d writes acknowledged by A, %d of them after B's barrier %v (removed by the failback: %d records); %d acknowledged by B, %d by A after the failback",
		len(aAcked), lost, barrierB, tail, len(ackedIn(attempts, runB)), len(ackedIn(attempts, runA2)))
	d.report("failback", truth)
	a.term()
	b.term()
}

// unackedTail counts the records of A's tail (after B's barrier) whose write
// the producer never saw acknowledged (in flight when A was killed).
func unackedTail(t testing.TB, acked []produced, aEnds, barrier map[int32]int64) int {
	t.Helper()
	n := 0
	for p, end := range aEnds {
		have := 0
		for _, w := range acked {
			if w.P == p && w.O >= barrier[p] {
				have++
			}
		}
		require.LessOrEqual(t, int64(have), end-barrier[p], "partition %d", p)
		n += int(end-barrier[p]) - have
	}
	return n
}

// waitRefused waits until the producer's run had three writes refused.
func waitRefused(t testing.TB, pa *producerApp, run int) {
	t.Helper()
	pa.waitFor(drillWait, "refused by the mirror", func(as []produced) bool {
		n := 0
		for _, a := range as {
			if a.Run == run && a.Err != nil {
				n++
			}
		}
		return n >= 3
	})
}

// waitGroupOffsets waits until group's committed offsets of the drill's
// topic on s are want.
func waitGroupOffsets(t testing.TB, s *site, group string, want map[int32]int64) {
	t.Helper()
	waitGroupOffsetsOf(t, s, group, drillTopic, want)
}

// waitGroupOffsetsOf waits until group's committed offsets of topic on s
// are want.
func waitGroupOffsetsOf(t testing.TB, s *site, group, topic string, want map[int32]int64) {
	t.Helper()
	deadline := time.Now().Add(drillWait)
	for {
		have := groupOffsets(t, s.addr, group, topic, int32(len(want)))
		if maps.Equal(have, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s on %s: offsets %v, not %v within %v", group, s.name, have, want, drillWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drillPlan decodes mirrorctl's JSON plan of the drill's topic by partition.
func drillPlan(t testing.TB, out string) map[int32]planRow {
	t.Helper()
	var po planOut
	require.NoError(t, json.Unmarshal([]byte(out), &po), out)
	require.Len(t, po.Topics, 1, out)
	require.Len(t, po.Topics[0].Plan, int(drillPartitions), out)
	by := map[int32]planRow{}
	for _, p := range po.Topics[0].Plan {
		by[p.Partition] = p
	}
	return by
}
