package dataplane

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// TestProducerIDsNeverReusedAfterRestart: the ids InitProducerId hands out
// (idempotent and transactional) over a file destination are all distinct
// across restarts of the data plane and the destination, and a restart
// skips what was left of its block.
func TestProducerIDsNeverReusedAfterRestart(t *testing.T) {
	root := t.TempDir()
	first, _ := mirror.LocalProducerIDRange("restart")
	seen := map[int64]bool{}
	for round := int64(0); round < 3; round++ {
		dst, err := mirror.OpenFileDestination(root, "restart", fetcher.FileLogOptions{})
		require.NoError(t, err)
		dp, err := New(Config{Destination: dst, AdvertisedHost: "h", AdvertisedPort: 1})
		require.NoError(t, err)
		// 350 idempotent producers and one transactional id re-initialized
		// 350 times (one id, then epoch bumps): 351 ids of the round's block.
		for i := 0; i < 700; i++ {
			req := kmsg.NewPtrInitProducerIDRequest()
			if i%2 == 1 {
				id := "txn"
				req.TransactionalID, req.TransactionTimeoutMillis = &id, 1000
			}
			resp := serve[*kmsg.InitProducerIDResponse](t, dp, req)
			require.Equal(t, int16(0), resp.ErrorCode)
			if i == 0 {
				require.Equal(t, first+round*mirror.ProducerIDBlockSize, resp.ProducerID, "round %d starts a new block", round)
			}
			if resp.ProducerEpoch == 0 {
				require.False(t, seen[resp.ProducerID], "round %d: id %d handed out twice", round, resp.ProducerID)
				seen[resp.ProducerID] = true
			}
		}
		require.NoError(t, dp.Close())
		require.NoError(t, dst.Close())
	}
	require.Len(t, seen, 3*351)
}

// failingIDs is an allocator that cannot reserve a block.
type failingIDs struct{ err error }

func (f failingIDs) AllocateProducerIDs(context.Context) (mirror.ProducerIDBlock, error) {
	return mirror.ProducerIDBlock{}, f.err
}

// TestProducerIDAllocationFails: without a block InitProducerId hands out
// nothing: COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka answers while
// waiting for a block) for a write error, UNKNOWN_SERVER_ERROR once the
// range is used up; a Destination without an allocator is a config error.
func TestProducerIDAllocationFails(t *testing.T) {
	dst := mirror.NewMemoryDestination("c", fetcher.MemoryLogOptions{})
	defer func() { _ = dst.Close() }()
	for _, c := range []struct {
		err  error
		code admin.Code
	}{{errors.New("disk full"), admin.CodeCoordinatorLoadInProgress}, {mirror.ErrProducerIDsExhausted, admin.CodeUnknownServerError}} {
		dp, err := New(Config{Destination: dst, AdvertisedHost: "h", AdvertisedPort: 1, ProducerIDs: failingIDs{c.err}})
		require.NoError(t, err)
		resp := serve[*kmsg.InitProducerIDResponse](t, dp, kmsg.NewPtrInitProducerIDRequest())
		require.Equal(t, [3]int64{int64(c.code), -1, -1}, [3]int64{int64(resp.ErrorCode), resp.ProducerID, int64(resp.ProducerEpoch)})
		id := "t"
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 1000
		resp = serve[*kmsg.InitProducerIDResponse](t, dp, req)
		require.Equal(t, int16(c.code), resp.ErrorCode)
		require.NoError(t, dp.Close())
	}
	_, err := New(Config{Destination: struct{ mirror.Destination }{dst}, AdvertisedHost: "h", AdvertisedPort: 1})
	require.ErrorIs(t, err, ErrConfig)
}
