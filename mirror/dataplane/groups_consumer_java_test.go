package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/internal/kafkatest"
	"github.com/kmirror/kmirror/mirror"
)

// kafkaJava is kafkatest.Java.
func kafkaJava(t *testing.T) (bin, classpath string) { t.Helper(); return kafkatest.Java(t) }

// javaConsumer is one kafka-console-consumer in group "group" with the
// KIP-848 consumer protocol, printing "partition value" lines.
type javaConsumer struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	errb bytes.Buffer
	done chan error
}

func startJavaConsumer(t *testing.T, s *site, topic, group string, args ...string) *javaConsumer {
	t.Helper()
	bin, cp := kafkaJava(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	all := append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", s.addr, "--topic", topic, "--group", group, "--from-beginning",
		"--consumer-property", "group.protocol=consumer",
		"--formatter-property", "print.partition=true", "--formatter-property", "print.value=true"}, args...)
	jc := &javaConsumer{cmd: exec.CommandContext(ctx, bin, all...), done: make(chan error, 1)}
	jc.cmd.Stdout, jc.cmd.Stderr = &jc.out, &jc.errb
	require.NoError(t, jc.cmd.Start())
	go func() { jc.done <- jc.cmd.Wait() }()
	t.Cleanup(func() {
		if jc.cmd.ProcessState == nil {
			_ = jc.cmd.Process.Kill()
		}
	})
	return jc
}

// wait waits for the consumer to exit and returns its records by partition.
func (jc *javaConsumer) wait(t *testing.T) map[int32][]string {
	t.Helper()
	err := <-jc.done
	require.NoError(t, err, "stdout %s\nstderr %s", jc.out.String(), jc.errb.String())
	got := map[int32][]string{}
	for _, line := range strings.Split(strings.TrimSpace(jc.out.String()), "\n") {
		var p int32
		var v string
		if _, err := fmt.Sscanf(line, "Partition:%d\t%s", &p, &v); err == nil {
			got[p] = append(got[p], v)
		}
	}
	return got
}

func flatten(m map[int32][]string) []string {
	var out []string
	for _, vs := range m {
		out = append(out, vs...)
	}
	sort.Strings(out)
	return out
}

// TestConsumerGroupJavaConsole: Kafka's kafka-console-consumer with
// group.protocol=consumer consumes a site's topic as a member of a KIP-848
// group, commits at its member epoch, and a restarted consumer resumes from
// the committed offsets; two console consumers split the partitions.
func TestConsumerGroupJavaConsole(t *testing.T) {
	kafkaJava(t)
	s := startSite(t, consumerSiteConfig())
	const parts = 2
	s.topic(t, "j", parts)
	produceN(t, s, "j", "r1", parts, 5)

	first := startJavaConsumer(t, s, "j", "jg", "--max-messages", "10", "--timeout-ms", "30000").wait(t)
	require.Len(t, flatten(first), 10, "%v", first)
	for p := int32(0); p < parts; p++ {
		require.Equal(t, int64(5), s.dst.CommittedOffsets("jg")[mirror.TopicPartition{Topic: "j", Partition: p}],
			"committed offsets %v", s.dst.CommittedOffsets("jg"))
	}
	require.Eventually(t, func() bool { return !s.dp.GroupActive("jg") }, 10*time.Second, 10*time.Millisecond, "the consumer left")

	// Restarted, it resumes after what it committed.
	produceN(t, s, "j", "r2", parts, 3)
	second := startJavaConsumer(t, s, "j", "jg", "--max-messages", "6", "--timeout-ms", "30000").wait(t)
	got := flatten(second)
	require.Len(t, got, 6, "%v", second)
	for _, v := range got {
		require.True(t, strings.HasPrefix(v, "r2-"), "re-read %q after the restart: %v", v, got)
	}

	// Two consumers of a new group split the partitions of an empty topic:
	// once each holds one, the records produced reach each consumer from its
	// partition only.
	s.topic(t, "s", parts)
	a := startJavaConsumer(t, s, "s", "split", "--timeout-ms", "20000")
	b := startJavaConsumer(t, s, "s", "split", "--timeout-ms", "20000")
	require.Eventually(t, func() bool {
		d := consumerDescribe(t, s, "split")
		if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 2 {
			return false
		}
		for _, m := range d.Members {
			if len(m.Assignment.TopicPartitions) != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != 1 {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "two members with one partition each")
	produceN(t, s, "s", "r3", parts, 5)
	ga, gb := a.wait(t), b.wait(t)
	require.Len(t, ga, 1, "a read %v", ga)
	require.Len(t, gb, 1, "b read %v", gb)
	for p := range ga {
		_, shared := gb[p]
		require.False(t, shared, "both consumers read partition %d", p)
	}
	require.Len(t, append(flatten(ga), flatten(gb)...), 10)
}
