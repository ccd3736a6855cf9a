package fetcher

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

func TestKafkaMirrorMixedByteForByte(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake volume test")
	}
	c := newCluster(t, 3)
	admin := newClient(t, c)
	const parts = 8
	createTopic(t, admin, "mix", parts, nil)
	createTopic(t, admin, "compacted", 2, map[string]string{"cleanup.policy": "compact"})
	start := time.Now()
	total := fillMixed(t, c, "mix", parts, mirrorMB(t))
	fillMixed(t, c, "compacted", 2, 1)
	c.Compact()
	t.Logf("produced %d MiB in %v", total>>20, time.Since(start))

	start = time.Now()
	m := startMirror(t, c, KafkaSourceConfig{}, Config{}, "mix", []int32{0, 1, 2, 3, 4, 5, 6, 7}, nil)
	for p := range int32(2) {
		l := fileLog(t, t.TempDir(), 1000)
		m.logs[TopicPartition{"compacted", p}] = l
		require.NoError(t, m.f.Add(PartitionSpec{Topic: "compacted", Partition: p, Log: l}))
	}
	m.waitCaughtUp(t, c)
	t.Logf("mirrored in %v", time.Since(start))

	ctx := context.Background()
	var batches, empty, ctrl int
	codecs := map[records.Compression]int{}
	for tp, l := range m.logs {
		info, err := m.src.PartitionInfo(ctx, tp.Topic, tp.Partition, false)
		require.NoError(t, err)
		src := sourceBatches(t, admin, c, tp.Topic, info.TopicID, tp.Partition)
		requireMirrored(t, src, l)
		require.Equal(t, hw(t, c, tp.Topic, tp.Partition), l.LogEndOffset(), "%s", tp)
		for _, b := range src {
			batches++
			codecs[b.Attributes().Compression()]++
			if b.NumRecords() == 0 {
				empty++
			}
			if b.Attributes().IsControl() {
				ctrl++
			}
		}
		if tp.Topic == "compacted" {
			require.Equal(t, c.PartitionInfo(tp.Topic, tp.Partition).LogStartOffset, l.LogStartOffset())
		}
	}
	t.Logf("%d batches, %d control, %d empty, codecs %v", batches, ctrl, empty, codecs)
	require.Positive(t, ctrl)
	for _, cc := range []records.Compression{records.CompressionNone, records.CompressionGzip, records.CompressionSnappy, records.CompressionLZ4, records.CompressionZstd} {
		require.Positive(t, codecs[cc], "codec %v", cc)
	}
	m.ev.mu.Lock()
	defer m.ev.mu.Unlock()
	require.Empty(t, m.ev.failed)
	require.Empty(t, m.ev.divergences)
}

// produce writes n records of about 1 KB into topic/p and waits for the acks.
func produce(t testing.TB, cl *kgo.Client, topic string, p int32, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%0900d", i)})
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
}

func producer(t testing.TB, c interface{ ListenAddrs() []string }) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// divergenceSetup mirrors topic "div" (one partition) through two leader
// moves: epochs 0 (offsets 0-99), 1 (100-149), 2 (150-199).
func divergenceSetup(t *testing.T, cfg KafkaSourceConfig) (*kfakeCluster, *mirrorSetup, *kgo.Client) {
	c := newCluster(t, 2)
	prod := producer(t, c)
	createTopic(t, prod, "div", 1, nil)
	m := startMirror(t, c, cfg, Config{}, "div", []int32{0}, nil)
	produce(t, prod, "div", 0, 100)
	m.waitCaughtUp(t, c)
	require.NoError(t, c.MoveTopicPartition("div", 0, 1-c.LeaderFor("div", 0)))
	produce(t, prod, "div", 0, 50)
	m.waitCaughtUp(t, c)
	require.NoError(t, c.MoveTopicPartition("div", 0, 1-c.LeaderFor("div", 0)))
	produce(t, prod, "div", 0, 50)
	m.waitCaughtUp(t, c)
	return c, m, prod
}

type kfakeCluster = kfake.Cluster

func TestKafkaFollowsLeaderMovesAndDivergence(t *testing.T) {
	c, m, prod := divergenceSetup(t, KafkaSourceConfig{})
	tp := TopicPartition{"div", 0}
	l := m.logs[tp]
	info, err := m.src.PartitionInfo(context.Background(), "div", 0, true)
	require.NoError(t, err)
	require.Equal(t, int32(2), info.LeaderEpoch)
	src := sourceBatches(t, prod, c, "div", info.TopicID, 0)
	requireMirrored(t, src, l)
	require.Equal(t, []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 100}, {Epoch: 2, StartOffset: 150}}, l.Epochs().Entries())
	require.Equal(t, sourceEpochs(t, src), l.Epochs().Entries())

	for _, tc := range []struct {
		name string
		d    epoch.Divergence
		// want is what Kafka's follower computes (getOffsetTruncationState);
		// the log end then is the base of the batch holding it.
		want int64
	}{
		// The follower knows epoch 1: min(its end of epoch 1, leader's end).
		{"known epoch", epoch.Divergence{Epoch: 1, EndOffset: 120}, 120},
		// The leader's epoch ends exactly where ours does at an epoch boundary.
		{"epoch boundary", epoch.Divergence{Epoch: 0, EndOffset: 100}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, epoch.FollowerTruncationOffset(l.Epochs(), l.LogEndOffset(), tc.d))
			m.ev.mu.Lock()
			n := len(m.ev.divergences[tp])
			m.ev.mu.Unlock()
			<-injectDivergence(c, 0, tc.d, 200)
			m.ev.waitUntil(t, waitLong, "divergence handled", func() bool {
				m.ev.mu.Lock()
				defer m.ev.mu.Unlock()
				return len(m.ev.divergences[tp]) > n
			})
			m.ev.mu.Lock()
			got := m.ev.divergences[tp][n]
			m.ev.mu.Unlock()
			require.Equal(t, tc.d, got.d)
			require.Equal(t, batchContaining(t, src, tc.want), got.truncatedTo)
			m.waitCaughtUp(t, c)
			requireMirrored(t, src, l)
		})
	}
	// More data at a new epoch after a shuffle still converges.
	c.ShufflePartitionLeaders()
	produce(t, prod, "div", 0, 30)
	m.waitCaughtUp(t, c)
	src = sourceBatches(t, prod, c, "div", info.TopicID, 0)
	requireMirrored(t, src, l)
	require.Equal(t, sourceEpochs(t, src), l.Epochs().Entries())
}

func TestKafkaOffsetForLeaderEpochFallbackConverges(t *testing.T) {
	c := newCluster(t, 2)
	prod := producer(t, c)
	createTopic(t, prod, "ofle", 1, nil)
	produce(t, prod, "ofle", 0, 100)
	src0 := sourceBatches(t, prod, c, "ofle", records.UUID{}, 0)
	require.NoError(t, c.MoveTopicPartition("ofle", 0, 1-c.LeaderFor("ofle", 0)))
	produce(t, prod, "ofle", 0, 50)

	// The destination has the source's epoch-0 data plus 20 records the
	// source never had, also at epoch 0 (an old leader's unreplicated tail).
	dst := fileLog(t, t.TempDir(), 1000)
	for _, b := range src0 {
		require.NoError(t, dst.Append(b))
	}
	appendAll(t, dst, batch(t, 100, 0, 20, records.CompressionNone))

	m := startMirror(t, c, KafkaSourceConfig{DivergenceViaOffsetForLeaderEpoch: true}, Config{}, "ofle", []int32{0},
		func(int32) Log { return dst })
	m.waitCaughtUp(t, c)
	tp := TopicPartition{"ofle", 0}
	requireMirrored(t, sourceBatches(t, prod, c, "ofle", records.UUID{}, 0), dst)
	m.ev.mu.Lock()
	defer m.ev.mu.Unlock()
	// kfake answers (0, 100) for epoch 0, as Kafka does: truncate at 100.
	require.Equal(t, []divergenceEvent{{epoch.Divergence{Epoch: 0, EndOffset: 100}, 100}}, m.ev.divergences[tp])
}

// gapSetup builds epochs 0 (0-49) and 1 (50-99) on the source, mirrors them in
// probe mode, then moves the leader twice more with no data (epochs 2, 3):
// kfake answers OffsetForLeaderEpoch(1) with (-1,-1) where Kafka answers (1, 100).
func gapSetup(t *testing.T, before func(c *kfake.Cluster)) (*kfake.Cluster, *mirrorSetup, *kgo.Client) {
	c := newCluster(t, 2)
	prod := producer(t, c)
	createTopic(t, prod, "gap", 1, nil)
	produce(t, prod, "gap", 0, 50)
	require.NoError(t, c.MoveTopicPartition("gap", 0, 1-c.LeaderFor("gap", 0)))
	produce(t, prod, "gap", 0, 50)
	require.NoError(t, c.MoveTopicPartition("gap", 0, 1-c.LeaderFor("gap", 0)))
	m := startMirror(t, c, KafkaSourceConfig{DivergenceViaOffsetForLeaderEpoch: true}, Config{}, "gap", []int32{0}, nil)
	m.waitCaughtUp(t, c)
	require.Equal(t, int32(1), m.logs[TopicPartition{"gap", 0}].LatestEpoch())
	before(c)
	require.NoError(t, c.MoveTopicPartition("gap", 0, 1-c.LeaderFor("gap", 0)))
	return c, m, prod
}

func TestKafkaOffsetForLeaderEpochGapRawKfake(t *testing.T) {
	c, m, prod := gapSetup(t, func(*kfake.Cluster) {})
	tp := TopicPartition{"gap", 0}
	m.ev.waitUntil(t, waitLong, "probe truncation", func() bool {
		m.ev.mu.Lock()
		defer m.ev.mu.Unlock()
		return len(m.ev.divergences[tp]) > 0
	})
	produce(t, prod, "gap", 0, 10)
	m.waitCaughtUp(t, c)
	l := m.logs[tp]
	src := sourceBatches(t, prod, c, "gap", records.UUID{}, 0)
	requireMirrored(t, src, l)
	require.Equal(t, sourceEpochs(t, src), l.Epochs().Entries())
	m.ev.mu.Lock()
	defer m.ev.mu.Unlock()
	// The unknown answer makes the loop drop epoch 1 (offsets 50-99) and
	// refetch it: more work than Kafka needs, but nothing divergent kept.
	require.Equal(t, []divergenceEvent{{epoch.Divergence{Epoch: -1, EndOffset: -1}, 50}}, m.ev.divergences[tp])
}

func TestKafkaOffsetForLeaderEpochGapKafkaExactOverride(t *testing.T) {
	var probes atomic.Int32
	c, m, prod := gapSetup(t, func(c *kfake.Cluster) {
		// What a Kafka leader's cache holds: every election assigns its epoch
		// at the log end, with or without data (epoch 3 replaced epoch 2,
		// which started at the same offset).
		kafka, err := epoch.NewCache(epoch.Entry{Epoch: 0, StartOffset: 0}, epoch.Entry{Epoch: 1, StartOffset: 50},
			epoch.Entry{Epoch: 3, StartOffset: 100})
		require.NoError(t, err)
		c.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			req := kr.(*kmsg.OffsetForLeaderEpochRequest)
			resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewOffsetForLeaderEpochResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					sp.Partition = rp.Partition
					sp.LeaderEpoch, sp.EndOffset = kafka.EndOffsetFor(rp.LeaderEpoch, 100)
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			probes.Add(1)
			return resp, nil, true
		})
	})
	tp := TopicPartition{"gap", 0}
	m.ev.waitUntil(t, waitLong, "probe", func() bool { return probes.Load() > 0 })
	produce(t, prod, "gap", 0, 10)
	m.waitCaughtUp(t, c)
	l := m.logs[tp]
	src := sourceBatches(t, prod, c, "gap", records.UUID{}, 0)
	requireMirrored(t, src, l)
	m.ev.mu.Lock()
	defer m.ev.mu.Unlock()
	require.Empty(t, m.ev.divergences[tp], "a Kafka-exact answer needs no truncation")
}

func TestKafkaCorruptBatchFailsOnlyItsPartition(t *testing.T) {
	c := newCluster(t, 2)
	prod := producer(t, c)
	createTopic(t, prod, "crc", 2, nil)
	require.NoError(t, c.MoveTopicPartition("crc", 0, 0))
	require.NoError(t, c.MoveTopicPartition("crc", 1, 1))
	for range 3 {
		produce(t, prod, "crc", 0, 10)
		produce(t, prod, "crc", 1, 10)
	}
	// Partition 0 is served from a script holding kfake's own bytes, with
	// one byte of its second batch flipped on the way out.
	script := memLog(t, 0)
	p0 := sourceBatches(t, prod, c, "crc", records.UUID{}, 0)
	require.GreaterOrEqual(t, len(p0), 3, "three produce calls; a loaded producer may split one into two batches")
	for _, b := range p0 {
		require.NoError(t, script.Append(b))
	}
	bad := p0[1].BaseOffset()
	scriptFetch(c, map[int32]Source{0: corruptingSource{Source: scriptSource(script), p: 0, bad: bad}})

	m := startMirror(t, c, KafkaSourceConfig{}, Config{}, "crc", []int32{0, 1}, nil)
	tp0, tp1 := TopicPartition{"crc", 0}, TopicPartition{"crc", 1}
	m.ev.waitUntil(t, waitLong, "p0 failed", func() bool { return m.ev.failure(tp0) != nil })
	err := m.ev.failure(tp0)
	var ce *CorruptBatchError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, bad, ce.Offset)
	require.Contains(t, err.Error(), fmt.Sprintf("offset %d", bad))
	require.ErrorIs(t, err, records.ErrCorrupt)
	require.Equal(t, bad, m.logs[tp0].LogEndOffset(), "only the good batches before it were appended")

	// Partition 1 goes on mirroring.
	produce(t, prod, "crc", 1, 25)
	m.ev.waitUntil(t, waitLong, "p1", func() bool { return m.logs[tp1].LogEndOffset() == hw(t, c, "crc", 1) })
	requireMirrored(t, sourceBatches(t, prod, c, "crc", records.UUID{}, 1), m.logs[tp1])
	require.Nil(t, m.ev.failure(tp1))
	var failed int
	for _, s := range m.f.Status() {
		if s.Err != nil {
			failed++
		}
	}
	require.Equal(t, 1, failed)
}

// craftedBatches returns batches kfake cannot store: empty batches (the log
// cleaner's), attribute bit 0x40, a MIRROR_PID_RESET (type 7) control batch,
// and an aborted transaction.
func craftedBatches(t *testing.T) [][]byte {
	delHorizon := batch(t, 10, 0, 2, records.CompressionNone)
	binary.BigEndian.PutUint16(delHorizon[21:], uint16(records.AttrDeleteHorizon))
	binary.BigEndian.PutUint32(delHorizon[17:], records.Batch(delHorizon).ComputeCRC())
	txn, err := records.BuildBatch(records.BatchSpec{BaseOffset: 13, Transactional: true, ProducerID: 5, ProducerEpoch: 1,
		BaseSequence: 0, Compression: records.CompressionGzip}, []records.Record{{Value: []byte("t1")}, {Value: []byte("t2")}})
	require.NoError(t, err)
	return [][]byte{
		batch(t, 0, 0, 3, records.CompressionZstd),
		emptyBatch(t, 3, 0, 4, 77),
		batch(t, 8, 0, 2, records.CompressionSnappy), // 8..9
		delHorizon, // 10..11
		records.BuildControlBatch(records.ControlBatchSpec{BaseOffset: 12, ProducerID: -1, ProducerEpoch: -1, Type: records.ControlMirrorPIDReset}),
		txn, // 13..14
		records.BuildControlBatch(records.ControlBatchSpec{BaseOffset: 15, ProducerID: 5, ProducerEpoch: 1, Type: records.ControlAbort}),
	}
}

func TestKafkaCraftedBatchesAndRealDivergingEpoch(t *testing.T) {
	c := newCluster(t, 1)
	prod := producer(t, c)
	createTopic(t, prod, "script", 1, nil)
	script := memLog(t, 0)
	appendAll(t, script, craftedBatches(t)...)
	scriptFetch(c, map[int32]Source{0: scriptSource(script)})

	m := startMirror(t, c, KafkaSourceConfig{}, Config{}, "script", []int32{0}, nil)
	tp := TopicPartition{"script", 0}
	l := m.logs[tp]
	m.ev.waitUntil(t, waitLong, "mirrored", func() bool { return l.LogEndOffset() == 16 })
	requireSameBatches(t, script, l)
	require.Equal(t, script.OpenTransactions(), l.OpenTransactions())

	// An unclean election on the source: its log loses offsets 10-15 and a
	// new leader (epoch 1) writes different data there. The fetcher's next
	// fetch (LastFetchedEpoch 0, offset 16) gets a real DivergingEpoch
	// {0, 10} through the Kafka wire and truncates like a follower.
	require.NoError(t, script.Truncate(10))
	_, err := script.BumpLeaderEpoch(0)
	require.NoError(t, err)
	require.NoError(t, c.MoveTopicPartition("script", 0, 0)) // kfake metadata: epoch 1
	appendAll(t, script, batch(t, 10, 1, 8, records.CompressionLZ4))
	m.ev.waitUntil(t, waitLong, "converged", func() bool {
		return l.LogEndOffset() == 18 && l.LatestEpoch() == 1
	})
	requireSameBatches(t, script, l)
	m.ev.mu.Lock()
	defer m.ev.mu.Unlock()
	require.Equal(t, []divergenceEvent{{epoch.Divergence{Epoch: 0, EndOffset: 10}, 10}}, m.ev.divergences[tp])
	require.Empty(t, l.OpenTransactions())
}
