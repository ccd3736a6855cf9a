package dataplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults of the classic group protocol's Config fields.
const (
	// DefaultInitialRebalanceDelay is Kafka's group.initial.rebalance.delay.ms:
	// the first rebalance of an empty group waits this long for more members
	// (extended by this much per join, up to the rebalance timeout).
	DefaultInitialRebalanceDelay = 3 * time.Second
	// DefaultMinSessionTimeout and DefaultMaxSessionTimeout are Kafka's
	// group.min.session.timeout.ms and group.max.session.timeout.ms.
	DefaultMinSessionTimeout = 6 * time.Second
	DefaultMaxSessionTimeout = 30 * time.Minute
	// DefaultMaxGroupSize bounds the members (pending ones included) of one
	// group (Kafka's group.max.size, whose own default is unbounded).
	DefaultMaxGroupSize = 1000
	// DefaultMaxGroups bounds the classic groups with members or pending
	// members.
	DefaultMaxGroups = 10000
	// DefaultGroupRejoinGrace is Kafka consumers' default session.timeout.ms:
	// a live member learns at its next heartbeat, within its session
	// timeout, that a restarted site lost its membership, and rejoins.
	DefaultGroupRejoinGrace = 45 * time.Second
	// DefaultMaxHeldGroupRequests bounds the JoinGroup and SyncGroup
	// requests held open at once (waiting for a rebalance): half of
	// admin.DefaultMaxInFlightRequests, so held group requests never take
	// every request slot of the admin server.
	DefaultMaxHeldGroupRequests = 128
)

// errClosing is the error of a held group request when the data plane
// closes (the connection is closed, as Kafka's broker shutdown does).
var errClosing = errors.New("dataplane: closing")

// classicConfig is the classic coordinator's part of Config, defaults
// applied.
type classicConfig struct {
	initialDelay time.Duration
	minSession   time.Duration
	maxSession   time.Duration
	maxGroupSize int
	maxGroups    int
	maxHeld      int
}

// classicGroups is the coordinator of the classic group protocol (Kafka's
// ClassicGroup and its GroupMetadataManager paths): JoinGroup, SyncGroup,
// Heartbeat and LeaveGroup, with rebalances, session and rebalance timeouts,
// the initial rebalance delay and static membership. Group membership is
// kept in memory only: see Groups in the package documentation.
type classicGroups struct {
	cfg     classicConfig
	reg     *groupRegistry
	closing <-chan struct{}

	mu     sync.Mutex
	groups map[string]*classicGroup
	held   int  // JoinGroup and SyncGroup requests waiting
	closed bool // no timer acts once set
}

// classicGroup is one group with members or pending members. A group
// that becomes Empty with no pending member is dropped (its offsets stay
// in mirror.GroupOffsets) and released from the registry.
type classicGroup struct {
	id           string
	state        string
	protocolType string
	protocol     string // selected at each completed join
	generation   int32
	leader       string
	members      map[string]*classicMember
	pending      map[string]*time.Timer // MEMBER_ID_REQUIRED ids, expiring after the session timeout
	static       map[string]string      // group instance id → member id
	joinSeq      int64                  // order of joins, for picking a leader
	timer        *time.Timer            // the join (PreparingRebalance) or sync (CompletingRebalance) deadline
	timerSeq     int64                  // invalidates a fired timer that lost the race with a state change
	initial      bool                   // the join phase is the initial delayed one
	newJoined    bool                   // a member joined during the current initial delay
	initialLeft  time.Duration          // rebalance time left for extending the initial delay
}

// classicMember is one member of a classic group.
type classicMember struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []kmsg.JoinGroupRequestProtocol
	assignment       []byte
	seq              int64
	join             chan *kmsg.JoinGroupResponse // set while a JoinGroup waits
	joinVersion      int16
	sync             chan *kmsg.SyncGroupResponse // set while a SyncGroup waits
	syncVersion      int16
	session          *time.Timer
	sessionSeq       int64
}

func newClassicGroups(cfg classicConfig, reg *groupRegistry, closing <-chan struct{}) *classicGroups {
	c := &classicGroups{cfg: cfg, reg: reg, closing: closing, groups: map[string]*classicGroup{}}
	reg.register(c)
	return c
}

// groupType implements groupProtocol.
func (c *classicGroups) groupType() string { return GroupTypeClassic }

// close stops every timer and answers every held request (the data plane
// closes).
func (c *classicGroups) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, g := range c.groups {
		g.stopTimer()
		for _, t := range g.pending {
			t.Stop()
		}
		for _, m := range g.members {
			if m.session != nil {
				m.session.Stop()
			}
		}
	}
}

// view implements groupProtocol.
func (c *classicGroups) view(group string) (groupView, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		return groupView{}, false
	}
	v := groupView{Group: g.id, Type: GroupTypeClassic, State: g.state, ProtocolType: g.protocolType}
	if g.state == stateStable || g.state == stateCompletingRebalance {
		v.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		mv := memberView{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if v.Protocol != "" {
			mv.Metadata = m.metadata(g.protocol)
		}
		if g.state == stateStable {
			mv.Assignment = m.assignment
		}
		v.Members = append(v.Members, mv)
	}
	return v, true
}

// active implements groupProtocol.
func (c *classicGroups) active(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	return g != nil && g.state != stateEmpty && g.state != stateDead
}

// whileInactive implements groupProtocol.
func (c *classicGroups) whileInactive(group string, fn func() error) (ran, owned bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reg.ownerOf(group) != groupProtocol(c) {
		return false, false, nil
	}
	if g := c.groups[group]; g != nil && g.state != stateEmpty && g.state != stateDead {
		return false, true, nil
	}
	return true, true, fn()
}

// validateCommit implements groupProtocol with Kafka's classic-group checks
// of OffsetCommit and TxnOffsetCommit.
func (c *classicGroups) validateCommit(group string, mc memberCommit) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		return codeUnknownMemberID
	}
	memberless := mc.MemberID == "" && mc.InstanceID == nil
	switch {
	case g.state == stateDead:
		return codeCoordinatorNotAvailable
	case mc.Generation < 0 && g.state == stateEmpty:
		return 0 // a simple commit
	case mc.Generation < 0 && memberless:
		// No member id and no generation: only while the group is empty.
		return codeUnknownMemberID
	}
	if code := g.checkMember(mc.MemberID, mc.InstanceID); code != 0 {
		return code
	}
	if mc.Generation != g.generation {
		return codeIllegalGeneration
	}
	if !mc.Transactional && g.state == stateCompletingRebalance {
		return codeRebalanceInProgress
	}
	if m := g.members[mc.MemberID]; m != nil {
		c.resetSession(g, m) // a commit shows the member alive, as Kafka's does
	}
	return 0
}

const codeCoordinatorNotAvailable int16 = 15

// checkMember is Kafka's member validation: a group instance id must map
// to memberID (UNKNOWN_MEMBER_ID when unknown, FENCED_INSTANCE_ID when it
// maps to another member), else memberID must be a member.
func (g *classicGroup) checkMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return codeUnknownMemberID
		case cur != memberID:
			return codeFencedInstanceID
		}
		return 0
	}
	if g.members[memberID] == nil {
		return codeUnknownMemberID
	}
	return 0
}

// sortedMembers returns the members in join order.
func (g *classicGroup) sortedMembers() []*classicMember {
	out := make([]*classicMember, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// metadata returns the member's metadata of protocol.
func (m *classicMember) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// supports reports whether the member lists protocol.
func (m *classicMember) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

// sameProtocols reports whether two protocol lists are equal (names,
// order and metadata).
func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || string(a[i].Metadata) != string(b[i].Metadata) {
			return false
		}
	}
	return true
}

// stopTimer stops the group's join or sync timer.
func (g *classicGroup) stopTimer() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.timerSeq++
}

// newMemberID returns a member id as Kafka makes them: the client id (the
// group instance id for a static member), a dash and a random UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// hold waits for a held request's answer, the request's context or the
// data plane's close; it gives up the wait registration on the way out.
func hold[T any](c *classicGroups, ctx context.Context, ch chan T, unregister func()) (T, error) {
	defer func() {
		c.mu.Lock()
		c.held--
		c.mu.Unlock()
	}()
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
	case <-c.closing:
	}
	c.mu.Lock()
	unregister()
	c.mu.Unlock()
	select {
	case r := <-ch: // answered just before
		return r, nil
	default:
	}
	var zero T
	if ctx.Err() != nil {
		return zero, ctx.Err()
	}
	return zero, errClosing
}
