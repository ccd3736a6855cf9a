package dataplane

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
)

// joinGroup serves JoinGroup (v2-v9) with Kafka's classic-group rules; see
// classicGroups. A join that must wait for the rebalance is held until the
// join phase completes (at most the group's rebalance timeout), the
// request's context ends or the data plane closes.
func (dp *DataPlane) joinGroup(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.JoinGroupRequest)
	c := dp.classic
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	session := time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	if r.Version == 0 {
		rebalance = session
	}
	switch {
	case dp.groups() == nil:
		resp.ErrorCode = codeCoordinatorNotAvailable
	case r.Group == "":
		resp.ErrorCode = codeInvalidGroupID
	case session < c.cfg.minSession || session > c.cfg.maxSession:
		resp.ErrorCode = codeInvalidSessionTimeout
	case r.ProtocolType == "" || len(r.Protocols) == 0 || rebalance <= 0:
		resp.ErrorCode = codeInconsistentGroupProtocol
	case r.InstanceID != nil && *r.InstanceID == "":
		resp.ErrorCode = int16(admin.CodeInvalidRequest)
	}
	if resp.ErrorCode != 0 {
		return resp, nil
	}
	clientID, host := "", ""
	if rc, ok := admin.RequestContextFrom(ctx); ok {
		if rc.ClientID != nil {
			clientID = *rc.ClientID
		}
		host = "/" + rc.RemoteAddr
		if h, _, err := net.SplitHostPort(rc.RemoteAddr); err == nil {
			host = "/" + h
		}
	}
	j := joinArgs{r: r, session: session, rebalance: rebalance, clientID: clientID, clientHost: host}
	c.mu.Lock()
	ch, answer := c.join(&j)
	if answer != nil {
		c.mu.Unlock()
		return answer, nil
	}
	c.held++
	memberID := j.memberID
	c.mu.Unlock()
	out, err := hold(c, ctx, ch, func() {
		if g := c.groups[r.Group]; g != nil {
			if m := g.members[memberID]; m != nil && m.join == ch {
				m.join = nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// joinArgs is one JoinGroup being served; memberID is the id the join
// ends up with (assigned for a new member).
type joinArgs struct {
	r                    *kmsg.JoinGroupRequest
	session, rebalance   time.Duration
	clientID, clientHost string
	memberID             string
}

// join runs a JoinGroup under c.mu: either an answer now, or the channel
// the answer will come on (the request is then held).
func (c *classicGroups) join(j *joinArgs) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	r := j.r
	now := func(code int16) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, j.memberID
		return nil, resp
	}
	if c.closed {
		return now(codeCoordinatorNotAvailable)
	}
	g := c.groups[r.Group]
	if g == nil {
		if r.MemberID != "" {
			return now(codeUnknownMemberID)
		}
		if len(c.groups) >= c.cfg.maxGroups {
			return now(codeCoordinatorNotAvailable)
		}
		if !c.reg.claim(r.Group, c) {
			// A consumer-protocol group of the same id.
			return now(codeInconsistentGroupProtocol)
		}
		g = &classicGroup{id: r.Group, state: stateEmpty, members: map[string]*classicMember{},
			pending: map[string]*time.Timer{}, static: map[string]string{}}
		c.groups[r.Group] = g
	}
	defer c.maybeDrop(g)
	if g.state == stateDead {
		return now(codeCoordinatorNotAvailable)
	}
	if !g.acceptsProtocols(r.ProtocolType, r.Protocols) {
		return now(codeInconsistentGroupProtocol)
	}
	if c.held >= c.cfg.maxHeld {
		// Too many requests held open: the client retries after a backoff.
		return now(codeCoordinatorLoadInProgress)
	}
	if r.MemberID == "" {
		return c.joinUnknown(g, j)
	}
	j.memberID = r.MemberID
	return c.joinKnown(g, j)
}

// acceptsProtocols reports whether a member with this protocol type and
// these protocols may join: an empty group takes any; else the type must be
// the group's and one protocol common to every member.
func (g *classicGroup) acceptsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// joinUnknown serves a join without a member id.
func (c *classicGroups) joinUnknown(g *classicGroup, j *joinArgs) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	r := j.r
	if r.InstanceID != nil {
		if old, ok := g.static[*r.InstanceID]; ok {
			return c.rejoinStatic(g, j, g.members[old])
		}
	}
	if len(g.members)+len(g.pending) >= c.cfg.maxGroupSize {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = codeGroupMaxSizeReached, -1
		return nil, resp
	}
	prefix := j.clientID
	if r.InstanceID != nil {
		prefix = *r.InstanceID
	}
	j.memberID = newMemberID(prefix)
	if r.InstanceID == nil && r.Version >= 4 {
		// KIP-394: the member id first, the join with it next.
		id := j.memberID
		g.pending[id] = time.AfterFunc(j.session, func() { c.expirePending(g.id, id) })
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = codeMemberIDRequired, -1, id
		return nil, resp
	}
	return c.addMember(g, j)
}

// joinKnown serves a join with a member id.
func (c *classicGroups) joinKnown(g *classicGroup, j *joinArgs) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	r := j.r
	if t, ok := g.pending[j.memberID]; ok {
		t.Stop()
		delete(g.pending, j.memberID)
		return c.addMember(g, j)
	}
	fail := func(code int16) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, j.memberID
		return nil, resp
	}
	if code := g.checkMember(j.memberID, r.InstanceID); code != 0 {
		return fail(code)
	}
	m := g.members[j.memberID]
	if m == nil {
		return fail(codeUnknownMemberID)
	}
	if r.InstanceID == nil && m.instanceID != nil {
		return fail(codeFencedInstanceID)
	}
	switch g.state {
	case statePreparingRebalance:
		c.updateMember(g, m, j)
		ch := c.awaitJoin(m, r.Version)
		c.maybeCompleteJoin(g)
		return ch, nil
	case stateCompletingRebalance:
		if sameProtocols(m.protocols, r.Protocols) {
			// The join response was lost: send it again.
			c.resetSession(g, m)
			return nil, c.joinResponse(g, m, r.Version)
		}
		c.updateMember(g, m, j)
		ch := c.awaitJoin(m, r.Version)
		c.prepareRebalance(g)
		return ch, nil
	case stateStable:
		if m.id != g.leader && sameProtocols(m.protocols, r.Protocols) {
			c.resetSession(g, m)
			return nil, c.joinResponse(g, m, r.Version)
		}
		c.updateMember(g, m, j)
		ch := c.awaitJoin(m, r.Version)
		c.prepareRebalance(g)
		return ch, nil
	}
	return fail(codeUnknownMemberID) // Empty: the member was removed
}

// rejoinStatic serves a static member rejoining without its member id (a
// restarted process): it gets a new member id, the old id is fenced, and
// the group rebalances unless nothing changed in a Stable group.
func (c *classicGroups) rejoinStatic(g *classicGroup, j *joinArgs, old *classicMember) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	r := j.r
	j.memberID = newMemberID(*r.InstanceID)
	if old.join != nil {
		resp := old.joinFailure(codeFencedInstanceID)
		old.join <- resp
		old.join = nil
	}
	if old.sync != nil {
		old.sync <- syncFailure(old.syncVersion, codeFencedInstanceID)
		old.sync = nil
	}
	delete(g.members, old.id)
	wasLeader := g.leader == old.id
	unchanged := sameProtocols(old.protocols, r.Protocols)
	old.id = j.memberID
	g.members[old.id] = old
	g.static[*r.InstanceID] = old.id
	if wasLeader {
		g.leader = old.id
	}
	old.clientID, old.clientHost = j.clientID, j.clientHost
	if g.state == stateStable && unchanged && !wasLeader {
		old.sessionTimeout, old.rebalanceTimeout = j.session, j.rebalance
		c.resetSession(g, old)
		return nil, c.joinResponse(g, old, r.Version)
	}
	c.updateMember(g, old, j)
	ch := c.awaitJoin(old, r.Version)
	switch g.state {
	case statePreparingRebalance:
		c.maybeCompleteJoin(g)
	default:
		c.prepareRebalance(g)
	}
	return ch, nil
}

// addMember adds a new member (id j.memberID) and holds its join.
func (c *classicGroups) addMember(g *classicGroup, j *joinArgs) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	r := j.r
	g.joinSeq++
	m := &classicMember{id: j.memberID, seq: g.joinSeq}
	if r.InstanceID != nil {
		id := *r.InstanceID
		m.instanceID = &id
		g.static[id] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = r.ProtocolType
	}
	g.members[m.id] = m
	c.updateMember(g, m, j)
	ch := c.awaitJoin(m, r.Version)
	if g.initial {
		g.newJoined = true
	}
	switch g.state {
	case statePreparingRebalance:
		c.maybeCompleteJoin(g)
	default:
		c.prepareRebalance(g)
	}
	return ch, nil
}

// updateMember takes the join's timeouts, client and protocols.
func (c *classicGroups) updateMember(g *classicGroup, m *classicMember, j *joinArgs) {
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.clientID, m.clientHost = j.clientID, j.clientHost
	m.protocols = append([]kmsg.JoinGroupRequestProtocol(nil), j.r.Protocols...)
	c.resetSession(g, m)
}

// awaitJoin registers the member's held join; a previous join of the member
// still held is superseded and answered UNKNOWN_MEMBER_ID.
func (c *classicGroups) awaitJoin(m *classicMember, version int16) chan *kmsg.JoinGroupResponse {
	if m.join != nil {
		m.join <- m.joinFailure(codeUnknownMemberID)
	}
	m.join = make(chan *kmsg.JoinGroupResponse, 1)
	m.joinVersion = version
	return m.join
}

// joinFailure is a JoinGroup answer carrying code for the member.
func (m *classicMember) joinFailure(code int16) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = m.joinVersion
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, m.id
	return resp
}

// joinResponse is the member's answer for the current generation: the
// leader gets every member's metadata of the selected protocol.
func (c *classicGroups) joinResponse(g *classicGroup, m *classicMember, version int16) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	pt, p := g.protocolType, g.protocol
	resp.Generation, resp.ProtocolType, resp.Protocol = g.generation, &pt, &p
	resp.LeaderID, resp.MemberID = g.leader, m.id
	if m.id == g.leader {
		for _, o := range g.sortedMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = o.id, o.instanceID, o.metadata(g.protocol)
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp
}

// prepareRebalance moves the group to PreparingRebalance: held syncs are
// answered REBALANCE_IN_PROGRESS, and the join phase ends at the rebalance
// timeout (the longest of the members'), or earlier once every member has
// joined; the first rebalance of an empty group waits the initial delay.
func (c *classicGroups) prepareRebalance(g *classicGroup) {
	if g.state == stateCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.sync != nil {
				m.sync <- syncFailure(m.syncVersion, codeRebalanceInProgress)
				m.sync = nil
			}
		}
	}
	wasEmpty := g.state == stateEmpty
	g.state = statePreparingRebalance
	g.stopTimer()
	timeout := g.rebalanceTimeout()
	if wasEmpty && c.cfg.initialDelay > 0 {
		g.initial, g.newJoined = true, false
		delay := min(c.cfg.initialDelay, timeout)
		g.initialLeft = timeout - delay
		c.schedule(g, delay, c.initialDelayDone)
		return
	}
	g.initial = false
	c.schedule(g, timeout, c.completeJoin)
	c.maybeCompleteJoin(g)
}

// initialDelayDone ends one period of the initial delay: extended while
// members keep joining and rebalance time is left, as Kafka's
// InitialDelayedJoin.
func (c *classicGroups) initialDelayDone(g *classicGroup) {
	if g.newJoined && g.initialLeft > 0 {
		g.newJoined = false
		delay := min(c.cfg.initialDelay, g.initialLeft)
		g.initialLeft -= delay
		c.schedule(g, delay, c.initialDelayDone)
		return
	}
	g.initial = false
	c.completeJoin(g)
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *classicGroup) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// schedule arms the group's timer to run fn under c.mu, unless the group's
// timer changed meanwhile.
func (c *classicGroups) schedule(g *classicGroup, d time.Duration, fn func(*classicGroup)) {
	g.stopTimer()
	seq := g.timerSeq
	g.timer = time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed || c.groups[g.id] != g || g.timerSeq != seq {
			return
		}
		g.timer = nil
		fn(g)
		c.maybeDrop(g)
	})
}

// maybeCompleteJoin completes the join phase once every member has joined
// and no member id handed out is still to join (not during the initial
// delay).
func (c *classicGroups) maybeCompleteJoin(g *classicGroup) {
	if g.state != statePreparingRebalance || g.initial || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	c.completeJoin(g)
}

// completeJoin ends the join phase: members that did not rejoin are
// removed, the generation advances, a protocol every member supports is
// selected by vote, and every held join is answered (the leader with the
// members). An empty group becomes Empty.
func (c *classicGroups) completeJoin(g *classicGroup) {
	if g.state != statePreparingRebalance {
		return
	}
	g.stopTimer()
	for _, m := range g.members {
		if m.join == nil {
			c.dropMember(g, m, codeUnknownMemberID)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = stateEmpty, "", ""
		return
	}
	g.protocol = g.selectProtocol()
	if g.members[g.leader] == nil {
		g.leader = g.sortedMembers()[0].id
	}
	g.state = stateCompletingRebalance
	for _, m := range g.members {
		m.join <- c.joinResponse(g, m, m.joinVersion)
		m.join = nil
		c.resetSession(g, m)
	}
	c.schedule(g, g.rebalanceTimeout(), c.syncExpired)
}

// selectProtocol picks the protocol every member supports that most
// members prefer (each votes for its first supported one); ties go to the
// earliest joined member's preference.
func (g *classicGroup) selectProtocol() string {
	members := g.sortedMembers()
	votes := map[string]int{}
	var order []string
	for _, m := range members {
		for _, p := range m.protocols {
			all := true
			for _, o := range members {
				if !o.supports(p.Name) {
					all = false
					break
				}
			}
			if all {
				if _, seen := votes[p.Name]; !seen {
					order = append(order, p.Name)
				}
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// syncExpired ends a CompletingRebalance that outlived the rebalance
// timeout: the members that sent no SyncGroup are removed and the group
// rebalances.
func (c *classicGroups) syncExpired(g *classicGroup) {
	if g.state != stateCompletingRebalance {
		return
	}
	for _, m := range g.members {
		if m.sync == nil {
			c.dropMember(g, m, codeUnknownMemberID)
		}
	}
	c.afterRemoval(g)
}

// resetSession (re)arms the member's session timer.
func (c *classicGroups) resetSession(g *classicGroup, m *classicMember) {
	if m.session != nil {
		m.session.Stop()
	}
	m.sessionSeq++
	seq, id := m.sessionSeq, m
	m.session = time.AfterFunc(m.sessionTimeout, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed || c.groups[g.id] != g || g.members[id.id] != id || id.sessionSeq != seq {
			return
		}
		c.sessionExpired(g, id)
		c.maybeDrop(g)
	})
}

// sessionExpired removes a member whose session ended without a heartbeat,
// commit, join or sync (a member waiting in a JoinGroup or SyncGroup is
// alive).
func (c *classicGroups) sessionExpired(g *classicGroup, m *classicMember) {
	if m.join != nil || m.sync != nil {
		c.resetSession(g, m)
		return
	}
	c.dropMember(g, m, codeUnknownMemberID)
	c.afterRemoval(g)
}

// dropMember removes a member, answering its held requests with code.
func (c *classicGroups) dropMember(g *classicGroup, m *classicMember, code int16) {
	if m.session != nil {
		m.session.Stop()
	}
	m.sessionSeq++
	if m.join != nil {
		m.join <- m.joinFailure(code)
		m.join = nil
	}
	if m.sync != nil {
		m.sync <- syncFailure(m.syncVersion, code)
		m.sync = nil
	}
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

// afterRemoval rebalances after members left: a Stable or CompletingRebalance
// group prepares a rebalance (or empties), a PreparingRebalance one may
// complete its join phase.
func (c *classicGroups) afterRemoval(g *classicGroup) {
	switch g.state {
	case stateStable, stateCompletingRebalance:
		if len(g.members) == 0 {
			g.stopTimer()
			for _, m := range g.members {
				m.assignment = nil
			}
			g.generation++
			g.state, g.protocol, g.leader = stateEmpty, "", ""
			return
		}
		c.prepareRebalance(g)
	case statePreparingRebalance:
		if len(g.members) == 0 && len(g.pending) == 0 {
			g.stopTimer()
			g.initial = false
			g.generation++
			g.state, g.protocol, g.leader = stateEmpty, "", ""
			return
		}
		c.maybeCompleteJoin(g)
	}
}

// expirePending drops a member id handed out with MEMBER_ID_REQUIRED that
// never joined.
func (c *classicGroups) expirePending(group, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if c.closed || g == nil {
		return
	}
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	c.afterRemoval(g)
	c.maybeDrop(g)
}

// maybeDrop forgets an Empty group with no pending member and releases it
// in the registry (its committed offsets stay in mirror.GroupOffsets).
func (c *classicGroups) maybeDrop(g *classicGroup) {
	if g.state != stateEmpty || len(g.members) > 0 || len(g.pending) > 0 || c.groups[g.id] != g {
		return
	}
	g.stopTimer()
	delete(c.groups, g.id)
	c.reg.release(g.id, c)
}
