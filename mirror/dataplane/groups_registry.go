package dataplane

import (
	"sort"
	"sync"
	"time"
)

// Group types, as ListGroups (v5) and the Java admin client name them.
const (
	// GroupTypeClassic is a group of the classic protocol (JoinGroup,
	// SyncGroup, Heartbeat, LeaveGroup).
	GroupTypeClassic = "classic"
	// GroupTypeConsumer is a group of the KIP-848 consumer protocol
	// (ConsumerGroupHeartbeat).
	GroupTypeConsumer = "consumer"
)

// Group states shared by both protocols where Kafka names them alike
// (ListGroups and DescribeGroups answer them as they are).
const (
	stateEmpty               = "Empty"
	statePreparingRebalance  = "PreparingRebalance"
	stateCompletingRebalance = "CompletingRebalance"
	stateStable              = "Stable"
	stateDead                = "Dead"
)

// groupView is what ListGroups and DescribeGroups show of one group with
// members or with a protocol's state (a group known only by its committed
// offsets is shown by the offset store, as Empty).
type groupView struct {
	Group        string
	Type         string // GroupTypeClassic or GroupTypeConsumer
	State        string // Kafka's state name of the protocol ("Stable", "Assigning", ...)
	ProtocolType string // "consumer" for consumers; "" for a consumer-protocol group
	Protocol     string // the selected assignor (classic); "" otherwise
	Members      []memberView
	// DescribeCode is what DescribeGroups answers for the group (0: the
	// view). A consumer-protocol group answers GROUP_ID_NOT_FOUND there, as
	// Kafka does, and is described by ConsumerGroupDescribe.
	DescribeCode int16
}

// memberView is one member in DescribeGroups.
type memberView struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte // the member's metadata of the selected protocol
	Assignment []byte // its assignment from the leader
}

// memberCommit is the member part of an OffsetCommit or TxnOffsetCommit
// (generation for the classic protocol, member epoch for the consumer one).
type memberCommit struct {
	MemberID      string
	InstanceID    *string
	Generation    int32 // the member epoch for the consumer protocol
	Transactional bool
	// Version is the OffsetCommit request's version (a consumer-protocol
	// member must commit with v9 or later); unused for TxnOffsetCommit.
	Version int16
}

// groupProtocol is one group protocol of the data plane. Every method is
// safe for concurrent use and returns promptly (never waits on a member).
type groupProtocol interface {
	// groupType is GroupTypeClassic or GroupTypeConsumer.
	groupType() string
	// view returns the group's view, false when the protocol does not hold
	// the group (it is then unowned or another protocol's).
	view(group string) (groupView, bool)
	// active reports whether the group has members: any state other than
	// Empty and Dead.
	active(group string) bool
	// validateCommit checks an offset commit for the group against its
	// membership: 0 to commit, else Kafka's error code for every partition
	// (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
	// REBALANCE_IN_PROGRESS, STALE_MEMBER_EPOCH, ...). A memberless commit
	// (generation < 0, no member id) on an Empty group is 0.
	validateCommit(group string, c memberCommit) int16
	// whileInactive runs fn, unless the group is active, so that no member
	// joins the group until fn returns: under the lock the protocol's joins
	// take, and only while the registry still names this protocol the
	// group's owner (owned false otherwise: the registry asks again). fn is
	// short and takes no lock of the data plane.
	whileInactive(group string, fn func() error) (ran, owned bool, err error)
}

// groupRegistry records which protocol owns each group id: a group id
// belongs to at most one protocol at a time, as in Kafka's group
// coordinator, where a classic JoinGroup on a consumer group (or the
// reverse) is refused with INCONSISTENT_GROUP_PROTOCOL. A protocol claims a
// group id before it creates state for it, and releases it once the group
// has no member and no state left (its committed offsets stay in
// mirror.GroupOffsets, owned by nobody). The activity query, ListGroups,
// DescribeGroups and OffsetCommit's member validation go through the
// registry, so they answer for groups of both kinds.
type groupRegistry struct {
	mu     sync.Mutex
	owner  map[string]groupProtocol // group id → its protocol
	protos map[string]groupProtocol // group type → protocol
}

func newGroupRegistry() *groupRegistry {
	return &groupRegistry{owner: map[string]groupProtocol{}, protos: map[string]groupProtocol{}}
}

// register adds a protocol (once per group type, at New).
func (r *groupRegistry) register(p groupProtocol) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.protos[p.groupType()] = p
}

// claim makes p the owner of group, unless another protocol owns it; it
// reports whether p owns the group afterwards.
func (r *groupRegistry) claim(group string, p groupProtocol) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.owner[group]; ok {
		return o == p
	}
	r.owner[group] = p
	return true
}

// release drops p's ownership of group (no-op when p does not own it).
func (r *groupRegistry) release(group string, p groupProtocol) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owner[group] == p {
		delete(r.owner, group)
	}
}

// ownerOf returns the protocol owning group, or nil.
func (r *groupRegistry) ownerOf(group string) groupProtocol {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owner[group]
}

// active reports whether group has members under its owning protocol.
func (r *groupRegistry) active(group string) bool {
	if p := r.ownerOf(group); p != nil {
		return p.active(group)
	}
	return false
}

// view returns the owning protocol's view of group.
func (r *groupRegistry) view(group string) (groupView, bool) {
	if p := r.ownerOf(group); p != nil {
		return p.view(group)
	}
	return groupView{}, false
}

// views returns the views of every owned group, sorted by group id.
func (r *groupRegistry) views() []groupView {
	r.mu.Lock()
	owned := make(map[string]groupProtocol, len(r.owner))
	for g, p := range r.owner {
		owned[g] = p
	}
	r.mu.Unlock()
	out := make([]groupView, 0, len(owned))
	for g, p := range owned {
		if v, ok := p.view(g); ok {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// whileInactive runs fn unless group has members under its owning protocol,
// keeping members from joining (and the group from being claimed) until fn
// returns; it reports whether fn ran.
func (r *groupRegistry) whileInactive(group string, fn func() error) (bool, error) {
	for {
		r.mu.Lock()
		p := r.owner[group]
		if p == nil {
			// Unowned: a claim waits for r.mu, so nobody joins while fn runs.
			defer r.mu.Unlock()
			return true, fn()
		}
		r.mu.Unlock()
		if ran, owned, err := p.whileInactive(group, fn); owned {
			return ran, err
		}
	}
}

// validateCommit asks group's owning protocol to validate a commit. An
// unowned group has no members (it is Empty, or unknown): a memberless commit
// is 0, a member's commit UNKNOWN_MEMBER_ID, so the member rejoins.
func (r *groupRegistry) validateCommit(group string, c memberCommit) int16 {
	if p := r.ownerOf(group); p != nil {
		return p.validateCommit(group, c)
	}
	if c.Generation < 0 && c.MemberID == "" && (c.InstanceID == nil || *c.InstanceID == "") {
		return 0
	}
	return codeUnknownMemberID
}

// GroupActive reports whether group has members on this data plane (a
// classic or consumer group in any state other than Empty and Dead), or may
// have: every group is active during Config.GroupRejoinGrace after New,
// while the members of before a restart rejoin. The metadata sync asks it
// (metasync.GroupGuard) and never overwrites the offsets of an active group.
func (dp *DataPlane) GroupActive(group string) bool {
	return dp.inRejoinGrace() || dp.groupReg.active(group)
}

// inRejoinGrace reports whether New was less than Config.GroupRejoinGrace
// ago.
func (dp *DataPlane) inRejoinGrace() bool {
	return time.Since(dp.started) < dp.cfg.GroupRejoinGrace
}

// CommitIfInactive runs commit unless group has members, and keeps members
// from joining group until commit returns, so an offset sync cannot land
// on a group a consumer joined between the check and the write
// (metasync.GroupGuard). It reports whether commit ran, and its error.
func (dp *DataPlane) CommitIfInactive(group string, commit func() error) (bool, error) {
	if dp.inRejoinGrace() {
		return false, nil
	}
	return dp.groupReg.whileInactive(group, commit)
}
