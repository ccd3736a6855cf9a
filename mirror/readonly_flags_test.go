package mirror

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
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
