package mirror

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The source cluster id --list shows is recorded with the mirror: after a restart it
// is there before (here: without) the source answering again.
func TestSourceClusterIDSurvivesRestart(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("kfake-src"), kfake.SeedTopics(1, "events"))
	require.NoError(t, err)
	root := t.TempDir()
	s := openRestartSite(t, root)
	require.NoError(t, s.m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
	mustOK(t)(s.m.StartMirrorTopics(ctx, "k", []string{"events"}, StartOptions{}))
	ls, err := s.m.ListClusterMirrors(ctx, ListFilter{SourceClusterIDs: []string{"kfake-src"}}) // resolves the id
	require.NoError(t, err)
	require.Len(t, ls, 1)
	s.close(t)
	src.Close() // the source is gone

	s = openRestartSite(t, root)
	t.Cleanup(func() { s.close(t) })
	ls, err = s.m.ListClusterMirrors(ctx, ListFilter{})
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, "kfake-src", ls[0].SourceClusterID)
	ds, err := s.m.DescribeClusterMirrors(ctx, []string{"k"}, DescribeOptions{})
	require.NoError(t, err)
	require.Equal(t, "kfake-src", ds[0].SourceClusterID)
}
