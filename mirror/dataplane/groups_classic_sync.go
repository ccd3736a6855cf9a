package dataplane

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// syncFailure is a SyncGroup answer carrying code.
func syncFailure(version int16, code int16) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = version
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = code
	return resp
}

// syncGroup serves SyncGroup (v0-v5): in CompletingRebalance a member's
// SyncGroup is held until the leader's brings the assignments (the group
// is then Stable); in Stable it is answered the member's assignment at once.
func (dp *DataPlane) syncGroup(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.SyncGroupRequest)
	c := dp.classic
	switch {
	case dp.groups() == nil:
		return syncFailure(r.Version, codeCoordinatorNotAvailable), nil
	case r.Group == "":
		return syncFailure(r.Version, codeInvalidGroupID), nil
	}
	c.mu.Lock()
	ch, answer := c.sync(r)
	if answer != nil {
		c.mu.Unlock()
		return answer, nil
	}
	c.held++
	c.mu.Unlock()
	return hold(c, ctx, ch, func() {
		if g := c.groups[r.Group]; g != nil {
			if m := g.members[r.MemberID]; m != nil && m.sync == ch {
				m.sync = nil
			}
		}
	})
}

// sync runs a SyncGroup under c.mu.
func (c *classicGroups) sync(r *kmsg.SyncGroupRequest) (chan *kmsg.SyncGroupResponse, *kmsg.SyncGroupResponse) {
	fail := func(code int16) (chan *kmsg.SyncGroupResponse, *kmsg.SyncGroupResponse) {
		return nil, syncFailure(r.Version, code)
	}
	g := c.groups[r.Group]
	switch {
	case c.closed:
		return fail(codeCoordinatorNotAvailable)
	case g == nil:
		return fail(codeUnknownMemberID)
	case g.state == stateDead:
		return fail(codeCoordinatorNotAvailable)
	}
	if code := g.checkMember(r.MemberID, r.InstanceID); code != 0 {
		return fail(code)
	}
	m := g.members[r.MemberID]
	if m == nil {
		return fail(codeUnknownMemberID)
	}
	if r.Generation != g.generation {
		return fail(codeIllegalGeneration)
	}
	if (r.ProtocolType != nil && *r.ProtocolType != g.protocolType) || (r.Protocol != nil && *r.Protocol != g.protocol) {
		return fail(codeInconsistentGroupProtocol)
	}
	switch g.state {
	case statePreparingRebalance:
		return fail(codeRebalanceInProgress)
	case stateStable:
		c.resetSession(g, m)
		return nil, c.syncResponse(g, m, r.Version)
	case stateCompletingRebalance:
	default:
		return fail(codeUnknownMemberID)
	}
	if m.sync == nil && c.held >= c.cfg.maxHeld && m.id != g.leader {
		// Too many held requests: the member rejoins (the leader's sync is
		// never refused, it answers the others).
		return fail(codeRebalanceInProgress)
	}
	if m.sync != nil {
		m.sync <- syncFailure(m.syncVersion, codeUnknownMemberID)
		m.sync = nil
	}
	c.resetSession(g, m)
	if m.id != g.leader {
		m.sync, m.syncVersion = make(chan *kmsg.SyncGroupResponse, 1), r.Version
		return m.sync, nil
	}
	// The leader's assignments: the group is Stable, every held sync answered.
	for _, o := range g.members {
		o.assignment = nil
	}
	for _, a := range r.GroupAssignment {
		if o := g.members[a.MemberID]; o != nil {
			o.assignment = a.MemberAssignment
		}
	}
	g.state = stateStable
	g.stopTimer()
	for _, o := range g.members {
		if o.sync != nil {
			o.sync <- c.syncResponse(g, o, o.syncVersion)
			o.sync = nil
		}
	}
	return nil, c.syncResponse(g, m, r.Version)
}

// syncResponse is the member's assignment answer.
func (c *classicGroups) syncResponse(g *classicGroup, m *classicMember, version int16) *kmsg.SyncGroupResponse {
	resp := syncFailure(version, 0)
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

// heartbeat serves Heartbeat (v0-v4): it keeps the member's session and
// tells it of a rebalance (REBALANCE_IN_PROGRESS while PreparingRebalance).
func (dp *DataPlane) heartbeat(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.HeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	switch {
	case dp.groups() == nil:
		resp.ErrorCode = codeCoordinatorNotAvailable
		return resp, nil
	case r.Group == "":
		resp.ErrorCode = codeInvalidGroupID
		return resp, nil
	}
	c := dp.classic
	c.mu.Lock()
	defer c.mu.Unlock()
	resp.ErrorCode = c.heartbeatCode(r)
	return resp, nil
}

func (c *classicGroups) heartbeatCode(r *kmsg.HeartbeatRequest) int16 {
	g := c.groups[r.Group]
	switch {
	case c.closed:
		return codeCoordinatorNotAvailable
	case g == nil:
		return codeUnknownMemberID
	case g.state == stateDead:
		return codeCoordinatorNotAvailable
	case g.state == stateEmpty:
		return codeUnknownMemberID
	}
	if code := g.checkMember(r.MemberID, r.InstanceID); code != 0 {
		return code
	}
	m := g.members[r.MemberID]
	if m == nil {
		return codeUnknownMemberID
	}
	if r.Generation != g.generation {
		return codeIllegalGeneration
	}
	c.resetSession(g, m)
	if g.state == statePreparingRebalance {
		return codeRebalanceInProgress
	}
	return 0
}

// leaveGroup serves LeaveGroup: one member by id before v3, a batch of
// members by id or group instance id from v3, each answered on its own.
func (dp *DataPlane) leaveGroup(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.LeaveGroupRequest)
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	switch {
	case dp.groups() == nil:
		resp.ErrorCode = codeCoordinatorNotAvailable
		return resp, nil
	case r.Group == "":
		resp.ErrorCode = codeInvalidGroupID
		return resp, nil
	}
	c := dp.classic
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[r.Group]
	switch {
	case c.closed:
		resp.ErrorCode = codeCoordinatorNotAvailable
		return resp, nil
	case g == nil:
		resp.ErrorCode = codeUnknownMemberID
		return resp, nil
	case g.state == stateDead:
		resp.ErrorCode = codeCoordinatorNotAvailable
		return resp, nil
	}
	defer c.maybeDrop(g)
	if r.Version < 3 {
		resp.ErrorCode = c.leave(g, r.MemberID, nil)
		return resp, nil
	}
	for _, lm := range r.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		rm.ErrorCode = c.leave(g, lm.MemberID, lm.InstanceID)
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// leave removes one member (a pending one included) and rebalances.
func (c *classicGroups) leave(g *classicGroup, memberID string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return codeUnknownMemberID
		case memberID != "" && cur != memberID:
			return codeFencedInstanceID
		}
		memberID = cur
	}
	if t, ok := g.pending[memberID]; ok {
		t.Stop()
		delete(g.pending, memberID)
		c.afterRemoval(g)
		return 0
	}
	m := g.members[memberID]
	if m == nil {
		return codeUnknownMemberID
	}
	c.dropMember(g, m, codeUnknownMemberID)
	c.afterRemoval(g)
	return 0
}
