package localdest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
)

// TestClientCreatePartitionsGuard: refused on a read-only (mirror, not STOPPED)
// topic, unknown and shrinking counts get their codes, and a growth once writable is
// durable.
func TestClientCreatePartitionsGuard(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	require.NoError(t, d.CreateTopic(ctx, dest.TopicSpec{Name: "m", TopicID: [16]byte{1}, Partitions: 2}))
	require.NoError(t, d.SetReadOnly("m", 1, true))
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, admin.CodeOf(d.ClientCreatePartitions(ctx, "m", 3)))
	require.Equal(t, admin.CodeUnknownTopicOrPartition, admin.CodeOf(d.ClientCreatePartitions(ctx, "nope", 3)))
	require.NoError(t, d.SetReadOnly("m", 1, false))
	require.Equal(t, admin.CodeInvalidRequest, admin.CodeOf(d.ClientCreatePartitions(ctx, "m", 1)))
	require.NoError(t, d.ClientCreatePartitions(ctx, "m", 2), "the same count changes nothing")
	require.NoError(t, d.ClientCreatePartitions(ctx, "m", 3))
	require.NoError(t, d.Close())

	d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	spec, ok := d.Topic("m")
	require.True(t, ok)
	require.Equal(t, int32(3), spec.Partitions)
}
