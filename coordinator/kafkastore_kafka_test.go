package coordinator

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
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// TestKafkaStoreRealCompactDelete (real Kafka, cluster B): an existing state topic with
// cleanup.policy=compact,delete is refused with the topic and the policy as Kafka
// describes them; a topic the store creates is compact-only and loads what was
// appended.
func TestKafkaStoreRealCompactDelete(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	both, fresh := "kt-coordinator-both-"+suffix, "kt-coordinator-state-"+suffix

	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	adm, err := sarama.NewClusterAdmin(brokers, sc)
	require.NoError(t, err)
	defer adm.Close()
	t.Cleanup(func() { _ = adm.DeleteTopic(both); _ = adm.DeleteTopic(fresh) })
	policy := "compact,delete"
	require.NoError(t, adm.CreateTopic(both, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &policy}}, false))
	cfg := KafkaConfig{Brokers: brokers, Topic: both, NumPartitions: 2, ReplicationFactor: 1,
		TransactionalIDPrefix: "kt-coordinator-" + suffix, Timeout: 30 * time.Second}
	_, err = NewKafkaStore(ctx, cfg)
	require.ErrorIs(t, err, ErrTopicMismatch)
	var pe *CleanupPolicyError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, CleanupPolicyError{Topic: both, Policy: "compact,delete"}, *pe)

	cfg.Topic = fresh
	s, err := NewKafkaStore(ctx, cfg)
	require.NoError(t, err)
	defer s.Close()
	require.Empty(t, loadAll(t, s, 1, 1))
	require.NoError(t, s.Append(ctx, 1, 1, []records.StateRecord{stateRec("m", 0, statemachine.Preparing, 1)}))
	s2, err := NewKafkaStore(ctx, cfg)
	require.NoError(t, err)
	defer s2.Close()
	got := loadAll(t, s2, 1, 2)
	require.Len(t, got, 1)
	require.ErrorIs(t, s.Append(ctx, 1, 1, []records.StateRecord{stateRec("m", 1, statemachine.Preparing, 1)}), ErrFenced)
}
