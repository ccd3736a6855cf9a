package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/statemachine"
)

// TestWatchRunsInsideTheChange pins what Controller.Watch documents: the callback runs
// before the mutating call returns, with the controller's lock held, in change order,
// and not at all for a change that failed to become durable.
func TestWatchRunsInsideTheChange(t *testing.T) {
	ctx := context.Background()
	c, log := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	var seen []TopicState
	c.View().Watch(func(ts TopicState) {
		require.False(t, c.mu.TryLock(), "the watcher runs with the controller's lock held")
		seen = append(seen, ts)
	})
	_, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: "b", TopicID: id(2), NumPartitions: 1},
		{Name: "a", TopicID: id(1), NumPartitions: 1}}, nil, nil)
	require.NoError(t, err)
	// Seen before StartTopics returned, in the order of the records.
	require.Len(t, seen, 2)
	require.Equal(t, []string{"b", "a"}, []string{seen[0].Topic, seen[1].Topic})
	require.Equal(t, statemachine.DesiredMirroring, seen[1].Desired)
	require.Equal(t, c.Offset(), seen[1].StateOffset)

	log.FailAppends = 1
	_, err = c.PauseTopics(ctx, "m", []string{"a"}, -1)
	require.Error(t, err)
	require.Len(t, seen, 2, "a change that is not durable is not reported")

	res, err := c.PauseTopics(ctx, "m", []string{"a"}, -1)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Len(t, seen, 3)
	require.Equal(t, statemachine.DesiredPaused, seen[2].Desired)
	// The lock is free again once the call returned.
	require.True(t, c.mu.TryLock())
	c.mu.Unlock()
}

// TestViewReads checks that the View answers what the Controller does.
func TestViewReads(t *testing.T) {
	ctx := context.Background()
	c, _ := testController(t)
	v := c.View()
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	_, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: "t", TopicID: id(1), NumPartitions: 1}}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, c.Mirrors(), v.Mirrors())
	mi, ok := v.Mirror("m")
	require.True(t, ok)
	require.Equal(t, "m", mi.Name)
	ts, ok := v.Topic("t")
	require.True(t, ok)
	require.Equal(t, statemachine.DesiredMirroring, ts.Desired)
	require.Equal(t, c.Topics("m"), v.Topics("m"))
	require.Equal(t, c.Offset(), v.Offset())
}
