package controller

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/internal/compacted/compactedtest"
)

// TestKafkaControllerLogReal (real Kafka, cluster B): every policy but compact alone is
// refused with the topic and the policy named; a created topic holds the controller's state across a
// reopen, and the reopen fences the first writer.
func TestKafkaControllerLogReal(t *testing.T) {
	brokers, ctx := compactedtest.ClusterB(t)
	for _, policy := range []string{"delete", "delete,compact", "compact,delete"} {
		topic := compactedtest.Topic(t, brokers, "kt-controller-policy")
		compactedtest.CreateTopic(t, brokers, topic, 1, policy)
		_, err := OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: brokers, Topic: topic})
		require.ErrorIs(t, err, ErrControllerTopic, policy)
		pe := new(CleanupPolicyError)
		require.ErrorAs(t, err, &pe, policy)
		require.Equal(t, topic, pe.Topic)
		require.Equal(t, policy, pe.Policy)
	}

	cfg := KafkaControllerLogConfig{Brokers: brokers, Topic: compactedtest.Topic(t, brokers, "kt-controller"), ReplicationFactor: 1}
	open := func() *Controller {
		l, err := OpenKafkaControllerLog(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		c, err := OpenController(ctx, l)
		require.NoError(t, err)
		return c
	}
	c1 := open()
	require.NoError(t, c1.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "src:9092"}))
	_, err := c1.StartTopics(ctx, "m", []TopicMeta{{Name: "a", TopicID: id(1), NumPartitions: 2}}, nil, nil)
	require.NoError(t, err)
	c2 := open()
	require.Equal(t, viewOf(c1), viewOf(c2))
	_, err = c1.PauseTopics(ctx, "m", []string{"a"}, -1)
	require.Error(t, err, "the first writer is fenced")
}
