package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkatest"
)

// TestLeaderFailover stops the source partition's leader while kmirror mirrors it and a
// producer keeps writing: the fetcher follows the new leader (a higher source leader epoch)
// and nothing is lost or duplicated — the FileLog ends byte-identical to the new leader, its
// log end equals the source high watermark and it holds every acknowledged record once.
func TestLeaderFailover(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterA(t)
	admin := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	info := kafkatest.CreateTopic(t, admin, topic, 1, 3, nil)
	before := info.Partitions[0]
	cl := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	produce(t, cl, topic, 0, "before", 2000, 50)

	tp := fetcher.TopicPartition{Topic: topic}
	// Small fetches: the mirror needs many round trips, so the leader stops mid-mirror.
	m := startMirror(t, brokers, []fetcher.TopicPartition{tp}, mirrorOptions{PartitionMaxBytes: 4 << 10})
	log := m.logs[tp]
	waitFor(t, waitTimeout, "the mirror to start", func() (bool, string) {
		return log.LogEndOffset() > 0, fmt.Sprintf("log end %d", log.LogEndOffset())
	})

	// Keep producing while the leader goes away. The producer is stopped between two
	// records, never by cancelling a send, so every record it counts was acknowledged and
	// every record it sent is counted.
	stop := make(chan struct{})
	acked := make(chan int, 1)
	go func() {
		n := 0
		defer func() { acked <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "during-%d", i), Value: []byte("during")}).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce during the failover: %v", err)
				return
			}
			n++
		}
	}()

	stopAt := log.LogEndOffset()
	kafkatest.StopBroker(t, kafkatest.A, before.Leader)
	after := kafkatest.WaitForNewLeader(t, admin, topic, 0, before.Leader, before.LeaderEpoch)
	t.Logf("stopped leader %d (epoch %d) with the mirror at offset %d; new leader %v", before.Leader, before.LeaderEpoch, stopAt, after)
	produce(t, cl, topic, 0, "after", 500, 50)
	close(stop)
	during := <-acked

	src := m.waitCaughtUp(t, admin)[tp]
	require.Equal(t, after.Leader, src.Leader, "the oracle reads the new leader")
	dst := readLog(t, log)
	requireSameBatches(t, tp.String(), src.Batches, dst)
	st := statsOf(dst)
	require.Equal(t, 2000+500+during, st.Records, "every acknowledged record exactly once (%d produced during the failover)", during)
	require.Equal(t, src.HighWatermark, log.LogEndOffset())
	epochs := log.Epochs().Entries()
	t.Logf("mirror: %v; epochs %v; source high watermark %d; %d records acknowledged during the failover",
		st, epochs, src.HighWatermark, during)
	require.GreaterOrEqual(t, len(epochs), 2, "batches of both leader epochs were mirrored")
	require.Equal(t, after.LeaderEpoch, epochs[len(epochs)-1].Epoch)
	for _, s := range m.f.Status() {
		require.Equal(t, after.LeaderEpoch, s.SourceLeaderEpoch, "the fetcher follows the new leader epoch")
	}
	_, problems := m.events.snapshot()
	require.Empty(t, problems)
}

// TestUncleanLeaderElection makes source partition replicas disagree: replica F lags (stopped),
// the leader L takes more writes that kmirror mirrors, L stops, F comes back and is elected
// uncleanly, and F takes other writes at the same offsets in a new leader epoch. Kafka then
// answers kmirror's fetch (LastFetchedEpoch = L's epoch) with a DivergingEpoch; kmirror
// truncates the records only L had (Events.OnDivergence) and converges, byte for byte, to F.
func TestUncleanLeaderElection(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterA(t)
	admin := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	const leader, follower = int32(2), int32(3)
	info := createTopicAssigned(t, admin, topic, [][]int32{{leader, follower}},
		map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
	e0 := info.Partitions[0]
	require.Equal(t, leader, e0.Leader)
	cl := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, cl, topic, 0, "both", 100, 50)

	tp := fetcher.TopicPartition{Topic: topic}
	m := startMirror(t, brokers, []fetcher.TopicPartition{tp}, mirrorOptions{})
	log := m.logs[tp]
	m.waitCaughtUp(t, admin)

	// F lags: stop it and write to L alone.
	kafkatest.StopBroker(t, kafkatest.A, follower)
	kafkatest.WaitTopic(t, admin, topic, "ISR without the stopped follower", func(ti kafkatest.TopicInfo) bool {
		return slices.Equal(ti.Partitions[0].ISR, []int32{leader})
	})
	produce(t, cl, topic, 0, "leader-only", 150, 50)
	m.waitCaughtUp(t, admin)
	onlyL := log.LogEndOffset()
	require.EqualValues(t, 250, onlyL)

	// L goes away; F comes back and is elected although it is not in the ISR.
	kafkatest.StopBroker(t, kafkatest.A, leader)
	startNodeNoWait(t, follower)
	// The controller elects F by itself (unclean.leader.election.enable=true on the topic,
	// checked every unclean.leader.election.interval.ms = 1 s); ask for it explicitly when that
	// has not happened within 15 s.
	e1, how := waitUncleanLeader(t, admin, topic, follower, 15*time.Second)
	t.Logf("unclean election (%s): %v -> %v", how, e0, e1)
	// A new producer: the old one's idempotence state (sequence numbers) died with L's log.
	fresh := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, fresh, topic, 0, "new-leader", 120, 40)

	src := m.waitCaughtUp(t, admin)[tp]
	require.Equal(t, follower, src.Leader)
	require.EqualValues(t, 100+120, src.HighWatermark)
	requireSameBatches(t, tp.String(), src.Batches, readLog(t, log))
	divs, problems := m.events.snapshot()
	require.Empty(t, problems)
	require.NotEmpty(t, divs, "kmirror must have seen the divergence")
	t.Logf("divergences: %+v; epochs now %v", divs, log.Epochs().Entries())
	require.Equal(t, e0.LeaderEpoch, divs[0].D.Epoch, "the source names the old leader's epoch")
	require.EqualValues(t, 100, divs[0].D.EndOffset, "which ends where the new leader's log diverges")
	require.EqualValues(t, 100, divs[0].TruncatedTo)
	require.Equal(t, e1.LeaderEpoch, log.LatestEpoch())
}

// waitUncleanLeader waits up to auto for the controller to elect node as the partition's
// leader on its own, then runs an unclean ElectLeaders and waits for its outcome.
func waitUncleanLeader(t *testing.T, admin *kgo.Client, topic string, node int32, auto time.Duration) (kafkatest.PartitionInfo, string) {
	t.Helper()
	deadline := time.Now().Add(auto)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ti, err := kafkatest.DescribeTopic(ctx, admin, topic)
		cancel()
		if err == nil && ti.Partitions[0].Leader == node {
			return ti.Partitions[0], "automatic"
		}
		<-tick.C
	}
	p := kafkatest.ElectLeaders(t, admin, topic, 0, kafkatest.ElectUnclean)
	require.Equal(t, node, p.Leader, "unclean ElectLeaders chose another replica: %v", p)
	return p, "ElectLeaders UNCLEAN"
}

// startNodeNoWait starts node id of cluster A again while another node of A is down.
// kafkatest.StartBroker cannot: kafka.sh start-node waits until every node of the cluster
// answers, which never happens then. The script is run with a 5 s readiness timeout (its
// failure to see the whole cluster is expected and ignored; the node keeps running), then the
// test waits until the node is registered in the cluster's metadata.
func startNodeNoWait(t *testing.T, id int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", kafkatest.Script(t), "start-node", "a", fmt.Sprint(id))
	cmd.Env = append(os.Environ(), "KMIRROR_KAFKA_START_TIMEOUT=5")
	out, err := cmd.CombinedOutput()
	t.Logf("kafka.sh start-node a %d (readiness of the whole cluster not expected): %v, %d bytes of output", id, err, len(out))
	// Ask the restarted node itself: it answers once it has caught up with the metadata log.
	cl := kafkatest.NewClient(t, []string{kafkatest.ClusterA(t)[id-1]})
	waitFor(t, waitTimeout, fmt.Sprintf("node %d to register", id), func() (bool, string) {
		mctx, mcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer mcancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(mctx, cl)
		if err != nil {
			return false, err.Error()
		}
		for _, b := range resp.Brokers {
			if b.NodeID == id {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d brokers listed", len(resp.Brokers))
	})
}
