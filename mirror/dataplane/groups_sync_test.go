package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
)

// TestSyncSkipsActiveGroup: the metadata sync, given the data plane as its
// GroupGuard, leaves a destination group with members alone (their commits
// stand), and resumes once the group empties.
func TestSyncSkipsActiveGroup(t *testing.T) {
	ctx := context.Background()
	src := mirror.NewMemoryDestination("source", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { _ = src.Close() })
	require.NoError(t, src.CreateTopic(ctx, mirror.TopicSpec{Name: "t", TopicID: records.UUID{9}, Partitions: 1}))
	tp := mirror.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, src.CommitOffsets("g", map[mirror.TopicPartition]int64{tp: 3}))

	s := startSite(t, Config{InitialRebalanceDelay: -1, GroupRejoinGrace: -1})
	ctl, err := mirror.OpenController(ctx, &mirror.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{mirror.KeyBootstrapServers: "source:9092", mirror.KeyTopicsInclude: "t"}))
	syncer, err := metasync.NewSyncer(metasync.SyncConfig{Mirror: "m", Controller: ctl, Destination: s.dst, Groups: s.dp,
		Source: metasync.NewLocalSourceAdmin(src, func() []string { return []string{"g"} })})
	require.NoError(t, err)
	st, err := syncer.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	l := s.log(t, "t", 0)
	for i := 0; i < 10; i++ {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: l.LogEndOffset(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []records.Record{{Value: []byte("v")}})
		require.NoError(t, err)
		require.NoError(t, l.Append(b))
	}
	st, err = syncer.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.GroupsSynced)
	require.Equal(t, int64(3), s.dst.CommittedOffsets("g")[tp])

	// A consumer joins the destination's group and commits 5; the source
	// moves on to 8: the sync keeps off.
	g := groupCaller{t, s.dp}
	j := g.join(joinRequest("g", "", str("i")))
	require.Equal(t, int16(0), j.ErrorCode)
	require.Equal(t, int16(0), g.syncGroup("g", j.MemberID, str("i"), j.Generation, nil).ErrorCode)
	require.Equal(t, int16(0), g.commit("g", j.MemberID, str("i"), j.Generation))
	require.Equal(t, int64(5), s.dst.CommittedOffsets("g")[tp])
	require.NoError(t, src.CommitOffsets("g", map[mirror.TopicPartition]int64{tp: 8}))
	st, err = syncer.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.GroupsSkipped)
	require.Equal(t, 0, st.GroupsSynced)
	require.Equal(t, int64(5), s.dst.CommittedOffsets("g")[tp], "the members' commit stands")

	// The member leaves: the group is Empty, the sync resumes.
	require.Equal(t, int16(0), leave(g, "g", j.MemberID, str("i")))
	require.False(t, s.dp.GroupActive("g"))
	st, err = syncer.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.GroupsSynced)
	require.Equal(t, int64(8), s.dst.CommittedOffsets("g")[tp])
}

// TestCommitIfInactiveHoldsJoins: while the sync's commit runs, a JoinGroup
// for the group waits, so the commit never lands on a group with members; a
// group with members refuses the commit.
func TestCommitIfInactiveHoldsJoins(t *testing.T) {
	s := startSite(t, Config{InitialRebalanceDelay: -1, GroupRejoinGrace: -1})
	g := groupCaller{t, s.dp}
	release := make(chan struct{})
	started := make(chan struct{})
	committed := make(chan bool, 1)
	go func() {
		ran, err := s.dp.CommitIfInactive("g", func() error {
			close(started)
			<-release
			return nil
		})
		if err != nil {
			ran = false
		}
		committed <- ran
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the commit did not run")
	}
	joined := g.joinAsync(joinRequest("g", "", str("i")))
	select {
	case <-joined:
		t.Fatal("a join went through during the sync's commit")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	require.True(t, <-committed)
	j := <-joined
	require.Equal(t, int16(0), j.ErrorCode)
	require.True(t, s.dp.GroupActive("g"))
	ran, err := s.dp.CommitIfInactive("g", func() error {
		t.Fatal("commit on an active group")
		return nil
	})
	require.NoError(t, err)
	require.False(t, ran)
}

// leave sends LeaveGroup v5 for one member and returns its code.
func leave(g groupCaller, group, member string, instance *string) int16 {
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group = 5, group
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member, InstanceID: instance}}
	resp := g.serve(lv).(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	return resp.Members[0].ErrorCode
}

// TestRejoinGrace: right after New (a site restart, members not rejoined
// yet) every group counts as active for the sync; once the grace is over,
// an empty group is not.
func TestRejoinGrace(t *testing.T) {
	s := startSite(t, Config{GroupRejoinGrace: 300 * time.Millisecond})
	require.True(t, s.dp.GroupActive("g"))
	ran, err := s.dp.CommitIfInactive("g", func() error {
		t.Fatal("commit during the rejoin grace")
		return nil
	})
	require.NoError(t, err)
	require.False(t, ran)
	require.Eventually(t, func() bool { return !s.dp.GroupActive("g") }, 10*time.Second, 10*time.Millisecond)
	ran, err = s.dp.CommitIfInactive("g", func() error { return nil })
	require.NoError(t, err)
	require.True(t, ran)
}
