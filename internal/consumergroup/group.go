package consumergroup

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/kmirror/kmirror/records"
)

// Defaults of Config, Kafka's where Kafka has one.
const (
	// DefaultSessionTimeout is group.consumer.session.timeout.ms's default.
	DefaultSessionTimeout = 45 * time.Second
	// DefaultHeartbeatInterval is group.consumer.heartbeat.interval.ms's default.
	DefaultHeartbeatInterval = 5 * time.Second
	// DefaultMaxMembers bounds the members of one group (Kafka's
	// group.consumer.max.size is unbounded; a site bounds what it holds).
	DefaultMaxMembers = 1000
	// DefaultMaxSubscribedTopics bounds the topic names of one subscription.
	DefaultMaxSubscribedTopics = 10000
	// DefaultRegexRefreshInterval is how often a regular-expression
	// subscription is matched again against the topics.
	DefaultRegexRefreshInterval = 10 * time.Second
	// MaxIDLength bounds member, instance, rack and client ids kept per member.
	MaxIDLength = 255
	// MaxRegexLength bounds a SubscribedTopicRegex.
	MaxRegexLength = 1024
	// maxTopicNameLength is Kafka's longest topic name.
	maxTopicNameLength = 249
)

// Config bounds and times a Group. The zero value of a field means its default.
type Config struct {
	SessionTimeout       time.Duration
	HeartbeatInterval    time.Duration
	MaxMembers           int
	MaxSubscribedTopics  int
	RegexRefreshInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.MaxMembers <= 0 {
		c.MaxMembers = DefaultMaxMembers
	}
	if c.MaxSubscribedTopics <= 0 {
		c.MaxSubscribedTopics = DefaultMaxSubscribedTopics
	}
	if c.RegexRefreshInterval <= 0 {
		c.RegexRefreshInterval = DefaultRegexRefreshInterval
	}
	return c
}

// Topic is one topic of the metadata a group assigns from.
type Topic struct {
	Name       string
	ID         records.UUID
	Partitions int32
}

// Metadata is the topics a group sees.
type Metadata interface {
	// Topic returns the named topic, false when there is none.
	Topic(name string) (Topic, bool)
	// TopicNames lists every topic (for regular-expression subscriptions).
	TopicNames() []string
}

// TopicPartitions is the partitions of one topic, by topic id, as the wire carries them.
type TopicPartitions struct {
	TopicID    records.UUID
	Partitions []int32
}

// Request is one ConsumerGroupHeartbeat. Nil fields mean "unchanged", as on the wire.
type Request struct {
	Version          int16
	MemberID         string
	MemberEpoch      int32
	InstanceID       *string
	RackID           *string
	RebalanceTimeout int32 // milliseconds; -1 unchanged
	SubscribedTopics []string
	SubscribedRegex  *string
	ServerAssignor   *string
	// Owned is the partitions the member holds; nil when not sent.
	Owned      []TopicPartitions
	OwnedSent  bool
	ClientID   string
	ClientHost string
}

// Response is the answer to one heartbeat.
type Response struct {
	ErrorCode         int16
	ErrorMessage      string
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is the member's assigned partitions, sent when HasAssignment.
	Assignment    []TopicPartitions
	HasAssignment bool
}

// tp is one partition by topic id.
type tp struct {
	id records.UUID
	p  int32
}

// partSet is a set of partitions.
type partSet map[tp]struct{}

func (s partSet) clone() partSet {
	out := make(partSet, len(s))
	for k := range s {
		out[k] = struct{}{}
	}
	return out
}

func (s partSet) equal(o partSet) bool {
	if len(s) != len(o) {
		return false
	}
	for k := range s {
		if _, ok := o[k]; !ok {
			return false
		}
	}
	return true
}

// list returns s by topic id, partitions sorted, topics in id order.
func (s partSet) list() []TopicPartitions {
	by := map[records.UUID][]int32{}
	for k := range s {
		by[k.id] = append(by[k.id], k.p)
	}
	out := make([]TopicPartitions, 0, len(by))
	for id, ps := range by {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, TopicPartitions{TopicID: id, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].TopicID[:]) < string(out[j].TopicID[:]) })
	return out
}

func setOf(tps []TopicPartitions) partSet {
	s := partSet{}
	for _, t := range tps {
		for _, p := range t.Partitions {
			s[tp{t.TopicID, p}] = struct{}{}
		}
	}
	return s
}

// memberState is a member's reconciliation state (Kafka's MemberState).
type memberState int8

const (
	stable     memberState = iota // at the target epoch with its whole target
	unrevoked                     // must give up partitions first; epoch held back
	unreleased                    // at the target epoch, waiting for partitions others still hold
)

func (s memberState) String() string {
	return [...]string{"STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"}[s]
}

// member is one member of the group.
type member struct {
	id, instanceID, rackID string
	clientID, clientHost   string
	epoch, prevEpoch       int32
	leftEpoch              int32 // a static member's epoch before it left with -2
	state                  memberState
	topics                 []string // subscribed names, sorted
	regex                  string
	assignor               string
	rebalanceTimeout       time.Duration
	assigned               partSet
	revoking               partSet
	sessionDeadline        time.Time
	rebalanceDeadline      time.Time // zero unless revoking
}

// Group is one KIP-848 consumer group. Not safe for concurrent use.
type Group struct {
	id          string
	cfg         Config
	epoch       int32
	targetEpoch int32
	target      map[string]partSet // member id → target assignment
	members     map[string]*member
	static      map[string]string // instance id → member id
	owner       map[tp]string     // partition → the member holding it (assigned or revoking)
	subMeta     map[string]Topic  // subscribed topics' metadata at the last bump (absent topics have no entry)
	regex       map[string]regexEntry
	subNames    []string // every member's subscribed names, sorted; nil when to be rebuilt
}

type regexEntry struct {
	re        *regexp.Regexp
	topics    []string
	refreshed time.Time
}

// New returns an empty group.
func New(id string, cfg Config) *Group {
	return &Group{id: id, cfg: cfg.withDefaults(), target: map[string]partSet{}, members: map[string]*member{},
		static: map[string]string{}, owner: map[tp]string{}, subMeta: map[string]Topic{}, regex: map[string]regexEntry{}}
}

// ID returns the group id.
func (g *Group) ID() string { return g.id }

// Epoch returns the group epoch and the target assignment epoch.
func (g *Group) Epoch() (group, assignment int32) { return g.epoch, g.targetEpoch }

// Empty reports whether the group has no members (a static member that left
// with -2 is still a member until its session expires).
func (g *Group) Empty() bool { return len(g.members) == 0 }

// State returns the group's state: Empty, Assigning (the target is behind the
// group epoch), Reconciling (a member is behind the target) or Stable.
func (g *Group) State() string {
	switch {
	case len(g.members) == 0:
		return StateEmpty
	case g.targetEpoch != g.epoch:
		return StateAssigning
	}
	for _, m := range g.members {
		e := m.epoch
		if e == EpochLeaveStatic {
			e = m.leftEpoch
		}
		if e != g.targetEpoch || m.state != stable {
			return StateReconciling
		}
	}
	return StateStable
}

func fail(code int16, format string, args ...any) Response {
	return Response{ErrorCode: code, ErrorMessage: fmt.Sprintf(format, args...)}
}

// Validate checks a heartbeat's shape before any group is looked up or made
// (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, and the bounds of
// this package): CodeNone, or the code and message to answer.
func Validate(req Request, cfg Config) (int16, string) {
	cfg = cfg.withDefaults()
	empty := func(s *string) bool { return s != nil && *s == "" }
	switch {
	case req.Version >= 1 && req.MemberID == "":
		return CodeInvalidRequest, "MemberId can't be empty."
	case empty(req.InstanceID):
		return CodeInvalidRequest, "InstanceId can't be empty."
	case empty(req.RackID):
		return CodeInvalidRequest, "RackId can't be empty."
	case len(req.MemberID) > MaxIDLength || (req.InstanceID != nil && len(*req.InstanceID) > MaxIDLength) ||
		(req.RackID != nil && len(*req.RackID) > MaxIDLength) || len(req.ClientID) > MaxIDLength:
		return CodeInvalidRequest, fmt.Sprintf("an id is longer than %d bytes", MaxIDLength)
	case len(req.SubscribedTopics) > cfg.MaxSubscribedTopics:
		return CodeInvalidRequest, fmt.Sprintf("%d subscribed topics, more than this site's %d", len(req.SubscribedTopics), cfg.MaxSubscribedTopics)
	case req.SubscribedRegex != nil && len(*req.SubscribedRegex) > MaxRegexLength:
		return CodeInvalidRequest, fmt.Sprintf("SubscribedTopicRegex is longer than %d bytes", MaxRegexLength)
	case req.RebalanceTimeout < -1:
		return CodeInvalidRequest, "RebalanceTimeoutMs is invalid."
	}
	for _, t := range req.SubscribedTopics {
		if t == "" || len(t) > maxTopicNameLength {
			return CodeInvalidRequest, fmt.Sprintf("subscribed topic name %q is not a valid topic name", truncate(t))
		}
	}
	switch {
	case req.MemberEpoch == EpochJoin:
		switch {
		case req.RebalanceTimeout == -1:
			return CodeInvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		case !req.OwnedSent || len(req.Owned) != 0:
			return CodeInvalidRequest, "TopicPartitions must be empty when (re-)joining."
		case req.SubscribedTopics == nil && req.SubscribedRegex == nil:
			return CodeInvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
		}
	case req.MemberEpoch == EpochLeaveStatic:
		if req.InstanceID == nil {
			return CodeInvalidRequest, "InstanceId can't be null."
		}
	case req.MemberEpoch < EpochLeaveStatic:
		return CodeInvalidRequest, "MemberEpoch is invalid."
	}
	if req.SubscribedRegex != nil && *req.SubscribedRegex != "" {
		if _, err := compileRegex(*req.SubscribedRegex); err != nil {
			return CodeInvalidRegularExpression, fmt.Sprintf("SubscribedTopicRegex %q is not a valid regular expression: %v", truncate(*req.SubscribedRegex), err)
		}
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != AssignorUniform && *req.ServerAssignor != AssignorRange {
		return CodeUnsupportedAssignor, fmt.Sprintf("ServerAssignor %q is not supported. Supported assignors: uniform, range.", truncate(*req.ServerAssignor))
	}
	return CodeNone, ""
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// compileRegex compiles a subscription's regular expression, matched against
// whole topic names as Kafka does.
func compileRegex(s string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + s + ")$")
}

// Heartbeat serves one ConsumerGroupHeartbeat of a request Validate accepted.
// The caller gives a joining member without a member id (version 0) one
// before calling.
func (g *Group) Heartbeat(now time.Time, req Request, md Metadata) Response {
	g.Tick(now, md)
	switch req.MemberEpoch {
	case EpochLeave, EpochLeaveStatic:
		return g.leave(req)
	}
	var m *member
	joined := false
	if req.MemberEpoch == EpochJoin {
		var resp Response
		if m, joined, resp = g.join(req); m == nil {
			return resp
		}
	} else {
		m = g.members[req.MemberID]
		if req.InstanceID != nil {
			id, ok := g.static[*req.InstanceID]
			switch {
			case !ok:
				return fail(CodeUnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
			case id != req.MemberID:
				return fail(CodeFencedInstanceID, "Instance id %s is used by another member.", *req.InstanceID)
			}
		}
		if m == nil {
			return fail(CodeUnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.id)
		}
		if code, msg := m.checkEpoch(req); code != CodeNone {
			return fail(code, "%s", msg)
		}
	}
	before := m.assigned.clone()
	if g.update(now, m, req) || joined {
		g.bump()
	}
	g.refreshMetadata(now, md)
	if g.targetEpoch < g.epoch {
		g.computeTarget(md)
	}
	var owned partSet
	if req.OwnedSent {
		owned = setOf(req.Owned)
	}
	g.reconcile(now, m, owned)
	resp := Response{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: g.cfg.HeartbeatInterval}
	full := req.RebalanceTimeout != -1 && (req.SubscribedTopics != nil || req.SubscribedRegex != nil) && req.OwnedSent
	if req.MemberEpoch == EpochJoin || full || !before.equal(m.assigned) {
		resp.HasAssignment, resp.Assignment = true, m.assigned.list()
	}
	return resp
}

// checkEpoch is Kafka's member-epoch check of a heartbeat: a higher epoch is
// fenced; a lower one only when it is the previous epoch and the member holds
// no more than its current assignment (the answer bumping it was lost).
func (m *member) checkEpoch(req Request) (int16, string) {
	cur := m.epoch
	if cur == EpochLeaveStatic {
		return CodeFencedMemberEpoch, "The static member left the group; it must rejoin with epoch 0."
	}
	switch {
	case req.MemberEpoch > cur:
		return CodeFencedMemberEpoch, fmt.Sprintf("The consumer group member has a greater epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, cur)
	case req.MemberEpoch < cur:
		if req.MemberEpoch != m.prevEpoch || !req.OwnedSent || !subset(setOf(req.Owned), m.assigned) {
			return CodeFencedMemberEpoch, fmt.Sprintf("The consumer group member has a smaller epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, cur)
		}
	}
	return CodeNone, ""
}

func subset(a, b partSet) bool {
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// join finds or makes the member of a heartbeat with epoch 0: a new member, a
// member rejoining with its id, or a new member taking a static member's place.
// It returns nil and the answer when the join is refused.
func (g *Group) join(req Request) (m *member, joined bool, resp Response) {
	if m, ok := g.members[req.MemberID]; ok {
		if req.InstanceID != nil && m.instanceID != *req.InstanceID {
			return nil, false, fail(CodeFencedInstanceID, "Member %s rejoined with another instance id.", req.MemberID)
		}
		if m.epoch == EpochLeaveStatic {
			m.epoch = m.leftEpoch
		}
		return m, false, Response{}
	}
	if req.InstanceID != nil {
		if oldID, ok := g.static[*req.InstanceID]; ok {
			old := g.members[oldID]
			if old.epoch != EpochLeaveStatic {
				return nil, false, fail(CodeUnreleasedInstanceID, "Static member %s with instance id %s is still active; it must leave first.", oldID, *req.InstanceID)
			}
			return g.replace(old, req.MemberID), false, Response{}
		}
	}
	if len(g.members) >= g.cfg.MaxMembers {
		return nil, false, fail(CodeGroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", g.cfg.MaxMembers)
	}
	m = &member{id: req.MemberID, assigned: partSet{}, revoking: partSet{}}
	if req.InstanceID != nil {
		m.instanceID = *req.InstanceID
		g.static[m.instanceID] = m.id
	}
	g.members[m.id] = m
	return m, true, Response{}
}

// replace gives a static member's place (epoch, assignment, target) to the new
// member id of the same instance id.
func (g *Group) replace(old *member, id string) *member {
	m := *old
	m.id = id
	m.epoch = old.leftEpoch
	m.assigned, m.revoking = old.assigned.clone(), old.revoking.clone()
	delete(g.members, old.id)
	g.members[id] = &m
	g.static[m.instanceID] = id
	if t, ok := g.target[old.id]; ok {
		delete(g.target, old.id)
		g.target[id] = t
	}
	for k, o := range g.owner {
		if o == old.id {
			g.owner[k] = id
		}
	}
	return &m
}

// leave serves a heartbeat with epoch -1 or -2.
func (g *Group) leave(req Request) Response {
	m, ok := g.members[req.MemberID]
	if req.InstanceID != nil {
		id, known := g.static[*req.InstanceID]
		switch {
		case !known:
			return fail(CodeUnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		case id != req.MemberID:
			return fail(CodeFencedInstanceID, "Instance id %s is used by another member.", *req.InstanceID)
		}
	}
	if !ok {
		return fail(CodeUnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	if req.MemberEpoch == EpochLeaveStatic && m.instanceID != "" {
		if m.epoch != EpochLeaveStatic {
			m.leftEpoch, m.epoch = m.epoch, EpochLeaveStatic
		}
		return Response{MemberID: m.id, MemberEpoch: EpochLeaveStatic, HeartbeatInterval: g.cfg.HeartbeatInterval}
	}
	g.remove(m)
	return Response{MemberID: req.MemberID, MemberEpoch: EpochLeave, HeartbeatInterval: g.cfg.HeartbeatInterval}
}

// remove takes a member out of the group: its partitions are free at once.
func (g *Group) remove(m *member) {
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	g.setOwned(m, nil)
	delete(g.target, m.id)
	g.bump()
	for re := range g.regex {
		if !g.regexUsed(re) {
			delete(g.regex, re)
		}
	}
}

func (g *Group) regexUsed(re string) bool {
	for _, m := range g.members {
		if m.regex == re {
			return true
		}
	}
	return false
}

// bump moves the group epoch: what the assignment depends on changed.
func (g *Group) bump() {
	g.epoch++
	g.subNames = nil
}

// update applies what a heartbeat changes of the member, and reports whether
// the assignment depends on the change (the group epoch is then bumped).
func (g *Group) update(now time.Time, m *member, req Request) bool {
	m.sessionDeadline = now.Add(g.cfg.SessionTimeout)
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.ClientID != "" || m.clientID == "" {
		m.clientID, m.clientHost = req.ClientID, req.ClientHost
	}
	if req.RebalanceTimeout >= 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeout) * time.Millisecond
	}
	changed := false
	if req.SubscribedTopics != nil {
		names := dedupSorted(req.SubscribedTopics)
		if !equalStrings(names, m.topics) {
			m.topics, changed = names, true
		}
	}
	if req.SubscribedRegex != nil && *req.SubscribedRegex != m.regex {
		m.regex, changed = *req.SubscribedRegex, true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		before := g.assignor()
		m.assignor = *req.ServerAssignor
		if g.assignor() != before {
			changed = true
		}
	}
	return changed
}

func dedupSorted(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	j := 0
	for i, s := range out {
		if i == 0 || s != out[j-1] {
			out[j] = s
			j++
		}
	}
	return out[:j]
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// assignor is the group's server assignor: the one most members ask for
// (ties to the name first in order), "uniform" when none asks.
func (g *Group) assignor() string {
	n := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			n[m.assignor]++
		}
	}
	best, bestN := AssignorUniform, 0
	for _, a := range []string{AssignorUniform, AssignorRange} {
		if n[a] > bestN {
			best, bestN = a, n[a]
		}
	}
	return best
}

// subscribed returns the topic names member m subscribes to: its names and
// the topics its regular expression matches.
func (g *Group) subscribed(m *member) []string {
	if m.regex == "" {
		return m.topics
	}
	out := append([]string{}, m.topics...)
	out = append(out, g.regex[m.regex].topics...)
	return dedupSorted(out)
}

// refreshMetadata re-matches regular expressions due a refresh, and bumps the
// group epoch when a subscribed topic appeared, vanished or changed its id or
// partition count since the last bump.
func (g *Group) refreshMetadata(now time.Time, md Metadata) {
	regexChanged := false
	for _, m := range g.members {
		if m.regex == "" {
			continue
		}
		e, ok := g.regex[m.regex]
		if ok && now.Sub(e.refreshed) < g.cfg.RegexRefreshInterval {
			continue
		}
		if !ok {
			re, err := compileRegex(m.regex)
			if err != nil {
				continue // Validate refused it; never reached
			}
			e.re = re
		}
		var topics []string
		for _, name := range md.TopicNames() {
			if len(name) > 1 && name[0] == '_' && name[1] == '_' {
				continue // internal topics are never matched
			}
			if e.re.MatchString(name) {
				topics = append(topics, name)
			}
		}
		sort.Strings(topics)
		if ok && !equalStrings(topics, e.topics) {
			regexChanged = true
		}
		e.topics, e.refreshed = topics, now
		g.regex[m.regex] = e
	}
	if regexChanged || g.subNames == nil {
		var names []string
		for _, m := range g.members {
			names = append(names, g.subscribed(m)...)
		}
		g.subNames = dedupSorted(names)
	}
	cur := map[string]Topic{}
	for _, name := range g.subNames {
		if t, ok := md.Topic(name); ok && t.Partitions > 0 {
			cur[name] = t
		}
	}
	if regexChanged || !equalMeta(cur, g.subMeta) {
		g.subMeta = cur
		if regexChanged || g.targetEpoch == g.epoch {
			g.bump()
		}
	}
}

func equalMeta(a, b map[string]Topic) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// computeTarget runs the group's assignor and moves the target epoch to the
// group epoch.
func (g *Group) computeTarget(md Metadata) {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	in := assignInput{members: make([]assignMember, 0, len(ids)), topics: map[string]Topic{}, prev: g.target}
	for _, id := range ids {
		m := g.members[id]
		am := assignMember{id: id, instanceID: m.instanceID}
		for _, name := range g.subscribed(m) {
			if t, ok := g.subMeta[name]; ok {
				am.topics = append(am.topics, name)
				in.topics[name] = t
			}
		}
		in.members = append(in.members, am)
	}
	if g.assignor() == AssignorRange {
		g.target = assignRange(in)
	} else {
		g.target = assignUniform(in)
	}
	g.targetEpoch = g.epoch
}

// reconcile moves member m towards its target (Kafka's CurrentAssignmentBuilder).
// owned is what the heartbeat says the member holds (nil when not sent).
func (g *Group) reconcile(now time.Time, m *member, owned partSet) {
	switch m.state {
	case stable:
		if m.epoch == g.targetEpoch {
			return
		}
	case unrevoked:
		if owned == nil || overlaps(owned, m.revoking) {
			return // still holds what it must give up
		}
	}
	g.nextAssignment(now, m, owned)
}

func overlaps(a, b partSet) bool {
	for k := range a {
		if _, ok := b[k]; ok {
			return true
		}
	}
	return false
}

// nextAssignment computes the member's next step from its current assignment
// and its target.
func (g *Group) nextAssignment(now time.Time, m *member, owned partSet) {
	target := g.target[m.id]
	keep, revoke, assignable := partSet{}, partSet{}, partSet{}
	waiting := false
	for k := range m.assigned {
		if _, ok := target[k]; ok {
			keep[k] = struct{}{}
		} else {
			revoke[k] = struct{}{}
		}
	}
	for k := range target {
		if _, ok := m.assigned[k]; ok {
			continue
		}
		if o, held := g.owner[k]; held && o != m.id {
			waiting = true
			continue
		}
		assignable[k] = struct{}{}
	}
	// A member that says it no longer holds the partitions to revoke has
	// revoked them: no need to ask.
	if len(revoke) > 0 && (owned == nil || overlaps(owned, revoke)) {
		if m.state != unrevoked {
			m.rebalanceDeadline = now.Add(m.rebalanceTimeout)
		}
		m.state = unrevoked
		g.setOwned(m, keep, revoke)
		return
	}
	for k := range assignable {
		keep[k] = struct{}{}
	}
	if m.epoch != g.targetEpoch {
		m.prevEpoch, m.epoch = m.epoch, g.targetEpoch
	}
	m.state, m.rebalanceDeadline = stable, time.Time{}
	if waiting {
		m.state = unreleased
	}
	g.setOwned(m, keep)
}

// setOwned sets the member's assigned partitions (sets[0]) and those it is
// revoking (sets[1]), and the partitions' owner to match.
func (g *Group) setOwned(m *member, sets ...partSet) {
	for k := range m.assigned {
		delete(g.owner, k)
	}
	for k := range m.revoking {
		delete(g.owner, k)
	}
	m.assigned, m.revoking = partSet{}, partSet{}
	if len(sets) > 0 {
		m.assigned = sets[0]
	}
	if len(sets) > 1 {
		m.revoking = sets[1]
	}
	for k := range m.assigned {
		g.owner[k] = m.id
	}
	for k := range m.revoking {
		g.owner[k] = m.id
	}
}

// Tick expires members whose session or rebalance timeout passed, and
// follows metadata changes; it reports whether the group changed. Hosts call
// it periodically; Heartbeat calls it first.
func (g *Group) Tick(now time.Time, md Metadata) bool {
	before := g.epoch
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		expired := !now.Before(m.sessionDeadline)
		stuck := m.state == unrevoked && !m.rebalanceDeadline.IsZero() && !now.Before(m.rebalanceDeadline)
		if expired || stuck {
			g.remove(m)
		}
	}
	// Metadata is followed at heartbeats; a tick only recomputes the target
	// once members are gone.
	if len(g.members) > 0 && g.epoch != before {
		g.refreshMetadata(now, md)
		g.computeTarget(md)
	}
	return g.epoch != before
}

// ValidateCommit checks an OffsetCommit (or TxnOffsetCommit) of memberID at
// memberEpoch: CodeNone to commit. A memberless commit (epoch < 0) is
// accepted only while the group is empty; a member's commit needs the
// member's current epoch (STALE_MEMBER_EPOCH) and, unless transactional,
// OffsetCommit v9 or later (UNSUPPORTED_VERSION).
func (g *Group) ValidateCommit(memberID string, memberEpoch int32, version int16, transactional bool) int16 {
	if memberEpoch < 0 && len(g.members) == 0 {
		return CodeNone
	}
	m, ok := g.members[memberID]
	switch {
	case !ok:
		return CodeUnknownMemberID
	case !transactional && version < 9:
		return CodeUnsupportedVersion
	case memberEpoch != m.epoch:
		return CodeStaleMemberEpoch
	}
	return CodeNone
}

// ValidateFetch checks an OffsetFetch of memberID at memberEpoch (v9): epoch
// -1 (an admin client) is always served; else the member must be known at
// that epoch.
func (g *Group) ValidateFetch(memberID string, memberEpoch int32) int16 {
	if memberEpoch == -1 {
		return CodeNone
	}
	m, ok := g.members[memberID]
	switch {
	case !ok:
		return CodeUnknownMemberID
	case memberEpoch != m.epoch:
		return CodeStaleMemberEpoch
	}
	return CodeNone
}
