package compacted

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func testConfig(brokers []string, topic string, parts int32) Config {
	return Config{Brokers: brokers, Topic: topic, Partitions: parts, RetryTimeout: 5 * time.Second}
}

func openLog(t testing.TB, cfg Config) *Log {
	t.Helper()
	l, err := Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func newProducer(t testing.TB, l *Log, txnID string, partition int32) *Producer {
	t.Helper()
	p, err := l.NewProducer(ProducerConfig{TransactionalID: txnID, Partition: partition})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// replayed is one record a replay passed to its callback.
type replayed struct {
	Offset     int64
	Key, Value string
	Tombstone  bool
}

func replayAll(t testing.TB, l *Log, partition int32) []replayed {
	t.Helper()
	got, err := tryReplay(context.Background(), l, partition)
	require.NoError(t, err)
	return got
}

func tryReplay(ctx context.Context, l *Log, partition int32) ([]replayed, error) {
	var got []replayed
	err := l.Replay(ctx, partition, func(off int64, key, value []byte) error {
		got = append(got, replayed{Offset: off, Key: string(key), Value: string(value), Tombstone: value == nil})
		return nil
	})
	return got, err
}

func recs(kv ...string) []Record {
	var out []Record
	for i := 0; i+1 < len(kv); i += 2 {
		r := Record{Key: []byte(kv[i])}
		if kv[i+1] != "<nil>" {
			r.Value = []byte(kv[i+1])
		}
		out = append(out, r)
	}
	return out
}
