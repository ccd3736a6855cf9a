package localdest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

func TestShareStartOffsetsDurable(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	tp0, tp1 := dest.TopicPartition{Topic: "orders", Partition: 0}, dest.TopicPartition{Topic: "orders", Partition: 1}
	require.Nil(t, d.ShareStartOffsets("sg"))
	require.NoError(t, d.SetShareStartOffsets("sg", map[dest.TopicPartition]int64{tp0: 5, tp1: 7}))
	require.NoError(t, d.SetShareStartOffsets("sg", map[dest.TopicPartition]int64{tp1: 9}), "a partial set keeps the other partitions")
	require.Equal(t, map[dest.TopicPartition]int64{tp0: 5, tp1: 9}, d.ShareStartOffsets("sg"))
	require.Empty(t, d.CommittedOffsets("sg"), "share offsets are not consumer-group offsets")

	err = d.SetShareStartOffsets("sg", map[dest.TopicPartition]int64{tp0: -1})
	require.Equal(t, admin.CodeInvalidRequest, admin.CodeOf(err))
	require.Equal(t, admin.CodeInvalidRequest, admin.CodeOf(d.SetShareStartOffsets("", map[dest.TopicPartition]int64{tp0: 1})))
	require.NoError(t, d.Close())

	d2, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	require.Equal(t, map[dest.TopicPartition]int64{tp0: 5, tp1: 9}, d2.ShareStartOffsets("sg"))
	require.Equal(t, []string{"sg"}, d2.ShareGroups())
	require.NoError(t, d2.Close())

	// A state file that does not parse fails the open: it is never dropped silently.
	require.NoError(t, os.WriteFile(filepath.Join(root, shareGroupsFile), []byte("{"), 0o644))
	_, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.Error(t, err)
}

func TestShareStartOffsetsFailedWriteChangesNothing(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes read-only directories")
	}
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	tp := dest.TopicPartition{Topic: "orders", Partition: 0}
	require.NoError(t, d.SetShareStartOffsets("sg", map[dest.TopicPartition]int64{tp: 5}))
	require.NoError(t, os.Chmod(root, 0o500))
	defer os.Chmod(root, 0o700)
	require.Error(t, d.SetShareStartOffsets("sg", map[dest.TopicPartition]int64{tp: 8}))
	require.Equal(t, map[dest.TopicPartition]int64{tp: 5}, d.ShareStartOffsets("sg"))
}

func TestReplicationFactor(t *testing.T) {
	ctx := context.Background()
	d := NewMemory("dst", fetcher.MemoryLogOptions{})
	require.Equal(t, int16(1), d.ReplicationFactor())
	require.Equal(t, 1, d.PlaceableReplicas())
	require.NoError(t, d.CreateTopic(ctx, dest.TopicSpec{Name: "a", TopicID: records.UUID{1}, Partitions: 1}))

	require.Equal(t, admin.CodeInvalidReplicationFactor, admin.CodeOf(d.SetReplicationFactor(0)))
	require.NoError(t, d.SetReplicationFactor(3))
	err := d.CreateTopic(ctx, dest.TopicSpec{Name: "b", TopicID: records.UUID{2}, Partitions: 1})
	require.Equal(t, admin.CodeInvalidReplicationFactor, admin.CodeOf(err))
	require.ErrorContains(t, err, "3 time(s)")
	_, ok := d.Topic("b")
	require.False(t, ok, "nothing created")
	require.NoError(t, d.CreateTopic(ctx, dest.TopicSpec{Name: "a", TopicID: records.UUID{1}, Partitions: 1}),
		"an existing topic keeps its replicas: re-creating it with its id is still a no-op")
}
