package mirror

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
)

// TestStartStopManyTopicNames: a 100,000-name StartMirrorTopics (with
// duplicates) and the StopMirrorTopics of the same list are linear: they used
// to take 36 s, quadratic in the list (dedupe by a scan of the output).
func TestStartStopManyTopicNames(t *testing.T) {
	const n, existing = 100_000, 200
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	b.m.mu.Lock()
	b.m.eng.DisableReconcilers()
	b.m.mu.Unlock()
	for i := range existing {
		createTopic(t, a, fmt.Sprintf("t%06d", i), records.UUID{0xAB, byte(i >> 8), byte(i)}, 1)
	}
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	names := make([]string, 0, n+n/10)
	for i := range n {
		names = append(names, fmt.Sprintf("t%06d", i))
	}
	names = append(names, names[:n/10]...) // duplicates are answered once
	start := time.Now()
	res, err := b.m.StartMirrorTopics(ctx, "m", names, StartOptions{})
	took := time.Since(start)
	require.NoError(t, err)
	require.Len(t, res, n)
	for i, r := range res {
		require.Equal(t, names[i], r.Topic)
		if i < existing {
			require.NoError(t, r.Err)
		} else {
			require.Equal(t, admin.CodeUnknownTopicOrPartition, admin.CodeOf(r.Err), "%s: %v", r.Topic, r.Err)
		}
	}
	start = time.Now()
	res, err = b.m.StopMirrorTopics(ctx, "m", names, StopOptions{})
	took += time.Since(start)
	require.NoError(t, err)
	require.Len(t, res, n)
	t.Logf("start + stop of %d names: %v", len(names), took)
	require.Less(t, took, 10*time.Second)
}
