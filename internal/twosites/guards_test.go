package twosites

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runJavaResult runs a Kafka tool's main class and returns its stdout,
// stderr and exit code (runJava requires success; the guards expect
// refusals).
func runJavaResult(t testing.TB, class string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, cp := java(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, class}, args...)...)
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
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -2
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
	require.Contains(t, out, "error", out)
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
