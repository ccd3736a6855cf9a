package twosites

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/records"
)

// runJavaResult runs a Kafka tool's main class and returns its stdout,
// stderr and exit code (runJava requires success; the guards expect
// refusals).
func runJavaResult(t testing.TB, class string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runJavaInput(t, class, "", args...)
}

// runJavaInput is runJavaResult with stdin. A tool still running after 60 s
// is killed: its exit code is then -1.
func runJavaInput(t testing.TB, class, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, cp := java(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, class}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return o.String(), e.String(), ee.ExitCode()
	}
	require.NoError(t, err, "%s %v", class, args)
	return o.String(), e.String(), 0
}

// partitionCount returns the partition count of topic on the site at addr.
func partitionCount(t testing.TB, addr, topic string) int {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp := request[*kmsg.MetadataResponse](t, kgoClient(t, addr), req)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode, "metadata of %s", topic)
	return len(resp.Topics[0].Partitions)
}

// logStart returns the earliest offset of partition 0 of topic.
func logStart(t testing.TB, addr, topic string) int64 {
	t.Helper()
	return listOffset(t, addr, topic, -2)
}

// listOffset answers ListOffsets for partition 0 of topic at timestamp ts
// (-2 earliest, -1 latest).
func listOffset(t testing.TB, addr, topic string, ts int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	resp := request[*kmsg.ListOffsetsResponse](t, kgoClient(t, addr), req)
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), p.ErrorCode)
	return p.Offset
}

// TestMirrorTopicGuardsKafkaTools: Kafka's own kafka-topics --alter
// --partitions, kafka-topics --delete and kafka-delete-records against a
// kmirrord site are refused on a mirror topic that is MIRRORING (nothing
// changes), work on a plain topic of the same site, and work on the mirror
// topic once it is STOPPED.
func TestMirrorTopicGuardsKafkaTools(t *testing.T) {
	const guarded, plain = "guarded", "plain"
	a, b := newSite(t, "GA"), newSite(t, "GB")
	createTopic(t, a.addr, guarded, 2)
	produceKgo(t, a.addr, guarded, 2, 10, "g")
	createTopic(t, b.addr, plain, 1)
	produceKgo(t, b.addr, plain, 1, 10, "p")
	b.createMirror("a-to-b", a)
	b.ctl("--start", "--mirror", "a-to-b", "--topics", guarded)
	b.waitPartitions("a-to-b", guarded, 2, "caught up", func(p partitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == 10
	})

	// Producers that do not know kmirror's codes fail fast, without a
	// retry loop, and nothing is appended (see produceRefused).
	produceRefused(t, b.addr, guarded)

	const topics = "org.apache.kafka.tools.TopicCommand"
	alter := func(topic string) (string, int) {
		out, errOut, code := runJavaResult(t, topics, "--bootstrap-server", b.addr, "--alter", "--topic", topic, "--partitions", "3")
		return out + errOut, code
	}
	out, code := alter(guarded)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "not STOPPED", "the refusal names the cause")
	t.Logf("kafka-topics --alter on a MIRRORING topic:\n%s", out)
	require.Equal(t, 2, partitionCount(t, b.addr, guarded))
	out, code = alter(plain)
	require.Equal(t, 0, code, out)
	require.Equal(t, 3, partitionCount(t, b.addr, plain))

	deleteRecords := func(topic string) string {
		file := filepath.Join(t.TempDir(), "offsets.json")
		require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`{"partitions":[{"topic":%q,"partition":0,"offset":5}],"version":1}`, topic)), 0o600))
		out, errOut, _ := runJavaResult(t, "org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", b.addr, "--offset-json-file", file)
		return out + errOut
	}
	out = deleteRecords(guarded)
	require.Contains(t, out, "InvalidTopicException", "the refusal, as a code the tool knows (DeleteRecords has no error message)")
	t.Logf("kafka-delete-records on a MIRRORING topic:\n%s", out)
	require.Equal(t, int64(0), logStart(t, b.addr, guarded), "the mirror partition keeps its records")
	out = deleteRecords(plain)
	require.Contains(t, out, "low_watermark: 5", out)
	require.Equal(t, int64(5), logStart(t, b.addr, plain))

	out, errOut, code := runJavaResult(t, topics, "--bootstrap-server", b.addr, "--delete", "--topic", guarded)
	require.NotEqual(t, 0, code, out+errOut)
	require.Contains(t, out+errOut, "not STOPPED")
	require.Equal(t, 2, partitionCount(t, b.addr, guarded))

	b.ctl("--stop", "--mirror", "a-to-b", "--topics", guarded)
	b.waitState("a-to-b", guarded, 2, "STOPPED")
	out = deleteRecords(guarded)
	require.Contains(t, out, "low_watermark: 5", out)
	require.Equal(t, int64(5), logStart(t, b.addr, guarded))
	out, code = alter(guarded)
	require.Equal(t, 0, code, out)
	require.Equal(t, 3, partitionCount(t, b.addr, guarded))
	a.term()
	b.term()
}

// produceRefused: a kgo producer and Kafka's kafka-console-producer writing
// to topic, a mirror topic that is not STOPPED, fail fast with
// INVALID_TOPIC_EXCEPTION (the code a Kafka broker answers a write to an
// internal topic; kmirror's READ_ONLY_TOPIC is unknown to both clients), the
// Java one showing the message that names READ_ONLY_TOPIC and the mirror;
// the log end does not move.
func produceRefused(t *testing.T, addr, topic string) {
	t.Helper()
	end := listOffset(t, addr, topic, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var produces atomic.Int32
	cl := kgoClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.WithHooks(produceHook{&produces}))
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidTopicException)
	require.NoError(t, ctx.Err(), "kgo failed at once, not at its deadline")
	require.LessOrEqual(t, produces.Load(), int32(2), "no retry loop (one Produce per partition tried)")

	// The wire message (kgo builds its error from the code alone).
	batch, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()},
		[]records.Record{{Value: []byte("raw")}})
	require.NoError(t, err)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	p := request[*kmsg.ProduceResponse](t, kgoClient(t, addr), req).Topics[0].Partitions[0]
	require.Equal(t, kerr.InvalidTopicException.Code, p.ErrorCode)
	require.NotNil(t, p.ErrorMessage)
	require.Contains(t, *p.ErrorMessage, "READ_ONLY_TOPIC")
	require.Contains(t, *p.ErrorMessage, "mirror")

	// delivery.timeout.ms is 120 s: a retried error would outlive the 60 s
	// the tool is given and be killed (exit code -1).
	out, errOut, code := runJavaInput(t, "org.apache.kafka.tools.ConsoleProducer", "x\n", "--bootstrap-server", addr, "--topic", topic)
	errOut = out + errOut
	require.NotEqual(t, -1, code, "kafka-console-producer ended on its own: %s", errOut)
	require.Contains(t, errOut, "InvalidTopicException", errOut)
	require.Contains(t, errOut, "READ_ONLY_TOPIC", errOut)
	require.Contains(t, errOut, "mirror", errOut)
	t.Logf("kafka-console-producer on a MIRRORING topic:\n%s", errOut)
	require.Equal(t, end, listOffset(t, addr, topic, -1), "nothing appended")
}

// produceHook counts the Produce requests a kgo client writes.
type produceHook struct{ n *atomic.Int32 }

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h produceHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Produce) && err == nil {
		h.n.Add(1)
	}
}
