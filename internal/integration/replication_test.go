package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/internal/kafkatest"
	kmirror "github.com/kmirror/kmirror/mirror"
)

// TestReplicationFactorFromDestination: a mirror topic's replication factor is the
// destination's (default.replication.factor in the KIP), never the source topic's. A
// topic with three replicas on cluster A mirrors into a one-node destination; once the
// destination's replication factor is 2, the next start is refused with
// INVALID_REPLICATION_FACTOR and creates nothing.
func TestReplicationFactorFromDestination(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.Brokers(t, kafkatest.A)
	cl := kafkatest.NewClient(t, brokers)
	first, second := kafkatest.TopicName(t)+"-a", kafkatest.TopicName(t)+"-b"
	kafkatest.CreateTopic(t, cl, first, 1, 3, nil)
	kafkatest.CreateTopic(t, cl, second, 1, 3, nil)

	f := startFacade(t, brokers, "rf", -1, nil)
	f.start(t, first) // three replicas on the source, one on the destination
	require.NoError(t, f.dest.SetReplicationFactor(2))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := f.m.StartMirrorTopics(ctx, f.name, []string{second}, kmirror.StartOptions{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, admin.CodeInvalidReplicationFactor, admin.CodeOf(res[0].Err), "%v", res[0].Err)
	_, exists := f.dest.Topic(second)
	require.False(t, exists, "no destination topic")
	_, known := f.m.Controller().Topic(second)
	require.False(t, known, "no mirror topic")
}
