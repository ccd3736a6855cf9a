package compacted

import (
	"context"
	"errors"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProducerFenced: a second producer with the same transactional id fences the
// first: its appends fail with a FencedError carrying Kafka's error, for good, and none
// of them is replayed.
func TestProducerFenced(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	l := openLog(t, testConfig(c.ListenAddrs(), "state", 1))
	old := newProducer(t, l, "owner", 0)
	_, err := old.Append(ctx, recs("a", "1"))
	require.NoError(t, err)

	cur := newProducer(t, l, "owner", 0)
	for range 2 {
		_, err = old.Append(ctx, recs("zombie", "1"))
		require.ErrorIs(t, err, ErrFenced)
		var fe *FencedError
		require.True(t, errors.As(err, &fe))
		require.Equal(t, "owner", fe.TransactionalID)
		require.Error(t, fe.Cause, "the fence comes from Kafka")
		require.True(t, old.Fenced())
	}
	require.NoError(t, old.Close())
	_, err = old.Append(ctx, recs("zombie", "2"))
	require.ErrorIs(t, err, ErrFenced, "a closed fenced producer still reports the fence")

	_, err = cur.Append(ctx, recs("b", "2"))
	require.NoError(t, err)
	require.False(t, cur.Fenced())
	var keys []string
	for _, r := range replayAll(t, l, 0) {
		keys = append(keys, r.Key)
	}
	require.Equal(t, []string{"a", "b"}, keys)
	require.NoError(t, cur.Close())
	_, err = cur.Append(ctx, recs("c", "3"))
	require.ErrorIs(t, err, ErrClosed)
}

// TestProducerFailedAppend: a produce error aborts the transaction; nothing of it is
// replayed and the next append commits.
func TestProducerFailedAppend(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	l := openLog(t, testConfig(c.ListenAddrs(), "state", 1))
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Retry.Max = 1
	p, err := l.NewProducer(ProducerConfig{TransactionalID: "w", Sarama: cfg})
	require.NoError(t, err)
	defer p.Close()
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "state", Err: kerr.InvalidRecord})
	_, err = p.Append(ctx, recs("lost", "1"))
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrFenced)
	_, err = p.Append(ctx, recs("kept", "1"))
	require.NoError(t, err)
	got := replayAll(t, l, 0)
	require.Len(t, got, 1)
	require.Equal(t, "kept", got[0].Key)

	ran := false
	hooked, err := l.NewProducer(ProducerConfig{TransactionalID: "h", BeforeCommit: func() { ran = true }})
	require.NoError(t, err)
	defer hooked.Close()
	_, err = hooked.Append(ctx, recs("k", "v"))
	require.NoError(t, err)
	require.True(t, ran, "BeforeCommit runs")
}

func TestProducerConfig(t *testing.T) {
	c := newCluster(t)
	l := openLog(t, testConfig(c.ListenAddrs(), "state", 2))
	_, err := l.NewProducer(ProducerConfig{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = l.NewProducer(ProducerConfig{TransactionalID: "x", Partition: 2})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.NoError(t, l.Close())
	_, err = l.NewProducer(ProducerConfig{TransactionalID: "x"})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, l.Replay(context.Background(), 0, func(int64, []byte, []byte) error { return nil }), ErrClosed)
}
