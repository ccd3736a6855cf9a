package mirror

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// TestSetTopicReadOnlySetsTheFlag: the start's setTopicReadOnly makes every
// partition of the topic read-only (the flag the re-plan check relies on) and
// returns the flags it found, which restoreReadOnly gives back.
func TestSetTopicReadOnlySetsTheFlag(t *testing.T) {
	d := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	require.NoError(t, d.CreateTopic(t.Context(), TopicSpec{Name: "t", Partitions: 200}))
	require.NoError(t, d.SetReadOnly("t", 7, true))
	m := &Mirror{dest: d, log: slog.New(slog.DiscardHandler)}
	was, err := m.setTopicReadOnly("t", true)
	require.NoError(t, err)
	require.Len(t, was, 200)
	for p := int32(0); p < 200; p++ {
		require.Equal(t, p == 7, was[p], "partition %d's flag before", p)
		require.True(t, d.ReadOnly("t", p), "partition %d is read-only", p)
		l, err := d.Log("t", p)
		require.NoError(t, err)
		require.True(t, l.ReadOnly(), "partition %d's log refuses client writes", p)
	}
	m.restoreReadOnly("t", was)
	for p := int32(0); p < 200; p++ {
		require.Equal(t, p == 7, d.ReadOnly("t", p), "partition %d's flag given back", p)
	}
}

// TestPlanMovedWithoutOpeningLogs: the start's re-plan check reads only the logs
// that are open on a destination that tells (dest.OpenLogs): a topic the start
// created is not opened, its partitions are not moved, and a client write to one
// (which opens it) is seen; a destination that cannot tell has every log opened.
func TestPlanMovedWithoutOpeningLogs(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.CreateTopic(t.Context(), TopicSpec{Name: "t", TopicID: records.UUID{7}, Partitions: 3}))
	plan := newTopicPlan(3)
	require.False(t, planMoved(d, "t", plan))
	for p := int32(0); p < 3; p++ {
		_, open := d.OpenLog("t", p)
		require.False(t, open, "partition %d opened by the check", p)
	}

	batch, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []records.Record{{Value: []byte("v")}})
	require.NoError(t, err)
	_, err = d.Produce(t.Context(), "t", 2, batch)
	require.NoError(t, err)
	require.True(t, planMoved(d, "t", plan), "a client write after the plan")

	// Without OpenLogs every partition is opened and compared.
	hidden := struct{ Destination }{d}
	require.True(t, planMoved(hidden, "t", plan))
	require.False(t, planMoved(hidden, "t", plan[:2]))
	_, open := d.OpenLog("t", 0)
	require.True(t, open)
}
