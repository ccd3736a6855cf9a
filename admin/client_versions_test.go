package admin

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClientServes: the admin server advertises the mirror keys, a plain Kafka
// cluster (kfake) does not, so that a peer can tell "no mirror API" by type.
func TestClientServes(t *testing.T) {
	ctx := context.Background()
	_, addr := startServer(t, ServerConfig{Handler: UnimplementedHandler{}})
	ok, err := newKgo(t, addr).Serves(ctx, KeyListClusterMirrors)
	require.NoError(t, err)
	require.True(t, ok)

	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	cl, err := kgo.NewClient(append(ClientOpts(), kgo.SeedBrokers(fake.ListenAddrs()...))...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	plain := NewClient(cl)
	ok, err = plain.Serves(ctx, KeyListClusterMirrors)
	require.NoError(t, err)
	require.False(t, ok)
	// The RPC itself fails on the client side, with no *Error: Serves decides.
	_, err = plain.ListClusterMirrors(ctx, NewPtrListClusterMirrorsRequest())
	require.Error(t, err)
	var ae *Error
	require.False(t, errors.As(err, &ae))
}
