package localdest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
)

// TestLowerGroupOffsetsDurable: only the offsets of the partition above the end
// are lowered, the change is reported per group and survives a reopen.
func TestLowerGroupOffsetsDurable(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "c", fetcher.FileLogOptions{})
	require.NoError(t, err)
	tp, other := dest.TopicPartition{Topic: "t", Partition: 0}, dest.TopicPartition{Topic: "t", Partition: 1}
	require.NoError(t, d.CommitOffsets("ahead", map[dest.TopicPartition]int64{tp: 15, other: 30}))
	require.NoError(t, d.CommitOffsets("behind", map[dest.TopicPartition]int64{tp: 7}))
	lowered, err := d.LowerGroupOffsets(tp, 10)
	require.NoError(t, err)
	require.Equal(t, []dest.LoweredGroupOffset{{Group: "ahead", From: 15, To: 10}}, lowered)
	require.NoError(t, d.Close())

	d, err = OpenFile(root, "c", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, map[dest.TopicPartition]int64{tp: 10, other: 30}, d.CommittedOffsets("ahead"))
	require.Equal(t, map[dest.TopicPartition]int64{tp: 7}, d.CommittedOffsets("behind"))
	lowered, err = d.LowerGroupOffsets(tp, 10)
	require.NoError(t, err)
	require.Empty(t, lowered)
}
