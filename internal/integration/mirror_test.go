package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkatest"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// codecs are the batch compressions kgo can produce, by name.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
	want  records.Compression
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

// TestMirrorByteExact mirrors three kinds of partitions of cluster A into FileLogs with
// fetcher.KafkaSource and fetcher.Fetcher — batches of every codec from five producers,
// committed and aborted transactions mixed with plain batches, and a compacted partition
// rewritten by Kafka's log cleaner (offset gaps, batches with the delete-horizon bit, empty
// batches kept for producer state) — and checks that each FileLog holds exactly the leader's
// batches, byte for byte. It then persists the mirror state (states and LMEs of the mirrored
// partitions) on cluster B's compacted __mirror_state with coordinator.KafkaStore and reloads
// it in a new owner.
func TestMirrorByteExact(t *testing.T) {
	kafkatest.RequireCI(t)
	brokersA := kafkatest.ClusterA(t)
	brokersB := kafkatest.ClusterB(t)
	admin := kafkatest.NewClient(t, brokersA)
	base := kafkatest.TopicName(t)

	// 1. Codecs: three partitions, five producers, three rounds each.
	codecTopic := base + "-codecs"
	codecInfo := kafkatest.CreateTopic(t, admin, codecTopic, 3, 3, nil)
	for _, c := range codecs {
		cl := kafkatest.NewClient(t, brokersA, kgo.ProducerBatchCompression(c.codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for round := range 3 {
			for p := range int32(3) {
				produce(t, cl, codecTopic, p, fmt.Sprintf("%s-r%d", c.name, round), 40, 40)
			}
		}
	}

	// 2. Transactions: committed and aborted, with plain batches in between.
	txnTopic := base + "-txn"
	txnInfo := kafkatest.CreateTopic(t, admin, txnTopic, 1, 3, nil)
	txnCl := kafkatest.NewClient(t, brokersA, kgo.TransactionalID(txnTopic+"-producer"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	plainCl := kafkatest.NewClient(t, brokersA, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for i, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		require.NoError(t, txnCl.BeginTransaction())
		for j := range 3 {
			produce(t, txnCl, txnTopic, 0, fmt.Sprintf("txn%d-%d", i, j), 25, 25)
		}
		require.NoError(t, txnCl.EndTransaction(ctx, commit))
		produce(t, plainCl, txnTopic, 0, fmt.Sprintf("plain%d", i), 10, 10)
	}
	// EndTransaction returns before the markers are written: wait for the last stable offset
	// to reach the high watermark and the expected marker count.
	waitFor(t, waitTimeout, "transaction markers", func() (bool, string) {
		sp, err := tryReadSource(admin, txnTopic, 0)
		if err != nil {
			return false, err.Error()
		}
		st := statsOf(sp.Batches)
		return st.Control == 5 && sp.LastStable == sp.HighWatermark,
			fmt.Sprintf("%d markers, last stable %d, high watermark %d", st.Control, sp.LastStable, sp.HighWatermark)
	})

	// 3. Compaction: short segments, the log cleaner as eager as it gets.
	compactTopic := base + "-compact"
	compactInfo := kafkatest.CreateTopic(t, admin, compactTopic, 1, 3, map[string]string{
		"cleanup.policy":            "compact",
		"segment.ms":                "100",
		"min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms":     "0",
		"delete.retention.ms":       "3600000",
	})
	fillCompacted(t, brokersA, compactTopic, compactInfo.Partitions[0].Leader)

	// 4. Mirror everything.
	var tps []fetcher.TopicPartition
	for p := range int32(3) {
		tps = append(tps, fetcher.TopicPartition{Topic: codecTopic, Partition: p})
	}
	tps = append(tps, fetcher.TopicPartition{Topic: txnTopic}, fetcher.TopicPartition{Topic: compactTopic})
	m := startMirror(t, brokersA, tps, mirrorOptions{FileLog: fetcher.FileLogOptions{SegmentBytes: 64 << 10}})
	src := m.waitCaughtUp(t, admin)
	seen := make(map[records.Compression]bool)
	for _, tp := range tps {
		dst := readLog(t, m.logs[tp])
		requireSameBatches(t, tp.String(), src[tp].Batches, dst)
		st := statsOf(dst)
		t.Logf("%s: leader %d epoch %d, high watermark %d: %v", tp, src[tp].Leader, src[tp].LeaderEpoch, src[tp].HighWatermark, st)
		for c := range st.Codecs {
			seen[c] = true
		}
		switch tp.Topic {
		case txnTopic:
			require.Equal(t, 5, st.Control, "one marker per transaction")
			require.Greater(t, st.Transactional, 5)
			require.Equal(t, src[tp].LastStable, m.logs[tp].LastStableOffset(), "no open transaction on either side")
		case compactTopic:
			require.Positive(t, st.Gaps, "the cleaner removed records")
			require.Positive(t, st.DeleteHorizon, "tombstones kept with a delete horizon")
			require.Positive(t, st.Empty, "the first producer's batch, emptied, is kept for its producer state")
		}
	}
	for _, c := range codecs {
		require.True(t, seen[c.want], "no %s batch mirrored", c.name)
	}
	_, problems := m.events.snapshot()
	require.Empty(t, problems)

	// 5. Mirror state of these partitions on B.
	topicIDs := map[string]records.UUID{codecTopic: records.UUID(codecInfo.ID), txnTopic: records.UUID(txnInfo.ID),
		compactTopic: records.UUID(compactInfo.ID)}
	persistAndReloadStates(t, brokersB, m, tps, topicIDs)
}

// fillCompacted writes a compacted partition so that the log cleaner has work of every kind,
// then waits until the leader's cleaner has cleaned everything below the active segment:
// round 0 comes from a producer that writes nothing else (its batch ends up empty, kept for
// its producer state), later rounds overwrite the same keys and delete some (tombstones get
// the delete-horizon bit), each round in a new segment (segment.ms is 100).
func fillCompacted(t *testing.T, brokers []string, topic string, leader int32) {
	t.Helper()
	first := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	keyed := func(cl *kgo.Client, round int) {
		var recs []*kgo.Record
		for k := range 20 {
			r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%02d", k), Value: fmt.Appendf(nil, "round-%d-key-%d", round, k)}
			if round > 0 && k%5 == round%5 {
				r.Value = nil // tombstone
			}
			recs = append(recs, r)
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
	keyed(first, 0)
	first.Close()
	cl := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	round := 1
	// Produce a round per tick until the leader holds at least five segments: segments roll
	// on the first append after segment.ms.
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	waitFor(t, waitTimeout, "five segments on the leader of "+topic, func() (bool, string) {
		<-tick.C
		keyed(cl, round)
		round++
		n := len(kafkatest.SegmentFiles(t, kafkatest.A, leader, topic, 0))
		return n >= 5 && round >= 6, fmt.Sprintf("%d segments after %d rounds", n, round)
	})
	files := kafkatest.SegmentFiles(t, kafkatest.A, leader, topic, 0)
	active, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(files[len(files)-1]), ".log"), 10, 64)
	require.NoError(t, err)
	waitFor(t, waitTimeout, "the log cleaner of node "+strconv.Itoa(int(leader)), func() (bool, string) {
		off, ok := cleanerCheckpoint(t, leader, topic, 0)
		return ok && off >= active, fmt.Sprintf("cleaner checkpoint %d (found %v), active segment base %d", off, ok, active)
	})
}

// cleanerCheckpoint reads the cleaned offset of topic/partition from node's
// cleaner-offset-checkpoint file ("0", count, then "topic partition offset" lines).
func cleanerCheckpoint(t testing.TB, node int32, topic string, partition int32) (int64, bool) {
	t.Helper()
	f, err := os.Open(filepath.Join(kafkatest.NodeDataDir(t, kafkatest.A, node), "cleaner-offset-checkpoint"))
	if os.IsNotExist(err) {
		return -1, false
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	want := topic + " " + strconv.Itoa(int(partition)) + " "
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), want); ok {
			off, err := strconv.ParseInt(rest, 10, 64)
			require.NoError(t, err)
			return off, true
		}
	}
	require.NoError(t, sc.Err())
	return -1, false
}

// persistAndReloadStates walks each mirrored partition through PREPARING, MIRRORING, STOPPING
// (with its LME: the FileLog's latest epoch and log end) and STOPPED on B's compacted
// __mirror_state through a coordinator.Runtime over a KafkaStore, then loads the state
// partitions in a second store and runtime (owner epoch 2) and reads the same states back.
func persistAndReloadStates(t *testing.T, brokersB []string, m *mirror, tps []fetcher.TopicPartition, ids map[string]records.UUID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	mirrorName := "it-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg := coordinator.KafkaConfig{Brokers: brokersB, ReplicationFactor: 1, Timeout: 30 * time.Second}
	type want struct {
		lme    int32
		offset int64
	}
	wants := make(map[fetcher.TopicPartition]want)
	for _, tp := range tps {
		wants[tp] = want{m.logs[tp].LatestEpoch(), m.logs[tp].LogEndOffset()}
	}

	open := func(ownerEpoch int32) (*coordinator.KafkaStore, *coordinator.Runtime, map[int32]bool) {
		store, err := coordinator.NewKafkaStore(ctx, cfg)
		require.NoError(t, err)
		// NewKafkaStore returns as soon as CreateTopics succeeded; a Load before the new
		// partitions have leaders fails with NOT_LEADER_OR_FOLLOWER.
		kafkatest.WaitForLeaders(t, kafkatest.NewClient(t, brokersB), coordinator.DefaultStateTopic)
		rt, err := coordinator.New(coordinator.Config{NumPartitions: coordinator.DefaultNumPartitions}, store)
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.Close(); _ = store.Close() })
		owned := make(map[int32]bool)
		for _, tp := range tps {
			p := rt.PartitionFor(mirrorName, ids[tp.Topic], tp.Partition)
			if !owned[p] {
				owned[p] = true
				require.NoError(t, rt.Load(p, ownerEpoch))
			}
		}
		for p := range owned {
			require.NoError(t, rt.WaitLoaded(ctx, p), "state partition %d", p)
		}
		return store, rt, owned
	}

	start := time.Now()
	_, rt1, owned := open(1)
	stateEpoch := int32(0)
	for _, st := range []statemachine.State{statemachine.Preparing, statemachine.Mirroring, statemachine.Stopping, statemachine.Stopped} {
		req := coordinator.WriteRequest{MirrorName: mirrorName}
		for _, tp := range tps {
			wp := coordinator.WritePartition{TopicID: ids[tp.Topic], Partition: tp.Partition, State: st,
				LeaderEpoch: m.logs[tp].LeaderEpoch(), StateEpoch: stateEpoch, LastMirrorEpoch: -1, LastMirrorOffset: -1}
			if st == statemachine.Stopping {
				wp.LastMirrorEpoch, wp.LastMirrorOffset = wants[tp].lme, wants[tp].offset
			}
			req.Partitions = append(req.Partitions, wp)
		}
		resp, err := rt1.WriteMirrorStates(ctx, req)
		require.NoError(t, err)
		stateEpoch++
		for i, r := range resp.Partitions {
			require.Zero(t, r.ErrorCode, "%s write %s: %s", tps[i], st, r.ErrorMessage)
			require.Equal(t, stateEpoch, r.StateEpoch)
		}
	}
	require.NoError(t, rt1.Close())
	t.Logf("wrote 4 states and an LME for %d partitions into %d state partitions of %s in %v",
		len(tps), len(owned), coordinator.DefaultStateTopic, time.Since(start))

	_, rt2, _ := open(2)
	req := coordinator.ReadRequest{MirrorName: mirrorName}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, coordinator.ReadPartition{TopicID: ids[tp.Topic], Partition: tp.Partition, LeaderEpoch: -1})
	}
	resp, err := rt2.ReadMirrorStates(ctx, req)
	require.NoError(t, err)
	require.Len(t, resp.Partitions, len(tps))
	for i, r := range resp.Partitions {
		tp := tps[i]
		require.Zero(t, r.ErrorCode, "%s", tp)
		require.Equal(t, statemachine.Stopped, r.State, "%s", tp)
		require.Equal(t, stateEpoch, r.StateEpoch, "%s", tp)
		require.Equal(t, m.logs[tp].LeaderEpoch(), r.LeaderEpoch, "%s", tp)
		require.Equal(t, wants[tp].lme, r.LastMirrorEpoch, "%s", tp)
		require.Equal(t, wants[tp].offset, r.LastMirrorOffset, "%s", tp)
	}
}
