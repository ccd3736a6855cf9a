package twosites

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerGroupsList: Kafka's own kafka-consumer-groups --list lists a site's groups.
// The Java admin client sends ListGroups v5 with TypesFilter "Classic" and "Consumer",
// which the site compares as Kafka does, ignoring case.
func TestConsumerGroupsList(t *testing.T) {
	s := newSite(t, "L")
	createTopic(t, s.addr, "orders", 1)
	cl := kgoClient(t, s.addr)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "audit", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "orders"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Partition, op.Offset = 0, 0
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	resp := request[*kmsg.OffsetCommitResponse](t, cl, oc)
	require.Equal(t, int16(0), resp.Topics[0].Partitions[0].ErrorCode)

	out := runJava(t, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
		"", "--bootstrap-server", s.addr, "--list")
	require.Regexp(t, regexp.MustCompile(`(?m)^audit$`), out)
	out = runJava(t, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
		"", "--bootstrap-server", s.addr, "--list", "--type", "classic", "--state", "empty")
	require.Regexp(t, regexp.MustCompile(`(?m)^audit\s+Empty\s*$|(?m)^audit\s+Empty\s+Classic\s*$|(?m)^audit\s+Classic\s+Empty\s*$`), out)
}
