package localdest

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

func TestLocalDestinations(t *testing.T) {
	ctx := context.Background()
	fileDest := func(t *testing.T) (*LocalDestination, func() *LocalDestination) {
		root := t.TempDir()
		d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
		require.NoError(t, err)
		return d, func() *LocalDestination {
			d2, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
			require.NoError(t, err)
			return d2
		}
	}
	memDest := func(t *testing.T) (*LocalDestination, func() *LocalDestination) {
		return NewMemory("dst", fetcher.MemoryLogOptions{}), nil
	}
	for name, mk := range map[string]func(*testing.T) (*LocalDestination, func() *LocalDestination){"file": fileDest, "memory": memDest} {
		t.Run(name, func(t *testing.T) {
			d, reopen := mk(t)
			spec := dest.TopicSpec{Name: "orders", TopicID: records.UUID{1}, Partitions: 2, Configs: map[string]string{"cleanup.policy": "compact"}}
			require.NoError(t, d.CreateTopic(ctx, spec))
			require.NoError(t, d.CreateTopic(ctx, spec), "same id: no-op")
			err := d.CreateTopic(ctx, dest.TopicSpec{Name: "orders", TopicID: records.UUID{2}, Partitions: 2})
			require.Equal(t, admin.CodeTopicAlreadyExists, admin.CodeOf(err))
			err = d.CreateTopic(ctx, dest.TopicSpec{Name: "other", TopicID: records.UUID{1}, Partitions: 1})
			require.Equal(t, admin.CodeTopicAlreadyExists, admin.CodeOf(err))
			require.Error(t, d.CreateTopic(ctx, dest.TopicSpec{Name: "zero", TopicID: records.UUID{3}}))

			_, err = d.Log("orders", 2)
			require.Equal(t, admin.CodeUnknownTopicOrPartition, admin.CodeOf(err))
			require.NoError(t, d.CreatePartitions(ctx, "orders", 3))
			require.Error(t, d.CreatePartitions(ctx, "orders", 1), "no shrinking")
			l, err := d.Log("orders", 2)
			require.NoError(t, err)
			l2, err := d.Log("orders", 2)
			require.NoError(t, err)
			require.Same(t, l, l2, "one log per partition")
			batch, err := records.BuildBatch(records.BatchSpec{BaseOffset: 5, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []records.Record{{Value: []byte("v")}})
			require.NoError(t, err)
			require.NoError(t, l.Append(batch))

			require.NoError(t, d.AlterTopicConfigs(ctx, "orders", map[string]string{"retention.ms": "1"}))
			require.NoError(t, d.SetReadOnly("orders", 1, true))
			require.True(t, d.ReadOnly("orders", 1))
			require.False(t, d.ReadOnly("orders", 0))
			require.NoError(t, d.CommitOffsets("g", map[dest.TopicPartition]int64{{Topic: "orders", Partition: 1}: 42}))
			require.Equal(t, map[dest.TopicPartition]int64{{Topic: "orders", Partition: 1}: 42}, d.CommittedOffsets("g"))
			require.NoError(t, d.Close())

			if reopen == nil {
				return
			}
			d2 := reopen()
			defer d2.Close()
			got, ok := d2.Topic("orders")
			require.True(t, ok)
			require.Equal(t, dest.TopicSpec{Name: "orders", TopicID: records.UUID{1}, Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact", "retention.ms": "1"}}, got)
			require.True(t, d2.ReadOnly("orders", 1))
			require.Equal(t, map[dest.TopicPartition]int64{{Topic: "orders", Partition: 1}: 42}, d2.CommittedOffsets("g"))
			l3, err := d2.Log("orders", 2)
			require.NoError(t, err)
			require.Equal(t, int64(6), l3.LogEndOffset(), "the file log survived")
		})
	}
}

// DeleteGroupOffsets removes a group's offsets durably and reports whether
// it had any.
func TestDeleteGroupOffsetsDurable(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "c", fetcher.FileLogOptions{})
	require.NoError(t, err)
	tp := dest.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, d.CommitOffsets("a", map[dest.TopicPartition]int64{tp: 1}))
	require.NoError(t, d.CommitOffsets("b", map[dest.TopicPartition]int64{tp: 2}))
	had, err := d.DeleteGroupOffsets("a")
	require.NoError(t, err)
	require.True(t, had)
	had, err = d.DeleteGroupOffsets("a")
	require.NoError(t, err)
	require.False(t, had)
	require.NoError(t, d.Close())
	d, err = OpenFile(root, "c", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	require.Nil(t, d.CommittedOffsets("a"))
	require.Equal(t, map[dest.TopicPartition]int64{tp: 2}, d.CommittedOffsets("b"))
	require.Equal(t, []string{"b"}, d.Groups())
}

// TestOpenLogOpensNothing: OpenLog reports a partition's log only once it is open,
// creates nothing for one that is not (a start of a new topic answers without its
// logs), and a read-only flag set meanwhile is on the log when it opens.
func TestOpenLogOpensNothing(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.CreateTopic(ctx, dest.TopicSpec{Name: "new", TopicID: records.UUID{9}, Partitions: 2}))
	var _ dest.OpenLogs = d

	l, open := d.OpenLog("new", 0)
	require.False(t, open)
	require.Nil(t, l)
	_, err = os.Stat(fetcher.PartitionDir(root, "new", 0))
	require.ErrorIs(t, err, os.ErrNotExist, "OpenLog created the partition's directory")
	_, open = d.OpenLog("missing", 0)
	require.False(t, open)

	require.NoError(t, d.SetReadOnly("new", 0, true))
	_, open = d.OpenLog("new", 0)
	require.False(t, open, "a flag opens no log")
	opened, err := d.Log("new", 0)
	require.NoError(t, err)
	require.True(t, opened.ReadOnly(), "the flag set before the open")
	l, open = d.OpenLog("new", 0)
	require.True(t, open)
	require.Same(t, opened, l)

	// A client write opens the log: OpenLog then reports it.
	batch, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []records.Record{{Value: []byte("v")}})
	require.NoError(t, err)
	_, err = d.Produce(ctx, "new", 1, batch)
	require.NoError(t, err)
	l, open = d.OpenLog("new", 1)
	require.True(t, open)
	require.Equal(t, int64(1), l.LogEndOffset())
}
