package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

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
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	both, topic := "kt-controller-both-"+suffix, "kt-controller-"+suffix

	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	adm, err := sarama.NewClusterAdmin(brokers, sc)
	require.NoError(t, err)
	defer adm.Close()
	t.Cleanup(func() { _ = adm.DeleteTopic(both); _ = adm.DeleteTopic(topic) })
	policy := "compact,delete"
	require.NoError(t, adm.CreateTopic(both, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &policy}}, false))
	_, err = OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: brokers, Topic: both})
	require.ErrorIs(t, err, ErrControllerTopic)
	var pe *CleanupPolicyError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, CleanupPolicyError{Topic: both, Policy: "compact,delete"}, *pe)

	cfg := KafkaControllerLogConfig{Brokers: brokers, Topic: topic, ReplicationFactor: 1}
	l1, err := OpenKafkaControllerLog(ctx, cfg)
	require.NoError(t, err)
	defer l1.Close()
	c1, err := OpenController(ctx, l1)
	require.NoError(t, err)
	require.NoError(t, c1.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "src:9092"}))
	_, err = c1.StartTopics(ctx, "m", []TopicMeta{{Name: "a", TopicID: id(1), NumPartitions: 2}}, nil, nil)
	require.NoError(t, err)

	l2, err := OpenKafkaControllerLog(ctx, cfg)
	require.NoError(t, err)
	defer l2.Close()
	c2, err := OpenController(ctx, l2)
	require.NoError(t, err)
	require.Equal(t, viewOf(c1), viewOf(c2))
	_, err = c1.PauseTopics(ctx, "m", []string{"a"}, -1)
	require.Error(t, err, "the first writer is fenced")
}
