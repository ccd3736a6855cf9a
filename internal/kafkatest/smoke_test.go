package kafkatest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchHeader is the minimal view of a v2 record batch header the smoke test needs; the real
// codec lives in package records.
type batchHeader struct {
	BaseOffset           int64
	Length               int32
	PartitionLeaderEpoch int32
	Attributes           int16
	LastOffsetDelta      int32
	NumRecords           int32
}

// Attribute bits of a v2 batch.
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)

func (b batchHeader) lastOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) }

var errBadBatch = errors.New("kafkatest: bad batch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// parseBatches splits raw fetched bytes into v2 batches and checks each CRC. A truncated
// trailing batch (allowed in a Fetch response) is dropped.
func parseBatches(raw []byte) ([]batchHeader, error) {
	var out []batchHeader
	for len(raw) >= 61 {
		length := int32(binary.BigEndian.Uint32(raw[8:12]))
		if length < 49 {
			return nil, fmt.Errorf("%w: length %d", errBadBatch, length)
		}
		size := 12 + int(length)
		if size > len(raw) {
			break // partial batch at the end of the response
		}
		if raw[16] != 2 {
			return nil, fmt.Errorf("%w: magic %d", errBadBatch, raw[16])
		}
		if want, got := binary.BigEndian.Uint32(raw[17:21]), crc32.Checksum(raw[21:size], castagnoli); want != got {
			return nil, fmt.Errorf("%w: crc %08x, computed %08x", errBadBatch, want, got)
		}
		out = append(out, batchHeader{
			BaseOffset:           int64(binary.BigEndian.Uint64(raw[0:8])),
			Length:               length,
			PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(raw[12:16])),
			Attributes:           int16(binary.BigEndian.Uint16(raw[21:23])),
			LastOffsetDelta:      int32(binary.BigEndian.Uint32(raw[23:27])),
			NumRecords:           int32(binary.BigEndian.Uint32(raw[57:61])),
		})
		raw = raw[size:]
	}
	return out, nil
}

// fetchArgs is one partition of a raw Fetch.
type fetchArgs struct {
	Leader             int32
	Topic              TopicInfo
	Partition          int32
	FetchOffset        int64
	CurrentLeaderEpoch int32
	LastFetchedEpoch   int32
}

// rawFetch sends a sessionless consumer Fetch (v12+) for one partition to the leader and
// returns the partition's response and the version used.
func rawFetch(ctx context.Context, cl *kgo.Client, a fetchArgs) (kmsg.FetchResponseTopicPartition, int16, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = 4 << 20
	req.SessionID = 0
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = a.Topic.Name
	rt.TopicID = a.Topic.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = a.Partition
	rp.FetchOffset = a.FetchOffset
	rp.CurrentLeaderEpoch = a.CurrentLeaderEpoch
	rp.LastFetchedEpoch = a.LastFetchedEpoch
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(int(a.Leader)).RetriableRequest(ctx, req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, 0, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kmsg.FetchResponseTopicPartition{}, req.Version, fmt.Errorf("fetch: top-level %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, req.Version, fmt.Errorf("fetch: unexpected response shape %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0], req.Version, nil
}

// produceSpread produces n records to topic, record i to partition i%partitions, in calls of
// perCall records so each partition gets several batches. It returns the count per partition.
func produceSpread(t *testing.T, cl *kgo.Client, topic string, n, partitions, perCall int) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	counts := make([]int64, partitions)
	for start := 0; start < n; start += perCall {
		var recs []*kgo.Record
		for i := start; i < n && i < start+perCall; i++ {
			p := int32(i % partitions)
			counts[p]++
			recs = append(recs, &kgo.Record{
				Topic:     topic,
				Partition: p,
				Key:       []byte(strconv.Itoa(i)),
				Value:     fmt.Appendf(nil, "value-%04d", i),
			})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
	return counts
}

// fetchAll reads partition from offset 0 up to the high watermark and returns its batches.
func fetchAll(t *testing.T, cl *kgo.Client, a fetchArgs) ([]batchHeader, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	var all []batchHeader
	a.FetchOffset = 0
	for {
		p, version, err := rawFetch(ctx, cl, a)
		require.NoError(t, err)
		require.GreaterOrEqual(t, version, int16(12), "Fetch must be v12+ for LastFetchedEpoch")
		require.NoError(t, kerr.ErrorForCode(p.ErrorCode))
		batches, err := parseBatches(p.RecordBatches)
		require.NoError(t, err)
		all = append(all, batches...)
		if len(batches) > 0 {
			last := batches[len(batches)-1]
			a.FetchOffset = last.lastOffset() + 1
			a.LastFetchedEpoch = last.PartitionLeaderEpoch
		}
		if a.FetchOffset >= p.HighWatermark {
			return all, p.HighWatermark
		}
		require.NotEmpty(t, batches, "no progress below the high watermark %d at offset %d", p.HighWatermark, a.FetchOffset)
	}
}

var dumpBatchLine = regexp.MustCompile(`(?m)^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*partitionLeaderEpoch: (-?\d+)`)

// TestSmoke produces 1,000 records to a 3-partition RF 3 topic on cluster A, fetches partition
// 0 raw with Fetch v12+, checks the batches, probes LastFetchedEpoch handling and reads the
// leader's segment with DumpLogSegments.
func TestSmoke(t *testing.T) {
	RequireCI(t)
	brokers := ClusterA(t)
	cl := NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic := TopicName(t)
	info := CreateTopic(t, cl, topic, 3, 3, nil)
	require.Len(t, info.Partitions, 3)
	for _, p := range info.Partitions {
		require.Len(t, p.Replicas, 3, "partition %v", p)
		t.Logf("created %s %v", topic, p)
	}

	counts := produceSpread(t, cl, topic, 1000, 3, 100)
	require.Equal(t, []int64{334, 333, 333}, counts)

	p0 := info.Partitions[0]
	base := fetchArgs{Leader: p0.Leader, Topic: info, Partition: 0, CurrentLeaderEpoch: p0.LeaderEpoch, LastFetchedEpoch: -1}
	batches, hw := fetchAll(t, cl, base)
	require.Equal(t, counts[0], hw, "high watermark of partition 0")
	require.GreaterOrEqual(t, len(batches), 10, "one batch per produce call at least")
	var next int64
	var records int64
	for _, b := range batches {
		require.Equal(t, next, b.BaseOffset, "batches must be contiguous")
		require.Equal(t, b.NumRecords-1, b.LastOffsetDelta, "no compaction, no gaps inside a batch")
		require.Equal(t, p0.LeaderEpoch, b.PartitionLeaderEpoch)
		next = b.lastOffset() + 1
		records += int64(b.NumRecords)
	}
	require.Equal(t, counts[0], records)
	t.Logf("partition 0: %d batches, %d records, high watermark %d, leader %d epoch %d", len(batches), records, hw, p0.Leader, p0.LeaderEpoch)

	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()

	t.Run("LastFetchedEpochCurrent", func(t *testing.T) {
		a := base
		a.FetchOffset, a.LastFetchedEpoch = 100, p0.LeaderEpoch
		p, _, err := rawFetch(ctx, cl, a)
		require.NoError(t, err)
		require.EqualValues(t, 0, p.ErrorCode)
		require.EqualValues(t, -1, p.DivergingEpoch.Epoch, "no divergence expected")
		got, err := parseBatches(p.RecordBatches)
		require.NoError(t, err)
		require.NotEmpty(t, got)
		require.LessOrEqual(t, got[0].BaseOffset, int64(100))
	})

	t.Run("LastFetchedEpochAboveLeader", func(t *testing.T) {
		// An epoch the leader has never had (above its latest): Kafka cannot find an end
		// offset for it and answers OFFSET_OUT_OF_RANGE, not DivergingEpoch.
		a := base
		a.FetchOffset, a.LastFetchedEpoch = hw, p0.LeaderEpoch+5
		p, _, err := rawFetch(ctx, cl, a)
		require.NoError(t, err)
		t.Logf("fetch offset %d lastFetchedEpoch %d (leader epoch %d): error %v diverging %+v records %d bytes",
			a.FetchOffset, a.LastFetchedEpoch, p0.LeaderEpoch, kerr.ErrorForCode(p.ErrorCode), p.DivergingEpoch, len(p.RecordBatches))
		require.ErrorIs(t, kerr.ErrorForCode(p.ErrorCode), kerr.OffsetOutOfRange)
		require.EqualValues(t, -1, p.DivergingEpoch.Epoch)
	})

	t.Run("FetchOffsetBeyondEpochEnd", func(t *testing.T) {
		// The leader's latest epoch ends at its log end offset; a fetch past it with that
		// epoch as LastFetchedEpoch is a divergence.
		a := base
		a.FetchOffset, a.LastFetchedEpoch = hw+50, p0.LeaderEpoch
		p, _, err := rawFetch(ctx, cl, a)
		require.NoError(t, err)
		t.Logf("fetch offset %d lastFetchedEpoch %d: error %v diverging %+v", a.FetchOffset, a.LastFetchedEpoch,
			kerr.ErrorForCode(p.ErrorCode), p.DivergingEpoch)
		require.EqualValues(t, 0, p.ErrorCode)
		require.Equal(t, p0.LeaderEpoch, p.DivergingEpoch.Epoch)
		require.Equal(t, hw, p.DivergingEpoch.EndOffset)
		require.Empty(t, p.RecordBatches)
	})

	t.Run("DumpLogSegments", func(t *testing.T) {
		files := SegmentFiles(t, A, p0.Leader, topic, 0)
		require.Len(t, files, 1, "one segment expected")
		out := DumpLogSegments(t, files[0])
		m := dumpBatchLine.FindAllStringSubmatch(out, -1)
		require.Len(t, m, len(batches), "DumpLogSegments output:\n%s", out)
		for i, line := range m {
			require.Equal(t, strconv.FormatInt(batches[i].BaseOffset, 10), line[1])
			require.Equal(t, strconv.FormatInt(batches[i].lastOffset(), 10), line[2])
			require.Equal(t, strconv.Itoa(int(batches[i].NumRecords)), line[3])
			require.Equal(t, strconv.Itoa(int(batches[i].PartitionLeaderEpoch)), line[4])
		}
	})
}

// TestLeaderFailover moves the leadership of a partition on cluster A twice — the leader is
// stopped (epoch e1, nothing written), started again and re-elected as preferred leader
// (epoch e2) — and records how the leader answers Fetches carrying old, skipped, stale and
// future epochs.
func TestLeaderFailover(t *testing.T) {
	RequireCI(t)
	brokers := ClusterA(t)
	cl := NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic := TopicName(t)
	info := CreateTopic(t, cl, topic, 1, 3, nil)
	e0 := info.Partitions[0]
	produceSpread(t, cl, topic, 100, 1, 50)

	start := time.Now()
	StopBroker(t, A, e0.Leader)
	stopped := time.Since(start)
	e1 := WaitForNewLeader(t, cl, topic, 0, e0.Leader, e0.LeaderEpoch)
	t.Logf("stop-node took %v, new leader after %v: %v -> %v", stopped, time.Since(start), e0, e1)

	StartBroker(t, A, e0.Leader)
	WaitForLeaders(t, cl, topic)
	e2 := ElectLeaders(t, cl, topic, 0, ElectPreferred)
	t.Logf("preferred leader back: %v", e2)
	require.Equal(t, e0.Leader, e2.Leader)
	require.Greater(t, e2.LeaderEpoch, e1.LeaderEpoch)
	produceSpread(t, cl, topic, 50, 1, 50)

	info = WaitTopic(t, cl, topic, "metadata", func(TopicInfo) bool { return true })
	require.Equal(t, e2.LeaderEpoch, info.Partitions[0].LeaderEpoch)
	base := fetchArgs{Leader: e2.Leader, Topic: info, Partition: 0, CurrentLeaderEpoch: e2.LeaderEpoch, LastFetchedEpoch: -1}
	batches, hw := fetchAll(t, cl, base)
	require.EqualValues(t, 150, hw)
	require.Equal(t, e0.LeaderEpoch, batches[0].PartitionLeaderEpoch)
	require.Equal(t, e2.LeaderEpoch, batches[len(batches)-1].PartitionLeaderEpoch)

	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	fetch := func(t *testing.T, offset int64, lastFetched, current int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		a := base
		a.FetchOffset, a.LastFetchedEpoch, a.CurrentLeaderEpoch = offset, lastFetched, current
		p, _, err := rawFetch(ctx, cl, a)
		require.NoError(t, err)
		t.Logf("fetch offset %d lastFetchedEpoch %d currentLeaderEpoch %d (epochs e0=%d e1=%d e2=%d): error %v diverging {%d %d} %d bytes",
			offset, lastFetched, current, e0.LeaderEpoch, e1.LeaderEpoch, e2.LeaderEpoch,
			kerr.ErrorForCode(p.ErrorCode), p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset, len(p.RecordBatches))
		return p
	}

	t.Run("OldEpochPastItsEnd", func(t *testing.T) {
		// A follower that kept writing in e0 beyond offset 100 diverges at 100.
		p := fetch(t, 120, e0.LeaderEpoch, e2.LeaderEpoch)
		require.EqualValues(t, 0, p.ErrorCode)
		require.Equal(t, e0.LeaderEpoch, p.DivergingEpoch.Epoch)
		require.EqualValues(t, 100, p.DivergingEpoch.EndOffset)
		require.Empty(t, p.RecordBatches)
	})

	t.Run("OldEpochAtItsEnd", func(t *testing.T) {
		// Fetching exactly at the end of e0 with e0 as last epoch is no divergence.
		p := fetch(t, 100, e0.LeaderEpoch, e2.LeaderEpoch)
		require.EqualValues(t, 0, p.ErrorCode)
		require.EqualValues(t, -1, p.DivergingEpoch.Epoch)
		require.NotEmpty(t, p.RecordBatches)
	})

	t.Run("SkippedEpoch", func(t *testing.T) {
		// e1 wrote nothing, so this leader's epoch cache has no entry for it: the leader
		// answers with the largest epoch below it and the start of the next one.
		p := fetch(t, 120, e1.LeaderEpoch, e2.LeaderEpoch)
		require.EqualValues(t, 0, p.ErrorCode)
		require.Equal(t, e0.LeaderEpoch, p.DivergingEpoch.Epoch)
		require.EqualValues(t, 100, p.DivergingEpoch.EndOffset)
	})

	t.Run("StaleCurrentLeaderEpoch", func(t *testing.T) {
		p := fetch(t, 0, -1, e1.LeaderEpoch)
		require.ErrorIs(t, kerr.ErrorForCode(p.ErrorCode), kerr.FencedLeaderEpoch)
	})

	t.Run("FutureCurrentLeaderEpoch", func(t *testing.T) {
		p := fetch(t, 0, -1, e2.LeaderEpoch+1)
		require.ErrorIs(t, kerr.ErrorForCode(p.ErrorCode), kerr.UnknownLeaderEpoch)
	})
}

// TestTransactions checks that each cluster's transaction state log is usable (replication
// factor and min ISR fit the cluster size): a transactional producer commits, and the
// partition then holds the data batch followed by a COMMIT control batch.
func TestTransactions(t *testing.T) {
	RequireCI(t)
	for _, c := range []Cluster{A, B} {
		t.Run(c.String(), func(t *testing.T) {
			brokers := Brokers(t, c)
			rf := int16(len(brokers))
			admin := NewClient(t, brokers)
			topic := TopicName(t)
			info := CreateTopic(t, admin, topic, 1, rf, map[string]string{"unclean.leader.election.enable": "true"})

			txid := topic + "-txn"
			cl := NewClient(t, brokers, kgo.TransactionalID(txid), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
			defer cancel()
			require.NoError(t, cl.BeginTransaction())
			var recs []*kgo.Record
			for i := range 10 {
				recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "txn-%d", i)})
			}
			require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
			require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))

			p := info.Partitions[0]
			a := fetchArgs{Leader: p.Leader, Topic: info, CurrentLeaderEpoch: p.LeaderEpoch, LastFetchedEpoch: -1}
			// EndTransaction returns once the coordinator has logged PrepareCommit; the
			// markers reach the partitions afterwards, so wait for the high watermark.
			waitHighWatermark(t, admin, a, 11)
			batches, hw := fetchAll(t, admin, a)
			require.EqualValues(t, 11, hw, "10 records and one commit marker")
			require.Len(t, batches, 2)
			require.Equal(t, int16(attrTransactional), batches[0].Attributes&(attrTransactional|attrControl))
			require.Equal(t, int16(attrTransactional|attrControl), batches[1].Attributes&(attrTransactional|attrControl))
			require.EqualValues(t, 10, batches[1].BaseOffset)
		})
	}
}

// waitHighWatermark polls the partition until its high watermark reaches want.
func waitHighWatermark(t *testing.T, cl *kgo.Client, a fetchArgs, want int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	a.LastFetchedEpoch = -1
	for {
		p, _, err := rawFetch(ctx, cl, a)
		require.NoError(t, err)
		require.NoError(t, kerr.ErrorForCode(p.ErrorCode))
		if p.HighWatermark >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("high watermark %d, want %d", p.HighWatermark, want)
		case <-tick.C:
		}
	}
}

// FuzzParseBatches checks that the smoke test's minimal batch parser never panics and that
// every batch it returns lies inside the input.
func FuzzParseBatches(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	valid := make([]byte, 61)
	binary.BigEndian.PutUint32(valid[8:12], 49)
	valid[16] = 2
	binary.BigEndian.PutUint32(valid[17:21], crc32.Checksum(valid[21:], castagnoli))
	f.Add(valid)
	f.Add(append(append([]byte{}, valid...), valid...))
	f.Add(append(append([]byte{}, valid...), valid[:30]...))
	neg := append([]byte{}, valid...)
	binary.BigEndian.PutUint32(neg[8:12], 0xffffffff)
	f.Add(neg)
	f.Fuzz(func(t *testing.T, raw []byte) {
		batches, err := parseBatches(raw)
		if err != nil {
			require.ErrorIs(t, err, errBadBatch)
			return
		}
		total := 0
		for _, b := range batches {
			require.GreaterOrEqual(t, b.Length, int32(49))
			total += 12 + int(b.Length)
		}
		require.LessOrEqual(t, total, len(raw))
	})
}
