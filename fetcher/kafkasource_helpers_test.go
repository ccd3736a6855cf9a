package fetcher

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// mirrorMB is the volume of the byte-for-byte mirror test; set
// KMIRROR_FETCHER_MB=200 for the bar.
func mirrorMB(t testing.TB) int {
	if s := os.Getenv("KMIRROR_FETCHER_MB"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	return 20
}

func newCluster(t testing.TB, brokers int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func newClient(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, cl *kgo.Client, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode, "create %s", topic)
}

// value returns a semi-compressible value of n bytes.
func value(rng *rand.Rand, n int) []byte {
	v := make([]byte, n)
	rng.Read(v[:n/3])
	for i := n / 3; i < n; i++ {
		v[i] = byte('a' + i%7)
	}
	return v
}

// fillMixed produces about mb MiB into every partition of topic with
// uncompressed, gzip, snappy, lz4 and zstd producers (idempotent and not) and
// a transactional producer that commits and aborts.
func fillMixed(t testing.TB, c *kfake.Cluster, topic string, partitions int32, mb int) int64 {
	t.Helper()
	common := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond), kgo.ProducerBatchMaxBytes(256 << 10)}
	type prod struct {
		cl  *kgo.Client
		txn bool
	}
	mk := func(extra ...kgo.Opt) *kgo.Client {
		return newClient(t, c, append(append([]kgo.Opt{}, common...), extra...)...)
	}
	prods := []prod{
		{cl: mk(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))},
		{cl: mk(kgo.ProducerBatchCompression(kgo.GzipCompression()))},
		{cl: mk(kgo.ProducerBatchCompression(kgo.SnappyCompression()))},
		{cl: mk(kgo.ProducerBatchCompression(kgo.Lz4Compression()))},
		{cl: mk(kgo.ProducerBatchCompression(kgo.ZstdCompression()))},
		{cl: mk(kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.TransactionalID("kmirror-test-"+topic)), txn: true},
	}
	ctx := context.Background()
	const perRound = 40
	const valSize = 1000
	perProducerRound := int64(perRound) * int64(partitions) * valSize
	rounds := int((int64(mb)<<20 + perProducerRound*int64(len(prods)) - 1) / (perProducerRound * int64(len(prods))))
	var g errgroup.Group
	for i, p := range prods {
		g.Go(func() error {
			rng := rand.New(rand.NewSource(int64(i)))
			for round := range rounds {
				var recs []*kgo.Record
				for part := range partitions {
					for j := range perRound {
						recs = append(recs, &kgo.Record{Partition: part, Key: fmt.Appendf(nil, "k%d", j%13), Value: value(rng, valSize)})
					}
				}
				if p.txn {
					if err := p.cl.BeginTransaction(); err != nil {
						return err
					}
				}
				if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					return err
				}
				if p.txn {
					if err := p.cl.EndTransaction(ctx, kgo.TransactionEndTry(round%2 == 0)); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	return int64(rounds) * perProducerRound * int64(len(prods))
}

// sourceBatches reads every raw batch of topic/p from the leader with kmsg
// Fetch requests (independently of the code under test).
func sourceBatches(t testing.TB, cl *kgo.Client, c *kfake.Cluster, topic string, topicID records.UUID, p int32) []records.Batch {
	t.Helper()
	if topicID == (records.UUID{}) {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq.Topics = append(mreq.Topics, mt)
		mresp, err := mreq.RequestWith(context.Background(), cl)
		require.NoError(t, err)
		topicID = records.UUID(mresp.Topics[0].TopicID)
	}
	var out []records.Batch
	offset := int64(-1)
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.SessionEpoch, req.MaxBytes, req.MaxWaitMillis = -1, -1, 64<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, max(offset, 0), 8<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kr, err := cl.Broker(int(c.LeaderFor(topic, p))).Request(context.Background(), req)
		require.NoError(t, err)
		sp := kr.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if sp.ErrorCode == CodeOffsetOutOfRange && offset < 0 {
			offset = sp.LogStartOffset
			continue
		}
		require.Equal(t, int16(0), sp.ErrorCode)
		if offset < 0 {
			offset = sp.LogStartOffset
		}
		n := 0
		for it := records.NewIterator(sp.RecordBatches); it.Next(); {
			b := it.Batch()
			if b.NextOffset() <= offset {
				continue
			}
			out = append(out, append(records.Batch(nil), b...))
			offset = b.NextOffset()
			n++
		}
		if n == 0 && offset >= sp.HighWatermark {
			return out
		}
	}
}

// requireMirrored asserts the destination holds exactly the source's batches.
func requireMirrored(t testing.TB, src []records.Batch, dst Log) {
	t.Helper()
	got := allBatches(t, dst)
	require.Equal(t, len(src), len(got), "batch count")
	for i := range src {
		require.Equal(t, src[i].BaseOffset(), got[i].BaseOffset(), "batch %d", i)
		require.Equal(t, src[i].CRC(), got[i].CRC(), "batch %d CRC", i)
		require.True(t, bytes.Equal(src[i], got[i]), "batch %d at %d differs", i, src[i].BaseOffset())
	}
	if len(src) > 0 {
		require.Equal(t, src[len(src)-1].NextOffset(), dst.LogEndOffset())
	}
}

func fileLog(t testing.TB, dir string, leaderEpoch int32) *FileLog {
	t.Helper()
	l, err := OpenFileLog(dir, FileLogOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	_, err = l.BumpLeaderEpoch(leaderEpoch - 1)
	require.NoError(t, err)
	return l
}

// mirrorSetup mirrors the listed partitions of topic into fresh FileLogs.
type mirrorSetup struct {
	src  *KafkaSource
	f    *Fetcher
	ev   *recorder
	logs map[TopicPartition]Log
}

func startMirror(t testing.TB, c *kfake.Cluster, cfg KafkaSourceConfig, fcfg Config, topic string, parts []int32, mkLog func(p int32) Log) *mirrorSetup {
	t.Helper()
	cfg.SeedBrokers = c.ListenAddrs()
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 50 * time.Millisecond
	}
	src, err := NewKafkaSource(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	ev := newRecorder()
	fcfg.Events = ev
	f, err := NewFetcher(src, fcfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	m := &mirrorSetup{src: src, f: f, ev: ev, logs: map[TopicPartition]Log{}}
	if mkLog == nil {
		dir := t.TempDir()
		mkLog = func(p int32) Log { return fileLog(t, filepath.Join(dir, fmt.Sprintf("%s-%d", topic, p)), 1000) }
	}
	for _, p := range parts {
		l := mkLog(p)
		m.logs[TopicPartition{topic, p}] = l
		require.NoError(t, f.Add(PartitionSpec{Topic: topic, Partition: p, Log: l}))
	}
	return m
}

// hw returns the source high watermark of topic/p.
func hw(t testing.TB, c *kfake.Cluster, topic string, p int32) int64 {
	t.Helper()
	info := c.PartitionInfo(topic, p)
	require.NotNil(t, info)
	return info.HighWatermark
}

// waitCaughtUp waits until every mirrored partition reached its source HW.
func (m *mirrorSetup) waitCaughtUp(t testing.TB, c *kfake.Cluster) {
	t.Helper()
	m.ev.waitUntil(t, 5*time.Minute, "caught up", func() bool {
		for tp, l := range m.logs {
			if l.LogEndOffset() < hw(t, c, tp.Topic, tp.Partition) {
				return false
			}
		}
		return true
	})
}

// injectDivergence makes the next Fetch naming partition p answer with
// DivergingEpoch d (kfake itself never diverges); the returned channel closes
// once it was served.
func injectDivergence(c *kfake.Cluster, p int32, d epoch.Divergence, hwm int64) <-chan struct{} {
	served := make(chan struct{})
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		found := false
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				found = found || rp.Partition == p
			}
		}
		if !found {
			c.KeepControl()
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.LastStableOffset = rp.Partition, hwm, hwm
				if rp.Partition == p {
					sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
				}
				sp.RecordBatches = []byte{}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		close(served)
		return resp, nil, true
	})
	return served
}

// batchContaining returns the base offset of the source batch holding offset.
func batchContaining(t testing.TB, bs []records.Batch, offset int64) int64 {
	t.Helper()
	for _, b := range bs {
		if b.BaseOffset() <= offset && offset <= b.LastOffset() {
			return b.BaseOffset()
		}
	}
	require.FailNow(t, "no batch", "offset %d", offset)
	return -1
}

// sourceEpochs returns the epoch cache a follower of bs would build.
func sourceEpochs(t testing.TB, bs []records.Batch) []epoch.Entry {
	t.Helper()
	c, err := epoch.NewCache()
	require.NoError(t, err)
	for _, b := range bs {
		c.Assign(b.PartitionLeaderEpoch(), b.BaseOffset())
	}
	return c.Entries()
}

// scriptFetch makes kfake answer Fetch requests for the partitions in parts
// from those Sources (the "scripted source log" of spec/clients.md): kfake's
// metadata, leaders and epochs stay real, the served bytes and Kafka's
// divergence rules come from the script. Requests naming none of the
// partitions go to kfake as usual.
func scriptFetch(c *kfake.Cluster, parts map[int32]Source) {
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		handled := false
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				src, ok := parts[rp.Partition]
				if !ok {
					continue
				}
				handled = true
				res, err := src.Fetch(context.Background(), []FetchPartition{{Topic: "script", Partition: 0,
					FetchOffset: rp.FetchOffset, LastFetchedEpoch: rp.LastFetchedEpoch, CurrentLeaderEpoch: -1, MaxBytes: rp.PartitionMaxBytes}})
				if err != nil {
					return nil, err, true
				}
				r := res[0]
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, r.ErrorCode
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
				if r.DivergingEpoch != nil {
					sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = r.DivergingEpoch.Epoch, r.DivergingEpoch.EndOffset
				}
				sp.RecordBatches = append([]byte{}, r.Records...)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !handled {
			return nil, nil, false
		}
		return resp, nil, true
	})
}

// scriptSource serves l as partition 0 of topic "script".
func scriptSource(l Log) Source {
	s := NewLocalSource(ReadUncommitted)
	s.Add("script", records.UUID{}, 0, l)
	return s
}
