package dataplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
)

// TestProduceConsumeKgo: CreateTopics over the wire, an idempotent kgo
// producer (its default), a kgo consumer from the start, ListOffsets.
func TestProduceConsumeKgo(t *testing.T) {
	s := startSite(t, Config{})
	cl := s.client(t, kgo.DefaultProduceTopic("plain"), kgo.ConsumeTopics("plain"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "plain", 2, -1
	rc := kmsg.NewCreateTopicsRequestTopicConfig()
	rc.Name, rc.Value = "retention.ms", kmsg.StringPtr("60000")
	rt.Configs = append(rt.Configs, rc)
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	cresp := request[*kmsg.CreateTopicsResponse](t, cl, ct)
	require.Equal(t, int16(0), cresp.Topics[0].ErrorCode)
	// The answer lists the topic's configs, never null (the Java admin client reads it).
	require.Len(t, cresp.Topics[0].Configs, 1)
	require.Equal(t, "retention.ms", cresp.Topics[0].Configs[0].Name)
	require.Equal(t, int16(36), request[*kmsg.CreateTopicsResponse](t, cl, ct).Topics[0].ErrorCode) // TOPIC_ALREADY_EXISTS

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 200
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(fmt.Sprintf("r%d", i))}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	got := map[int32][]string{}
	for total := 0; total < n; {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, int64(len(got[r.Partition])), r.Offset)
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			total++
		})
	}
	for p := int32(0); p < 2; p++ {
		require.Len(t, got[p], n/2)
		for i, v := range got[p] {
			require.Equal(t, fmt.Sprintf("r%d", 2*i+int(p)), v)
		}
		l := s.log(t, "plain", p)
		require.Equal(t, int64(n/2), l.LogEndOffset())
		require.Equal(t, int32(0), l.LeaderEpoch())
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "plain"
	for _, ts := range []int64{-2, -1, 1} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 0, ts
		lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{lp}
		lo.Topics = []kmsg.ListOffsetsRequestTopic{lt}
		lresp := request[*kmsg.ListOffsetsResponse](t, cl, lo)
		p := lresp.Topics[0].Partitions[0]
		require.Equal(t, int16(0), p.ErrorCode)
		switch ts {
		case -2:
			require.Equal(t, int64(0), p.Offset)
		case -1:
			require.Equal(t, int64(n/2), p.Offset)
			require.Equal(t, int32(0), p.LeaderEpoch)
		default:
			require.Equal(t, int64(0), p.Offset) // every record's timestamp is after 1 ms
		}
	}
}

// TestReadOnlyRefused: a read-only partition refuses Produce with
// READ_ONLY_TOPIC (kmirror's number, which kgo does not know) and nothing
// is appended; after SetReadOnly(false) the same produce is accepted.
func TestReadOnlyRefused(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "mirrored", 1)
	require.NoError(t, s.dst.SetReadOnly("mirrored", 0, true))
	cl := s.client(t)
	resp := request[*kmsg.ProduceResponse](t, cl, produceReq("mirrored", 0, dataBatch(t, 0, 0, 3, -1, -1, false)))
	require.Equal(t, int16(admin.CodeReadOnlyTopic), resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int16(10134), resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(0), s.log(t, "mirrored", 0).LogEndOffset())

	// A kgo producer fails without retrying; kgo does not know kmirror's
	// code, so it reports UNKNOWN_SERVER_ERROR (the wire code is checked
	// above).
	pcl := s.client(t, kgo.DefaultProduceTopic("mirrored"), kgo.RecordRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := pcl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	require.ErrorIs(t, err, kerr.UnknownServerError)
	require.Equal(t, int64(0), s.log(t, "mirrored", 0).LogEndOffset())

	require.NoError(t, s.dst.SetReadOnly("mirrored", 0, false))
	resp = request[*kmsg.ProduceResponse](t, cl, produceReq("mirrored", 0, dataBatch(t, 0, 0, 3, -1, -1, false)))
	require.Equal(t, int16(0), resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(3), s.log(t, "mirrored", 0).LogEndOffset())
}

// TestProduceBadInput: a corrupt CRC, a batch above the size limit, a
// control batch, a bad acks value, an unknown partition: Kafka's code, and
// nothing appended.
func TestProduceBadInput(t *testing.T) {
	s := startSite(t, Config{MaxMessageBytes: 4096})
	s.topic(t, "t", 1)
	cl := s.client(t)
	good := dataBatch(t, 0, 0, 3, -1, -1, false)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	big := dataBatch(t, 0, 0, 1000, -1, -1, false)
	require.Greater(t, len(big), 4096)
	for name, c := range map[string]struct {
		req  *kmsg.ProduceRequest
		code int16
	}{
		"crc":           {produceReq("t", 0, corrupt), 2},
		"too large":     {produceReq("t", 0, big), 10},
		"control":       {produceReq("t", 0, marker(5, 0)), 87},
		"truncated":     {produceReq("t", 0, good[:len(good)-3]), 2},
		"trailing junk": {produceReq("t", 0, append(append([]byte(nil), good...), 1, 2, 3)), 2},
		"no partition":  {produceReq("t", 7, good), 3},
		"no topic":      {produceReq("nope", 0, good), 3},
		"transactional": {produceReq("t", 0, dataBatch(t, 0, 0, 1, 9, 0, true)), 48},
	} {
		resp := request[*kmsg.ProduceResponse](t, cl, c.req)
		require.Equal(t, c.code, resp.Topics[0].Partitions[0].ErrorCode, name)
		require.Equal(t, int64(0), s.log(t, "t", 0).LogEndOffset(), name)
	}
	req := produceReq("t", 0, good)
	req.Acks = 2
	resp, err := s.dp.Serve(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, int16(21), resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(0), s.log(t, "t", 0).LogEndOffset())
}

// TestIdempotentSequences: a retried batch is answered with its original
// offset and not appended twice; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an
// older epoch is INVALID_PRODUCER_EPOCH; the state survives a new data
// plane over the same log (rebuilt from batch headers).
func TestIdempotentSequences(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 1)
	cl := s.client(t)
	ip := request[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
	require.Equal(t, int16(0), ip.ErrorCode)
	pid := ip.ProducerID
	send := func(seq int32, n int) kmsg.ProduceResponseTopicPartition {
		return request[*kmsg.ProduceResponse](t, cl, produceReq("t", 0, dataBatch(t, 0, 0, n, pid, seq, false))).Topics[0].Partitions[0]
	}
	p := send(0, 3)
	require.Equal(t, [2]int64{0, 0}, [2]int64{int64(p.ErrorCode), p.BaseOffset})
	p = send(3, 2)
	require.Equal(t, [2]int64{0, 3}, [2]int64{int64(p.ErrorCode), p.BaseOffset})
	p = send(0, 3) // retry of the first batch
	require.Equal(t, [2]int64{0, 0}, [2]int64{int64(p.ErrorCode), p.BaseOffset})
	require.Equal(t, int64(5), s.log(t, "t", 0).LogEndOffset())
	require.Equal(t, int16(45), send(9, 1).ErrorCode)
	require.Equal(t, int64(5), s.log(t, "t", 0).LogEndOffset())

	// A new data plane (a restart) rebuilds the state from the log.
	dp2, err := New(Config{Destination: s.dst, AdvertisedHost: "h", AdvertisedPort: 1})
	require.NoError(t, err)
	defer func() { require.NoError(t, dp2.Close()) }()
	r, err := dp2.Serve(context.Background(), produceReq("t", 0, dataBatch(t, 0, 0, 2, pid, 3, false)))
	require.NoError(t, err)
	require.Equal(t, int64(3), r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].BaseOffset)
	r, err = dp2.Serve(context.Background(), produceReq("t", 0, dataBatch(t, 0, 0, 1, pid, 6, false)))
	require.NoError(t, err)
	require.Equal(t, int16(45), r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)

	// InitProducerId passing an id and epoch (v3+) gets a fresh id at epoch
	// 0, as from Kafka: a client never picks its producer id.
	ireq := kmsg.NewPtrInitProducerIDRequest()
	ireq.ProducerID, ireq.ProducerEpoch = pid, 0
	ip = request[*kmsg.InitProducerIDResponse](t, cl, ireq)
	require.Equal(t, int16(0), ip.ErrorCode)
	require.Equal(t, [2]int64{pid + 1, 0}, [2]int64{ip.ProducerID, int64(ip.ProducerEpoch)})

	// Epoch bump (KIP-360, done by an idempotent client itself): the same id
	// at epoch 1 must restart at 0; epoch 0 is then fenced.
	send1 := func(pepoch int16, seq int32) int16 {
		b := dataBatchEpoch(t, 0, 0, 1, pid, pepoch, seq, false)
		return request[*kmsg.ProduceResponse](t, cl, produceReq("t", 0, b)).Topics[0].Partitions[0].ErrorCode
	}
	require.Equal(t, int16(45), send1(1, 5)) // a new epoch must start at 0
	require.Equal(t, int16(0), send1(1, 0))
	require.Equal(t, int16(47), send1(0, 5)) // the old epoch is fenced
	require.Equal(t, int64(6), s.log(t, "t", 0).LogEndOffset())
}

// TestFetchLeaderRules: unknown topic id, stale and future leader epochs,
// out-of-range offsets, a diverging epoch, absurd byte limits, sessions.
func TestFetchLeaderRules(t *testing.T) {
	s := startSite(t, Config{})
	spec := s.topic(t, "t", 1)
	l := s.log(t, "t", 0)
	require.NoError(t, l.Append(dataBatch(t, 0, 0, 5, -1, -1, false)))
	_, err := l.BumpLeaderEpoch(2) // epoch 3
	require.NoError(t, err)
	require.NoError(t, l.Append(dataBatch(t, 5, 3, 5, -1, -1, false)))
	cl := s.client(t)
	part := func(req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
		resp := request[*kmsg.FetchResponse](t, cl, req)
		require.Len(t, resp.Topics, 1)
		require.Len(t, resp.Topics[0].Partitions, 1)
		return resp.Topics[0].Partitions[0]
	}
	unknown := spec
	unknown.TopicID[15] ^= 0xff
	require.Equal(t, int16(100), part(fetchReq(unknown, 0, 0, nil)).ErrorCode)
	require.Equal(t, int16(3), part(fetchReq(spec, 4, 0, nil)).ErrorCode)
	require.Equal(t, int16(74), part(fetchReq(spec, 0, 0, func(p *kmsg.FetchRequestTopicPartition) { p.CurrentLeaderEpoch = 2 })).ErrorCode)
	require.Equal(t, int16(75), part(fetchReq(spec, 0, 0, func(p *kmsg.FetchRequestTopicPartition) { p.CurrentLeaderEpoch = 4 })).ErrorCode)
	require.Equal(t, int16(1), part(fetchReq(spec, 0, 11, nil)).ErrorCode)
	// A follower at offset 7 claiming epoch 0 diverged at 5 (epoch 0 ends there).
	p := part(fetchReq(spec, 0, 7, func(p *kmsg.FetchRequestTopicPartition) { p.LastFetchedEpoch = 0 }))
	require.Equal(t, int16(0), p.ErrorCode)
	require.Equal(t, [2]int64{0, 5}, [2]int64{int64(p.DivergingEpoch.Epoch), p.DivergingEpoch.EndOffset})
	require.Empty(t, p.RecordBatches)
	// Good fetch: HW, LSO, log start, both batches.
	p = part(fetchReq(spec, 0, 0, func(p *kmsg.FetchRequestTopicPartition) { p.CurrentLeaderEpoch = 3 }))
	require.Equal(t, [3]int64{10, 10, 0}, [3]int64{p.HighWatermark, p.LastStableOffset, p.LogStartOffset})
	whole, err := l.Read(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, whole, p.RecordBatches)
	// Absurd byte limits: negative and huge are clamped; a partition limit
	// of 0 returns no records; a tiny total still returns one batch.
	for _, mb := range [][2]int32{{-5, -5}, {1 << 30, 1 << 30}, {0, 1 << 20}, {1, 1}} {
		req := fetchReq(spec, 0, 0, func(p *kmsg.FetchRequestTopicPartition) { p.PartitionMaxBytes = mb[1] })
		req.MaxBytes = mb[0]
		p = part(req)
		require.Equal(t, int16(0), p.ErrorCode, "%v", mb)
		if mb[1] <= 0 {
			require.Empty(t, p.RecordBatches, "%v", mb)
		} else {
			require.NotEmpty(t, p.RecordBatches, "%v", mb)
		}
	}
	// A fetch naming a session that does not exist.
	req := fetchReq(spec, 0, 0, nil)
	req.SessionID, req.SessionEpoch = 5, 1
	require.Equal(t, int16(70), request[*kmsg.FetchResponse](t, cl, req).ErrorCode)
	// Metadata: topic id, leader epoch.
	md := request[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
	require.Len(t, md.Topics, 1)
	require.Equal(t, [16]byte(spec.TopicID), md.Topics[0].TopicID)
	require.Equal(t, int32(3), md.Topics[0].Partitions[0].LeaderEpoch)
	require.Equal(t, s.dst.ClusterID(), *md.ClusterID)
	// OffsetForLeaderEpoch: epoch 0 ends at 5; fenced with a stale current epoch.
	oreq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.LeaderEpoch, op.CurrentLeaderEpoch = 0, 0, 3
	ot.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{op}
	oreq.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{ot}
	or := request[*kmsg.OffsetForLeaderEpochResponse](t, cl, oreq).Topics[0].Partitions[0]
	require.Equal(t, [3]int64{0, 0, 5}, [3]int64{int64(or.ErrorCode), int64(or.LeaderEpoch), or.EndOffset})
	oreq.Topics[0].Partitions[0].CurrentLeaderEpoch = 1
	require.Equal(t, int16(74), request[*kmsg.OffsetForLeaderEpochResponse](t, cl, oreq).Topics[0].Partitions[0].ErrorCode)
	_ = fetcher.CodeNone
}

// TestFetchLongPollWokenByProduce: a fetch at the log end with a long
// MaxWait returns as soon as a produce appends, not at MaxWait.
func TestFetchLongPollWokenByProduce(t *testing.T) {
	s := startSite(t, Config{PollInterval: time.Hour}) // only the produce may wake it
	spec := s.topic(t, "t", 1)
	cl := s.client(t)
	req := fetchReq(spec, 0, 0, nil)
	req.MaxWaitMillis = 60000
	got := make(chan *kmsg.FetchResponse, 1)
	start := time.Now()
	go func() {
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			resp = nil
		}
		got <- resp
	}()
	pcl := s.client(t)
	presp := request[*kmsg.ProduceResponse](t, pcl, produceReq("t", 0, dataBatch(t, 0, 0, 2, -1, -1, false)))
	require.Equal(t, int16(0), presp.Topics[0].Partitions[0].ErrorCode)
	select {
	case resp := <-got:
		require.NotNil(t, resp)
		require.NotEmpty(t, resp.Topics[0].Partitions[0].RecordBatches)
		require.Less(t, time.Since(start), 30*time.Second)
	case <-time.After(30 * time.Second):
		t.Fatal("the fetch was not woken by the produce")
	}
}
