package coordinator

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/internal/compacted/compactedtest"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// TestKafkaStoreRealCompactDelete (real Kafka, cluster B): an existing state topic with
// cleanup.policy=compact,delete is refused with the topic and the policy as Kafka
// describes them; a topic the store creates loads what was appended, and a second
// store's load fences the first.
func TestKafkaStoreRealCompactDelete(t *testing.T) {
	brokers, ctx := compactedtest.ClusterB(t)
	both := compactedtest.Topic(t, brokers, "kt-coordinator-both")
	compactedtest.CreateTopic(t, brokers, both, 2, "compact,delete")
	cfg := KafkaConfig{Brokers: brokers, Topic: both, NumPartitions: 2, ReplicationFactor: 1,
		TransactionalIDPrefix: both, Timeout: 30 * time.Second}
	_, err := NewKafkaStore(ctx, cfg)
	require.ErrorIs(t, err, ErrTopicMismatch)
	var pe *CleanupPolicyError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, CleanupPolicyError{Topic: both, Policy: "compact,delete"}, *pe)

	cfg.Topic = compactedtest.Topic(t, brokers, "kt-coordinator-state")
	first := newKafkaStore(t, cfg)
	require.Empty(t, loadAll(t, first, 1, 1))
	require.NoError(t, first.Append(ctx, 1, 1, []records.StateRecord{stateRec("m", 0, statemachine.Preparing, 1)}))
	require.Len(t, loadAll(t, newKafkaStore(t, cfg), 1, 2), 1)
	err = first.Append(ctx, 1, 1, []records.StateRecord{stateRec("m", 1, statemachine.Preparing, 1)})
	require.ErrorIs(t, err, ErrFenced)
}
