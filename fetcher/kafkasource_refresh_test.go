package fetcher

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPartitionInfoSharesMetadataRequest: the PartitionInfo calls of many partitions
// of one topic made while its Metadata request is in flight wait for that request's
// answer instead of each sending its own (one request, not one per partition), and
// every call gets its partition's leader.
func TestPartitionInfoSharesMetadataRequest(t *testing.T) {
	c := newCluster(t, 1)
	createTopic(t, newClient(t, c), "wide", 64, nil)
	var asked atomic.Int64
	first := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.MetadataRequest)
		if len(req.Topics) == 1 && req.Topics[0].Topic != nil && *req.Topics[0].Topic == "wide" {
			asked.Add(1)
			once.Do(func() { <-first }) // held until every call below is waiting
		}
		return nil, nil, false
	})
	src, err := NewKafkaSource(KafkaSourceConfig{SeedBrokers: c.ListenAddrs(), MetadataMinAge: time.Hour})
	require.NoError(t, err)
	defer src.Close()
	var wg sync.WaitGroup
	errs := make([]error, 64)
	var started atomic.Int64
	for p := range int32(64) {
		wg.Go(func() {
			started.Add(1)
			info, err := src.PartitionInfo(t.Context(), "wide", p, true)
			if err == nil && info.Leader < 0 {
				err = ErrNoLeader
			}
			errs[p] = err
		})
	}
	require.Eventually(t, func() bool { return started.Load() == 64 && asked.Load() >= 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the other 63 calls reach refresh
	close(first)
	wg.Wait()
	for p, err := range errs {
		require.NoError(t, err, "partition %d", p)
	}
	require.Equal(t, int64(1), asked.Load(), "one Metadata request of the topic for 64 concurrent calls")
}
