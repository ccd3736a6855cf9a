package mirror

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
)

func requireCode(t *testing.T, want admin.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, admin.CodeOf(err), "error: %v", err)
}

func klogCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func id(b byte) records.UUID { return records.UUID{b, 1, 2, 3} }

func testController(t *testing.T) (*Controller, *MemoryControllerLog) {
	t.Helper()
	log := &MemoryControllerLog{}
	c, err := OpenController(context.Background(), log)
	require.NoError(t, err)
	return c, log
}

func ptr(s string) *string { return &s }
