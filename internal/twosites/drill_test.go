package twosites

import (
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

// siteProtocolMissing names, by application, what the site lacks to serve
// it; the drills leave such an application out and say so.
var siteProtocolMissing = map[appKind]string{
	appConsoleConsumer: "the site serves no KIP-848 consumer group protocol (ConsumerGroupHeartbeat) yet: branch wt-kip848",
}

// drillKinds returns the applications a drill runs.
func drillKinds(t testing.TB) []appKind {
	var kinds []appKind
	for _, k := range []appKind{appConsoleClassic, appConsoleConsumer, appKgoGroup, appKgoAssign} {
		if why := siteProtocolMissing[k]; why != "" {
			t.Logf("drill: without %s: %s", k, why)
			continue
		}
		kinds = append(kinds, k)
	}
	return kinds
}

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
	site := newSite(t, "DR")
	createDrillMirror(site, "kafka-to-dr", kafkaAddr)
	site.ctl("--start", "--mirror", "kafka-to-dr", "--topics", drillTopic)

	d := newDrill(t, drillTopic, drillPartitions, drillKinds(t))
	srcRun := d.producer.start(kafkaAddr)
	d.startApps("kafka", kafkaAddr)
	d.waitApps(drillWait, "50 records of each partition processed", func(_ *drillGroup, got []consumed) bool {
		return perPartition(drillPartitions, got, func(c consumed) bool { return c.O >= 50 })
	})
	w := watchSync(t, kafkaAddr, site.addr, drillTopic, drillPartitions, d.groupNames())
	w.waitRounds(t, 2, drillWait)
	lastSync := w.halt()

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
	stopAt := time.Now()
	site.ctl("--stop", "--wait", "--mirror", "kafka-to-dr", "--topics", drillTopic)
	barrier := barrierOffsets(t, site, drillTopic, drillPartitions)
	for _, g := range d.groups {
		g.phases[0].bound, g.phases[0].lostFrom = lastSync[g.group], barrier
	}

	// The same applications on the site.
	d.startApps("site", site.addr)
	d.producer.waitFor(drillWait, "writing to the site", func(as []produced) bool {
		return perPartitionProduced(drillPartitions, ackedIn(as, siteRun))
	})
	d.waitApps(drillWait, "records after the barrier processed", func(_ *drillGroup, got []consumed) bool {
		return perPartition(drillPartitions, got, func(c consumed) bool { return c.O > barrier[c.P] })
	})
	d.producer.halt()
	truth := truthLog(t, site, drillTopic, drillPartitions)
	d.waitApps(drillWait, "every record of the site processed", func(_ *drillGroup, got []consumed) bool {
		return processedAll(got, truth)
	})
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
