package twosites

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkatest"
	"github.com/kmirror/kmirror/records"
)

// rec is one consumed record.
type rec struct {
	Offset     int64
	Key, Value string
}

func kgoClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func request[R kmsg.Response](t testing.TB, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	require.NoError(t, err)
	return resp.(R)
}

// createTopic creates a plain topic on a site with CreateTopics.
func createTopic(t testing.TB, addr, topic string, partitions int32, opts ...kgo.Opt) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	req.TimeoutMillis = 10000
	resp := request[*kmsg.CreateTopicsResponse](t, kgoClient(t, addr, opts...), req)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode, "create topic %s", topic)
}

// topicID returns the topic's id from Metadata.
func topicID(t testing.TB, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp := request[*kmsg.MetadataResponse](t, cl, req)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode)
	return resp.Topics[0].TopicID
}

// produceKgo writes n records to each partition with a kgo idempotent
// producer (kgo's default) and returns their offsets by partition.
func produceKgo(t testing.TB, addr, topic string, partitions int32, n int, tag string, opts ...kgo.Opt) map[int32][]int64 {
	t.Helper()
	cl := kgoClient(t, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int32][]int64{}
	var rs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			rs = append(rs, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("%s-k%d", tag, i)),
				Value: []byte(fmt.Sprintf("%s-p%d-v%d", tag, p, i))})
		}
	}
	res := cl.ProduceSync(ctx, rs...)
	require.NoError(t, res.FirstErr())
	for _, r := range res {
		out[r.Record.Partition] = append(out[r.Record.Partition], r.Record.Offset)
	}
	return out
}

// rawLog reads a partition from offset 0 to its high watermark with raw
// Fetch requests and returns the record batch bytes exactly as served.
func rawLog(t testing.TB, addr, topic string, p int32, opts ...kgo.Opt) []byte {
	t.Helper()
	cl := kgoClient(t, addr, opts...)
	id := topicID(t, cl, topic)
	var out []byte
	for offset := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 8<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 8<<20
		rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		resp := request[*kmsg.FetchResponse](t, cl, req)
		require.Equal(t, int16(0), resp.ErrorCode)
		fp := resp.Topics[0].Partitions[0]
		require.Equal(t, int16(0), fp.ErrorCode, "fetch %s-%d at %d", topic, p, offset)
		if offset >= fp.HighWatermark {
			return out
		}
		it := records.NewIterator(fp.RecordBatches)
		n := 0
		for it.Next() {
			out = append(out, it.Batch()...)
			offset = it.Batch().NextOffset()
			n++
		}
		require.NoError(t, it.Err())
		require.NotZero(t, n, "fetch %s-%d at %d below HW %d returned no batch", topic, p, offset, fp.HighWatermark)
	}
}

// batches splits raw batch bytes.
func batches(t testing.TB, raw []byte) []records.Batch {
	t.Helper()
	var out []records.Batch
	it := records.NewIterator(raw)
	for it.Next() {
		out = append(out, it.Batch())
	}
	require.NoError(t, it.Err())
	require.False(t, it.Partial())
	return out
}

// logEnd is the next offset after the raw batches.
func logEnd(t testing.TB, raw []byte) int64 {
	bs := batches(t, raw)
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].NextOffset()
}

// dataRecords decodes the data records of raw batches (the logs under test
// hold no transactions: every data record is committed).
func dataRecords(t testing.TB, raw []byte) []rec {
	t.Helper()
	var out []rec
	for _, b := range batches(t, raw) {
		require.False(t, b.Attributes().IsTransactional())
		if b.Attributes().IsControl() {
			continue
		}
		rs, err := b.Records()
		require.NoError(t, err)
		for _, r := range rs {
			out = append(out, rec{Offset: b.BaseOffset() + int64(r.OffsetDelta), Key: string(r.Key), Value: string(r.Value)})
		}
	}
	return out
}

// readKgo consumes want[p] records of each partition from offset 0 with a
// kgo read_committed consumer.
func readKgo(t testing.TB, addr, topic string, want map[int32]int, opts ...kgo.Opt) map[int32][]rec {
	t.Helper()
	parts := map[int32]kgo.Offset{}
	for p := range want {
		parts[p] = kgo.NewOffset().At(0)
	}
	cl := kgoClient(t, addr, append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[int32][]rec{}
	done := func() bool {
		for p, n := range want {
			if len(got[p]) < n {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "kgo read of %s: got %d records", topic, len(got))
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("kgo fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], rec{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
		})
	}
	return got
}

// readSarama consumes want[p] records of each partition from the oldest
// offset with sarama partition consumers (read_committed).
func readSarama(t testing.TB, addr, topic string, want map[int32]int) map[int32][]rec {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	c, err := sarama.NewConsumer([]string{addr}, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	got := map[int32][]rec{}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for p, n := range want {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		require.NoError(t, err)
		for len(got[p]) < n {
			select {
			case m := <-pc.Messages():
				got[p] = append(got[p], rec{Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)})
			case err := <-pc.Errors():
				t.Fatalf("sarama %s-%d: %v", topic, p, err)
			case <-deadline.C:
				t.Fatalf("sarama %s-%d: %d of %d records within 30s", topic, p, len(got[p]), n)
			}
		}
		require.NoError(t, pc.Close())
	}
	return got
}

// produceRaw sends one Produce (acks all) of a plain batch to each partition
// and returns the error codes by partition.
func produceRaw(t testing.TB, addr, topic string, partitions int32) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < partitions; p++ {
		b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			BaseTimestamp: time.Now().UnixMilli()}, []records.Record{{Value: []byte("must not land")}})
		require.NoError(t, err)
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, b
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	resp := request[*kmsg.ProduceResponse](t, kgoClient(t, addr), req)
	out := map[int32]int16{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p.ErrorCode
	}
	return out
}

// produceSarama sends one message to partition p with a sarama sync
// producer and returns its error.
func produceSarama(t testing.TB, addr, topic string, p int32) error {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 0
	pr, err := sarama.NewSyncProducer([]string{addr}, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, pr.Close()) }()
	_, _, err = pr.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder("must not land")})
	return err
}

// java is kafkatest.Java.
func java(t testing.TB) (bin, classpath string) { t.Helper(); return kafkatest.Java(t) }

// runJava runs a Kafka tool's main class with stdin and returns stdout.
func runJava(t testing.TB, class string, stdin string, args ...string) string {
	t.Helper()
	bin, cp := java(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, class}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	require.NoError(t, cmd.Run(), "%s %v: stdout %s stderr %s", class, args, o.String(), e.String())
	return o.String()
}

// consoleProduce writes key:value lines to one partition's topic with Kafka's
// kafka-console-producer (idempotent, acks all: the Java client's defaults).
func consoleProduce(t testing.TB, addr, topic string, lines []string) {
	t.Helper()
	runJava(t, "org.apache.kafka.tools.ConsoleProducer", strings.Join(lines, "\n")+"\n",
		"--bootstrap-server", addr, "--topic", topic,
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
}

// consoleConsume reads n records of partition 0 from the earliest offset with
// Kafka's kafka-console-consumer (read_committed).
func consoleConsume(t testing.TB, addr, topic string, n int) []rec {
	t.Helper()
	out := runJava(t, "org.apache.kafka.tools.consumer.ConsoleConsumer", "",
		"--bootstrap-server", addr, "--topic", topic, "--partition", "0", "--offset", "earliest",
		"--isolation-level", "read_committed", "--max-messages", fmt.Sprint(n), "--timeout-ms", "30000",
		"--formatter-property", "print.offset=true", "--formatter-property", "print.key=true")
	var got []rec
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 3)
		require.Len(t, f, 3, "console consumer line %q", sc.Text())
		var r rec
		_, err := fmt.Sscanf(f[0], "Offset:%d", &r.Offset)
		require.NoError(t, err, "console consumer line %q", sc.Text())
		r.Key, r.Value = f[1], f[2]
		got = append(got, r)
	}
	return got
}
