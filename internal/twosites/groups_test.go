package twosites

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerGroupsDescribe: Kafka's own kafka-consumer-groups --describe works against a
// site: the group offsets committed there (as kmirror's group-offset sync commits them on
// a destination) are listed with the log end offsets and the lag.
func TestConsumerGroupsDescribe(t *testing.T) {
	s := newSite(t, "G")
	createTopic(t, s.addr, "orders", 2)
	produceKgo(t, s.addr, "orders", 2, 10, "g") // 10 records per partition
	cl := kgoClient(t, s.addr)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "audit", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "orders"
	for p, off := range []int64{3, 2} {
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Partition, op.Offset = int32(p), off
		ot.Partitions = append(ot.Partitions, op)
	}
	oc.Topics = append(oc.Topics, ot)
	resp := request[*kmsg.OffsetCommitResponse](t, cl, oc)
	for _, p := range resp.Topics[0].Partitions {
		require.Equal(t, int16(0), p.ErrorCode)
	}
	out := runJava(t, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
		"", "--bootstrap-server", s.addr, "--describe", "--group", "audit")
	require.Regexp(t, regexp.MustCompile(`(?m)^audit\s+orders\s+0\s+3\s+10\s+7\s`), out)
	require.Regexp(t, regexp.MustCompile(`(?m)^audit\s+orders\s+1\s+2\s+10\s+8\s`), out)
}

// TestConsoleConsumerGroup: Kafka's kafka-console-consumer with --group (the
// Java KafkaConsumer, classic protocol: JoinGroup, SyncGroup, Heartbeat,
// OffsetCommit as a member, LeaveGroup) consumes a site's topic; the group's
// commits are where it stopped (kafka-consumer-groups --describe: lag 0), and
// a second run of the group reads only what was produced since.
func TestConsoleConsumerGroup(t *testing.T) {
	s := newSite(t, "J", "-group.initial.rebalance.delay.ms", "0")
	createTopic(t, s.addr, "orders", 2)
	produceKgo(t, s.addr, "orders", 2, 5, "first")
	consume := func(n int) string {
		t.Helper()
		return runJava(t, "org.apache.kafka.tools.consumer.ConsoleConsumer", "",
			"--bootstrap-server", s.addr, "--topic", "orders", "--group", "jg", "--from-beginning",
			"--max-messages", strconv.Itoa(n), "--timeout-ms", "30000",
			"--consumer-property", "group.protocol=classic", "--consumer-property", "auto.commit.interval.ms=100")
	}
	out := consume(10)
	require.Equal(t, 10, strings.Count(out, "first-p"), "output: %s", out)
	desc := runJava(t, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
		"", "--bootstrap-server", s.addr, "--describe", "--group", "jg")
	require.Regexp(t, regexp.MustCompile(`(?m)^jg\s+orders\s+0\s+5\s+5\s+0\s`), desc)
	require.Regexp(t, regexp.MustCompile(`(?m)^jg\s+orders\s+1\s+5\s+5\s+0\s`), desc)

	produceKgo(t, s.addr, "orders", 2, 2, "second")
	out = consume(4)
	require.Equal(t, 4, strings.Count(out, "second-p"), "output: %s", out)
	require.NotContains(t, out, "first-p", "the group resumes from its commits")
}
