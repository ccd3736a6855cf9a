package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/internal/compacted/compactedtest"
	"github.com/kmirror/kmirror/internal/kafkatest"
)

// TestKafkaControllerLogReal (real Kafka, cluster B): compact,delete is refused with the
// topic and the policy named; a created topic holds the controller's state across a
// reopen, and the reopen fences the first writer.
func TestKafkaControllerLogReal(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	both := compactedtest.Topic(t, brokers, "kt-controller-both")
	compactedtest.CreateTopic(t, brokers, both, 1, "compact,delete")
	_, err := OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: brokers, Topic: both})
	require.ErrorIs(t, err, ErrControllerTopic)
	var pe *CleanupPolicyError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, CleanupPolicyError{Topic: both, Policy: "compact,delete"}, *pe)

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
	_, err = c1.StartTopics(ctx, "m", []TopicMeta{{Name: "a", TopicID: id(1), NumPartitions: 2}}, nil, nil)
	require.NoError(t, err)
	c2 := open()
	require.Equal(t, viewOf(c1), viewOf(c2))
	_, err = c1.PauseTopics(ctx, "m", []string{"a"}, -1)
	require.Error(t, err, "the first writer is fenced")
}
