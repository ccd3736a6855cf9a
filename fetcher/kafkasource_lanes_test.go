package fetcher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Two fetch loops on one broker long-poll side by side, each on its own
// connection: a loop whose partition has data is answered while the other's
// long poll on an idle partition is still held by the broker. With one
// fetch connection (FetchConnections 1) the second waits for the first's
// long poll to end, since a broker serves one connection's requests in turn.
func TestKafkaSourceLoopsLongPollSideBySide(t *testing.T) {
	for _, tc := range []struct {
		name        string
		connections int
		sideBySide  bool
	}{{"own connections", 0, true}, {"one connection", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1)
			cl := newClient(t, c, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			createTopic(t, cl, "t", 2, nil)
			require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Partition: 1, Value: []byte("v")}).FirstErr())
			src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: c.ListenAddrs(), MaxWait: 3 * time.Second, FetchConnections: tc.connections})
			require.NoError(t, err)
			defer src.Close()
			info, err := src.PartitionInfo(context.Background(), "t", 0, true)
			require.NoError(t, err)
			fetch := func(fs *FetchSessions, p int32, offset int64) ([]FetchResult, error) {
				return src.Fetch(WithFetchSessions(context.Background(), fs), []FetchPartition{{Topic: "t", Partition: p,
					TopicID: info.TopicID, FetchOffset: offset, LastFetchedEpoch: -1, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}})
			}
			var a, b FetchSessions
			// Prime both loops' sessions (their first fetch is sent without a long poll).
			_, err = fetch(&a, 0, 0)
			require.NoError(t, err)
			_, err = fetch(&b, 1, 1)
			require.NoError(t, err)

			idle := make(chan struct{})
			go func() {
				defer close(idle)
				_, _ = fetch(&a, 0, 0) // nothing to read: held for MaxWait
			}()
			require.Eventually(t, func() bool { // a's long poll holds its lane's gate
				a.mu.Lock()
				lane := a.lane
				a.mu.Unlock()
				g := lane.gate(info.Leader)
				g.mu.Lock()
				defer g.mu.Unlock()
				return g.busy
			}, 5*time.Second, time.Millisecond)
			res, err := fetch(&b, 1, 0) // a record to read: answered at once
			require.NoError(t, err)
			require.NotEmpty(t, res[0].Records)
			select {
			case <-idle:
				require.False(t, tc.sideBySide, "b waited for a's long poll on its own connection")
			default:
				require.True(t, tc.sideBySide, "b was answered during a's long poll on the same connection")
			}
			<-idle
		})
	}
}
