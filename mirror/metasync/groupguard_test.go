package metasync

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/localdest"
	"github.com/kmirror/kmirror/records"
)

// fakeGuard is a GroupGuard whose groups are active as set; joinBetween
// makes a group gain a member between the sync's check and its commit.
type fakeGuard struct {
	mu          sync.Mutex
	active      map[string]bool
	joinBetween map[string]bool
	asked       []string
}

func (g *fakeGuard) GroupActive(group string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, group)
	return g.active[group]
}

func (g *fakeGuard) CommitIfInactive(group string, commit func() error) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active[group] || g.joinBetween[group] {
		return false, nil
	}
	return true, commit()
}

// TestSyncAsksGroupGuard: a group the guard reports active is skipped, one
// that gains a member between the check and the commit is skipped too
// (nothing written), the others are synced; once the group is inactive the
// sync resumes.
func TestSyncAsksGroupGuard(t *testing.T) {
	ctx := context.Background()
	src := localdest.NewMemory("src", fetcher.MemoryLogOptions{})
	require.NoError(t, src.CreateTopic(ctx, dest.TopicSpec{Name: "t", TopicID: records.UUID{4}, Partitions: 1}))
	tp := dest.TopicPartition{Topic: "t", Partition: 0}
	for _, g := range []string{"busy", "racing", "idle"} {
		require.NoError(t, src.CommitOffsets(g, map[dest.TopicPartition]int64{tp: 4}))
	}
	ctl, err := controller.OpenController(ctx, &controller.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{controller.KeyBootstrapServers: "src:9092", controller.KeyTopicsInclude: "t"}))
	d := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	guard := &fakeGuard{active: map[string]bool{"busy": true}, joinBetween: map[string]bool{"racing": true}}
	s, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Destination: d, Groups: guard,
		Source: NewLocalSourceAdmin(src, func() []string { return []string{"busy", "idle", "racing"} })})
	require.NoError(t, err)
	_, err = s.SyncOnce(ctx) // creates t
	require.NoError(t, err)
	fillDest(t, d, "t", 0, 10)
	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	require.Equal(t, 1, st.GroupsSynced)
	require.Equal(t, 2, st.GroupsSkipped)
	require.Equal(t, map[dest.TopicPartition]int64{tp: 4}, d.CommittedOffsets("idle"))
	require.Nil(t, d.CommittedOffsets("busy"))
	require.Nil(t, d.CommittedOffsets("racing"))
	require.Subset(t, guard.asked, []string{"busy", "idle", "racing"})

	guard.mu.Lock()
	guard.active, guard.joinBetween = nil, nil
	guard.mu.Unlock()
	st, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.GroupsSynced)
	require.Equal(t, map[dest.TopicPartition]int64{tp: 4}, d.CommittedOffsets("busy"))
}
