package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirror"
)

// groupCaller serves group requests straight to a data plane.
type groupCaller struct {
	t  *testing.T
	dp *DataPlane
}

func (g groupCaller) serve(req kmsg.Request) kmsg.Response {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := g.dp.Serve(ctx, req)
	require.NoError(g.t, err)
	return resp
}

func joinRequest(group, member string, instance *string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID, r.InstanceID = 9, group, member, instance
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = 10000, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte("meta-"+member)
	r.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return r
}

func (g groupCaller) join(r *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	g.t.Helper()
	return g.serve(r).(*kmsg.JoinGroupResponse)
}

// joinAsync serves a join that is held, answering on the channel.
func (g groupCaller) joinAsync(r *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		resp, err := g.dp.Serve(context.Background(), r)
		if err != nil {
			close(ch)
			return
		}
		ch <- resp.(*kmsg.JoinGroupResponse)
	}()
	return ch
}

func (g groupCaller) syncGroup(group, member string, instance *string, gen int32, assign map[string]string) *kmsg.SyncGroupResponse {
	g.t.Helper()
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.MemberID, r.InstanceID, r.Generation = 5, group, member, instance, gen
	for m, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, []byte(a)
		r.GroupAssignment = append(r.GroupAssignment, ga)
	}
	return g.serve(r).(*kmsg.SyncGroupResponse)
}

func (g groupCaller) heartbeat(group, member string, instance *string, gen int32) int16 {
	g.t.Helper()
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.InstanceID, r.Generation = 4, group, member, instance, gen
	return g.serve(r).(*kmsg.HeartbeatResponse).ErrorCode
}

func (g groupCaller) commit(group, member string, instance *string, gen int32) int16 {
	g.t.Helper()
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.InstanceID, r.Generation = 8, group, member, instance, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 5
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
	r.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return g.serve(r).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (g groupCaller) txnCommit(group, member string, instance *string, gen int32) int16 {
	g.t.Helper()
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.InstanceID, r.Generation = 3, group, member, instance, gen
	r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 5
	rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{rp}
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
	return g.serve(r).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func str(s string) *string { return &s }

// txnWant is TxnOffsetCommit's answer where OffsetCommit's is want: a
// commit that passes the member checks reaches the transaction checks
// (producer 1 has none: INVALID_PRODUCER_ID_MAPPING).
func txnWant(want int16) int16 {
	if want == 0 {
		return codeInvalidProducerIDMapping
	}
	return want
}

// TestClassicGroupFencing drives JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit and TxnOffsetCommit through Kafka's fencing answers:
// MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, the memberless commit refused on an
// active group and accepted once it is Empty.
func TestClassicGroupFencing(t *testing.T) {
	s := startSite(t, Config{InitialRebalanceDelay: -1, MaxGroupSize: 3, GroupRejoinGrace: -1})
	s.topic(t, "t", 1)
	g := groupCaller{t, s.dp}

	// Validation.
	bad := joinRequest("g", "", nil)
	bad.SessionTimeoutMillis = 10
	require.Equal(t, codeInvalidSessionTimeout, g.join(bad).ErrorCode)
	bad = joinRequest("", "", nil)
	require.Equal(t, codeInvalidGroupID, g.join(bad).ErrorCode)
	bad = joinRequest("g", "", nil)
	bad.Protocols = nil
	require.Equal(t, codeInconsistentGroupProtocol, g.join(bad).ErrorCode)
	require.Equal(t, codeUnknownMemberID, g.join(joinRequest("g", "ghost", nil)).ErrorCode)

	// KIP-394: the member id first.
	first := g.join(joinRequest("g", "", nil))
	require.Equal(t, codeMemberIDRequired, first.ErrorCode)
	m1 := first.MemberID
	require.NotEmpty(t, m1)
	j1 := g.join(joinRequest("g", m1, nil))
	require.Equal(t, int16(0), j1.ErrorCode)
	require.Equal(t, int32(1), j1.Generation)
	require.Equal(t, m1, j1.LeaderID)
	require.Len(t, j1.Members, 1)
	require.Equal(t, "range", *j1.Protocol)
	require.Equal(t, stateCompletingRebalance, describe(t, s, "g").State)
	require.Equal(t, codeRebalanceInProgress, g.commit("g", m1, nil, 1), "no commit before the assignment")
	require.Equal(t, int16(0), g.heartbeat("g", m1, nil, 1))
	require.Equal(t, codeIllegalGeneration, g.syncGroup("g", m1, nil, 2, nil).ErrorCode)
	sy := g.syncGroup("g", m1, nil, 1, map[string]string{m1: "all"})
	require.Equal(t, int16(0), sy.ErrorCode)
	require.Equal(t, "all", string(sy.MemberAssignment))
	require.Equal(t, stateStable, describe(t, s, "g").State)

	for _, tc := range []struct {
		name     string
		member   string
		instance *string
		gen      int32
		want     int16
	}{
		{"member", m1, nil, 1, 0},
		{"old generation", m1, nil, 0, codeIllegalGeneration},
		{"future generation", m1, nil, 2, codeIllegalGeneration},
		{"unknown member", "nope", nil, 1, codeUnknownMemberID},
		{"memberless on an active group", "", nil, -1, codeUnknownMemberID},
		{"unknown instance", m1, str("i9"), 1, codeUnknownMemberID},
	} {
		require.Equal(t, tc.want, g.commit("g", tc.member, tc.instance, tc.gen), "OffsetCommit %s", tc.name)
		require.Equal(t, txnWant(tc.want), g.txnCommit("g", tc.member, tc.instance, tc.gen), "TxnOffsetCommit %s", tc.name)
	}

	// A static member joins: the group rebalances, m1 learns it by heartbeat.
	held := g.joinAsync(joinRequest("g", "", str("i1")))
	require.Eventually(t, func() bool { return describe(t, s, "g").State == statePreparingRebalance }, 5*time.Second, time.Millisecond)
	require.Equal(t, codeRebalanceInProgress, g.heartbeat("g", m1, nil, 1))
	require.Equal(t, codeRebalanceInProgress, g.syncGroup("g", m1, nil, 1, nil).ErrorCode)
	j1 = g.join(joinRequest("g", m1, nil))
	require.Equal(t, int32(2), j1.Generation)
	js := <-held
	require.Equal(t, int16(0), js.ErrorCode)
	require.Equal(t, int32(2), js.Generation)
	s1 := js.MemberID
	require.Empty(t, js.Members, "a follower gets no member list")
	leader := j1.LeaderID
	require.Equal(t, m1, leader, "the leader stays")
	require.Len(t, j1.Members, 2)

	// A third member would exceed MaxGroupSize 3 with a pending one.
	pend := g.join(joinRequest("g", "", nil))
	require.Equal(t, codeMemberIDRequired, pend.ErrorCode)
	require.Equal(t, codeGroupMaxSizeReached, g.join(joinRequest("g", "", nil)).ErrorCode)

	for _, tc := range []struct {
		name     string
		member   string
		instance *string
		gen      int32
		want     int16
	}{
		{"static member", s1, str("i1"), 2, 0},
		{"instance of another member", m1, str("i1"), 2, codeFencedInstanceID},
		{"previous generation", s1, str("i1"), 1, codeIllegalGeneration},
	} {
		require.Equal(t, tc.want, g.heartbeat("g", tc.member, tc.instance, tc.gen), "Heartbeat %s", tc.name)
		require.Equal(t, txnWant(tc.want), g.txnCommit("g", tc.member, tc.instance, tc.gen), "TxnOffsetCommit %s", tc.name)
	}
	sy = g.syncGroup("g", m1, nil, 2, map[string]string{m1: "a", s1: "b"})
	require.Equal(t, "a", string(sy.MemberAssignment))
	require.Equal(t, "b", string(g.syncGroup("g", s1, str("i1"), 2, nil).MemberAssignment))
	d := describe(t, s, "g")
	require.Equal(t, stateStable, d.State)
	require.Len(t, d.Members, 2)

	// The static member restarts (no member id): a new id, the old fenced,
	// and no rebalance while nothing changed.
	rs := g.join(joinRequest("g", "", str("i1")))
	require.Equal(t, int16(0), rs.ErrorCode)
	require.Equal(t, int32(2), rs.Generation)
	require.NotEqual(t, s1, rs.MemberID)
	require.Equal(t, codeFencedInstanceID, g.heartbeat("g", s1, str("i1"), 2))
	require.Equal(t, codeFencedInstanceID, g.commit("g", s1, str("i1"), 2))
	require.Equal(t, "b", string(g.syncGroup("g", rs.MemberID, str("i1"), 2, nil).MemberAssignment))
	s1 = rs.MemberID

	// LeaveGroup v3 batch: per member answers.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group = 5, "g"
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "old", InstanceID: str("i1")}, {MemberID: "nope"}, {MemberID: m1}, {MemberID: pend.MemberID}}
	lr := g.serve(lv).(*kmsg.LeaveGroupResponse)
	require.Equal(t, []int16{codeFencedInstanceID, codeUnknownMemberID, 0, 0},
		[]int16{lr.Members[0].ErrorCode, lr.Members[1].ErrorCode, lr.Members[2].ErrorCode, lr.Members[3].ErrorCode})
	require.Equal(t, statePreparingRebalance, describe(t, s, "g").State)
	require.True(t, s.dp.GroupActive("g"))
	lv.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: str("i1")}}
	lr = g.serve(lv).(*kmsg.LeaveGroupResponse)
	require.Equal(t, int16(0), lr.Members[0].ErrorCode)
	require.Equal(t, stateEmpty, describe(t, s, "g").State)
	require.False(t, s.dp.GroupActive("g"))
	require.Equal(t, int16(0), g.commit("g", "", nil, -1), "a memberless commit once the group is empty")
	require.Equal(t, codeUnknownMemberID, g.commit("g", s1, nil, 2))
	require.Equal(t, codeUnknownMemberID, g.heartbeat("g", s1, nil, 2))
}

// TestClassicGroupHeldRequests: held JoinGroups are bounded
// (MaxHeldGroupRequests: COORDINATOR_LOAD_IN_PROGRESS beyond), end with the
// request's context, and end at the data plane's Close.
func TestClassicGroupHeldRequests(t *testing.T) {
	s := startSite(t, Config{InitialRebalanceDelay: time.Hour, MaxHeldGroupRequests: 2})
	g := groupCaller{t, s.dp}
	ctx, cancel := context.WithCancel(context.Background())
	canceled := make(chan error, 1)
	go func() {
		_, err := s.dp.Serve(ctx, joinRequest("a", "", str("x")))
		canceled <- err
	}()
	held := g.joinAsync(joinRequest("b", "", str("y")))
	require.Eventually(t, func() bool {
		s.dp.classic.mu.Lock()
		defer s.dp.classic.mu.Unlock()
		return s.dp.classic.held == 2
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, codeCoordinatorLoadInProgress, g.join(joinRequest("c", "", str("z"))).ErrorCode)
	cancel()
	require.ErrorIs(t, <-canceled, context.Canceled)
	require.Eventually(t, func() bool {
		s.dp.classic.mu.Lock()
		defer s.dp.classic.mu.Unlock()
		return s.dp.classic.held == 1
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, s.dp.Close())
	select {
	case _, ok := <-held:
		require.False(t, ok, "a held join fails at Close")
	case <-time.After(5 * time.Second):
		t.Fatal("a held join outlived Close")
	}
}

// TestClassicGroupACLs: JoinGroup, SyncGroup, Heartbeat and LeaveGroup need
// READ on the group (GROUP_AUTHORIZATION_FAILED, and no group is made);
// allowed, the join goes through.
func TestClassicGroupACLs(t *testing.T) {
	s := startSite(t, Config{EnforceACLs: true, InitialRebalanceDelay: -1, GroupRejoinGrace: -1})
	g := groupCaller{t, s.dp}
	require.Equal(t, codeGroupAuthorizationFailed, g.join(joinRequest("g", "", nil)).ErrorCode)
	require.Equal(t, codeGroupAuthorizationFailed, g.syncGroup("g", "m", nil, 1, nil).ErrorCode)
	require.Equal(t, codeGroupAuthorizationFailed, g.heartbeat("g", "m", nil, 1))
	require.Equal(t, codeGroupAuthorizationFailed, leave(g, "g", "m", nil))
	require.Nil(t, s.dp.groupReg.ownerOf("g"), "a refused join makes no group")
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceGroup, "L", "g", OpRead), allow(ResourceGroup, "L", "g", OpDescribe)}))
	j := g.join(joinRequest("g", "", str("i")))
	require.Equal(t, int16(0), j.ErrorCode)
	require.Equal(t, int16(0), g.heartbeat("g", j.MemberID, str("i"), j.Generation))
	require.Equal(t, stateCompletingRebalance, describe(t, s, "g").State)
	require.Equal(t, codeGroupAuthorizationFailed, g.join(joinRequest("h", "", nil)).ErrorCode)
}

// TestListGroupsClassicStates: ListGroups shows a classic group with
// members in its state, type "classic", and its state filter selects it.
func TestListGroupsClassicStates(t *testing.T) {
	s := startSite(t, Config{InitialRebalanceDelay: -1, GroupRejoinGrace: -1})
	s.topic(t, "t", 1)
	require.NoError(t, s.dst.CommitOffsets("synced", map[mirror.TopicPartition]int64{{Topic: "t", Partition: 0}: 7}))
	g := groupCaller{t, s.dp}
	j := g.join(joinRequest("live", "", str("i")))
	require.Equal(t, int16(0), j.ErrorCode)
	list := func(states ...string) map[string]string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.StatesFilter = 5, states
		out := map[string]string{}
		for _, lg := range g.serve(req).(*kmsg.ListGroupsResponse).Groups {
			require.Equal(t, "classic", lg.GroupType)
			require.Equal(t, "consumer", lg.ProtocolType)
			out[lg.Group] = lg.GroupState
		}
		return out
	}
	require.Equal(t, map[string]string{"live": stateCompletingRebalance, "synced": stateEmpty}, list())
	require.Equal(t, map[string]string{"live": stateCompletingRebalance}, list("completingrebalance"))
	require.Equal(t, map[string]string{"synced": stateEmpty}, list("Empty"))
	require.Equal(t, int16(0), g.syncGroup("live", j.MemberID, str("i"), j.Generation, nil).ErrorCode)
	require.Equal(t, map[string]string{"live": stateStable}, list("STABLE"))
}

// TestDeleteGroups: a group with members is NON_EMPTY_GROUP and keeps its
// offsets; an empty one loses them; an unknown one is GROUP_ID_NOT_FOUND;
// DELETE on the group is needed.
func TestDeleteGroups(t *testing.T) {
	s := startSite(t, Config{InitialRebalanceDelay: -1, GroupRejoinGrace: -1})
	s.topic(t, "t", 1)
	tp := mirror.TopicPartition{Topic: "t", Partition: 0}
	for _, grp := range []string{"idle", "live"} {
		require.NoError(t, s.dst.CommitOffsets(grp, map[mirror.TopicPartition]int64{tp: 4}))
	}
	g := groupCaller{t, s.dp}
	require.Equal(t, int16(0), g.join(joinRequest("live", "", str("i"))).ErrorCode)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 2, []string{"live", "idle", "nope", ""}
	codes := map[string]int16{}
	for _, rg := range g.serve(req).(*kmsg.DeleteGroupsResponse).Groups {
		codes[rg.Group] = rg.ErrorCode
	}
	require.Equal(t, map[string]int16{"live": codeNonEmptyGroup, "idle": 0, "nope": codeGroupIDNotFound, "": codeInvalidGroupID}, codes)
	require.Nil(t, s.dst.CommittedOffsets("idle"))
	require.Equal(t, map[mirror.TopicPartition]int64{tp: 4}, s.dst.CommittedOffsets("live"))

	z := startSite(t, Config{EnforceACLs: true})
	require.NoError(t, z.dst.CommitOffsets("x", map[mirror.TopicPartition]int64{tp: 1}))
	req.Groups = []string{"x"}
	resp, err := z.dp.Serve(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, codeGroupAuthorizationFailed, resp.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode)
	require.NotNil(t, z.dst.CommittedOffsets("x"))
}

// TestClassicGroupInitialDelay: members joining an empty group within the
// initial rebalance delay form its first generation together.
func TestClassicGroupInitialDelay(t *testing.T) {
	s := startSite(t, Config{InitialRebalanceDelay: 300 * time.Millisecond, GroupRejoinGrace: -1})
	g := groupCaller{t, s.dp}
	a := g.joinAsync(joinRequest("g", "", str("a")))
	time.Sleep(50 * time.Millisecond)
	b := g.joinAsync(joinRequest("g", "", str("b")))
	ja, jb := <-a, <-b
	require.Equal(t, int32(1), ja.Generation)
	require.Equal(t, int32(1), jb.Generation)
	leader := ja
	if jb.MemberID == jb.LeaderID {
		leader = jb
	}
	require.Len(t, leader.Members, 2, "one generation with both members")
}

// TestClassicGroupLimits: MaxGroups groups with members at most
// (COORDINATOR_NOT_AVAILABLE beyond); a member id handed out with
// MEMBER_ID_REQUIRED and never used expires after the session timeout and
// frees its place (MaxGroupSize) and the group.
func TestClassicGroupLimits(t *testing.T) {
	s := startSite(t, Config{InitialRebalanceDelay: -1, GroupRejoinGrace: -1, MaxGroups: 1, MaxGroupSize: 1, MinSessionTimeout: 10 * time.Millisecond})
	g := groupCaller{t, s.dp}
	short := joinRequest("g", "", nil)
	short.SessionTimeoutMillis = 100
	require.Equal(t, codeMemberIDRequired, g.join(short).ErrorCode)
	require.Equal(t, codeGroupMaxSizeReached, g.join(joinRequest("g", "", nil)).ErrorCode)
	require.Equal(t, codeCoordinatorNotAvailable, g.join(joinRequest("h", "", nil)).ErrorCode)
	require.Eventually(t, func() bool { return s.dp.groupReg.ownerOf("g") == nil }, 5*time.Second, 5*time.Millisecond, "the pending member expires, the group is dropped")
	require.Equal(t, codeMemberIDRequired, g.join(joinRequest("h", "", nil)).ErrorCode)
}

// TestClassicGroupAbandonedJoin: a held JoinGroup whose request ends (the
// client went away) no longer counts as joined: the join phase ends at the
// rebalance timeout without that member.
func TestClassicGroupAbandonedJoin(t *testing.T) {
	s := startSite(t, Config{InitialRebalanceDelay: -1, GroupRejoinGrace: -1})
	g := groupCaller{t, s.dp}
	short := func(instance string, member string) *kmsg.JoinGroupRequest {
		r := joinRequest("g", member, str(instance))
		r.RebalanceTimeoutMillis = 300
		return r
	}
	a := g.join(short("a", ""))
	require.Equal(t, int16(0), g.syncGroup("g", a.MemberID, str("a"), a.Generation, nil).ErrorCode)
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := s.dp.Serve(ctx, short("b", ""))
		gone <- err
	}()
	require.Eventually(t, func() bool { return describe(t, s, "g").State == statePreparingRebalance }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-gone, context.Canceled)
	j := g.join(short("a", a.MemberID))
	require.Equal(t, int16(0), j.ErrorCode)
	require.Equal(t, int32(2), j.Generation)
	require.Len(t, j.Members, 1, "b left with its request")
	require.Len(t, describe(t, s, "g").Members, 1)
}
