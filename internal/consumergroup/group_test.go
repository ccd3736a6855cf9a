package consumergroup

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/records"
)

// fakeMeta is a Metadata of fixed topics.
type fakeMeta map[string]Topic

func (f fakeMeta) Topic(name string) (Topic, bool) { t, ok := f[name]; return t, ok }
func (f fakeMeta) TopicNames() []string {
	var out []string
	for n := range f {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func topicID(name string) records.UUID {
	var u records.UUID
	copy(u[:], name)
	u[15] = 1
	return u
}

func meta(parts map[string]int32) fakeMeta {
	m := fakeMeta{}
	for n, p := range parts {
		m[n] = Topic{Name: n, ID: topicID(n), Partitions: p}
	}
	return m
}

// harness drives one group with a fake clock.
type harness struct {
	t   *testing.T
	g   *Group
	md  fakeMeta
	now time.Time
	// owned is what each member's client holds (its last assignment, minus
	// nothing: the tests decide when a client lets go).
	owned map[string]partSet
	epoch map[string]int32
}

func newHarness(t *testing.T, cfg Config, md fakeMeta) *harness {
	return &harness{t: t, g: New("g", cfg), md: md, now: time.Unix(1000, 0), owned: map[string]partSet{}, epoch: map[string]int32{}}
}

func strp(s string) *string { return &s }

func (h *harness) send(req Request) Response {
	h.t.Helper()
	if code, msg := Validate(req, h.g.cfg); code != CodeNone {
		return Response{ErrorCode: code, ErrorMessage: msg}
	}
	return h.g.Heartbeat(h.now, req, h.md)
}

// join sends a member's first heartbeat.
func (h *harness) join(id string, topics ...string) Response {
	h.t.Helper()
	resp := h.send(Request{Version: 1, MemberID: id, MemberEpoch: 0, RebalanceTimeout: 30000, SubscribedTopics: topics, OwnedSent: true, Owned: []TopicPartitions{}})
	h.took(id, resp)
	return resp
}

// took records what a response gave the member (a client adopts an assignment at once
// and drops revoked partitions at once, as Kafka's client does after its callback).
func (h *harness) took(id string, resp Response) {
	if resp.ErrorCode != CodeNone {
		return
	}
	h.epoch[id] = resp.MemberEpoch
	if resp.HasAssignment {
		h.owned[id] = setOf(resp.Assignment)
	}
}

// beat sends a heartbeat with what the member holds.
func (h *harness) beat(id string) Response {
	h.t.Helper()
	resp := h.send(Request{Version: 1, MemberID: id, MemberEpoch: h.epoch[id], RebalanceTimeout: -1, OwnedSent: true, Owned: h.owned[id].list()})
	h.took(id, resp)
	return resp
}

func (h *harness) parts(id string) string {
	return show(h.owned[id])
}

func show(s partSet) string {
	var out []string
	for _, t := range s.list() {
		name := strings.TrimRight(string(t.TopicID[:15]), "\x00")
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s-%d", name, p))
		}
	}
	return strings.Join(out, ",")
}

// checkExclusive fails when two clients hold one partition.
func (h *harness) checkExclusive() {
	h.t.Helper()
	seen := map[tp]string{}
	for id, s := range h.owned {
		if _, ok := h.g.members[id]; !ok {
			continue
		}
		for k := range s {
			if o, dup := seen[k]; dup {
				h.t.Fatalf("partition %v held by %s and %s", k, o, id)
			}
			seen[k] = id
		}
	}
}

func TestJoinSingleMember(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"a": 3}))
	resp := h.join("m1", "a")
	if resp.ErrorCode != 0 || resp.MemberEpoch != 1 || !resp.HasAssignment {
		t.Fatalf("join: %+v", resp)
	}
	if got := h.parts("m1"); got != "a-0,a-1,a-2" {
		t.Fatalf("assignment %q", got)
	}
	if resp.HeartbeatInterval != DefaultHeartbeatInterval {
		t.Fatalf("interval %v", resp.HeartbeatInterval)
	}
	if h.g.State() != StateStable {
		t.Fatalf("state %s", h.g.State())
	}
	// A plain heartbeat changes nothing and sends no assignment.
	if resp := h.beat("m1"); resp.ErrorCode != 0 || resp.MemberEpoch != 1 {
		t.Fatalf("beat: %+v", resp)
	}
}

// TestSecondMemberRevokeThenAssign: a partition reaches the new member only
// after the old owner's heartbeat no longer holds it.
func TestSecondMemberRevokeThenAssign(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"a": 4}))
	h.join("m1", "a")
	resp := h.join("m2", "a")
	if resp.MemberEpoch != 2 || h.parts("m2") != "" {
		t.Fatalf("m2 must wait for m1's partitions: %+v %q", resp, h.parts("m2"))
	}
	if h.g.State() != StateReconciling {
		t.Fatalf("state %s", h.g.State())
	}
	// m1 is asked to revoke two partitions; its epoch stays 1 until it does.
	resp = h.send(Request{Version: 1, MemberID: "m1", MemberEpoch: 1, RebalanceTimeout: -1}) // owned not sent: still holds all
	if resp.MemberEpoch != 1 || !resp.HasAssignment || len(setOf(resp.Assignment)) != 2 {
		t.Fatalf("m1 revocation: %+v", resp)
	}
	kept := setOf(resp.Assignment)
	// m2 still gets nothing: m1 has not said it let go.
	if resp := h.beat("m2"); resp.HasAssignment {
		t.Fatalf("m2 got partitions m1 still holds: %+v", resp)
	}
	// m1 confirms (its owned is the kept half) and moves to epoch 2.
	h.owned["m1"] = kept
	resp = h.beat("m1")
	if resp.MemberEpoch != 2 {
		t.Fatalf("m1 after revocation: %+v", resp)
	}
	resp = h.beat("m2")
	if !resp.HasAssignment || len(h.owned["m2"]) != 2 {
		t.Fatalf("m2 after m1 revoked: %+v", resp)
	}
	h.checkExclusive()
	if h.g.State() != StateStable {
		t.Fatalf("state %s", h.g.State())
	}
}

// TestChurnNeverSharesPartition: members join and leave in turn; at no step
// do two clients hold a partition, and the group settles with every partition
// held once.
func TestChurnNeverSharesPartition(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"a": 7, "b": 3}))
	ids := []string{"m1", "m2", "m3", "m4"}
	for _, id := range ids {
		h.join(id, "a", "b")
		for i := 0; i < 4; i++ {
			for _, o := range ids {
				if _, ok := h.epoch[o]; ok {
					h.beat(o)
					h.checkExclusive()
				}
			}
		}
	}
	total := 0
	for _, id := range ids {
		n := len(h.owned[id])
		if n < 2 || n > 3 {
			t.Fatalf("%s holds %d of 10 partitions", id, n)
		}
		total += n
	}
	if total != 10 || h.g.State() != StateStable {
		t.Fatalf("total %d, state %s", total, h.g.State())
	}
	if resp := h.send(Request{Version: 1, MemberID: "m2", MemberEpoch: EpochLeave}); resp.MemberEpoch != EpochLeave || resp.ErrorCode != 0 {
		t.Fatalf("leave: %+v", resp)
	}
	delete(h.owned, "m2")
	delete(h.epoch, "m2")
	for i := 0; i < 3; i++ {
		for _, id := range []string{"m1", "m3", "m4"} {
			h.beat(id)
			h.checkExclusive()
		}
	}
	total = 0
	for _, id := range []string{"m1", "m3", "m4"} {
		total += len(h.owned[id])
	}
	if total != 10 {
		t.Fatalf("after leave %d partitions held", total)
	}
}

func TestLeaveFreesPartitions(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"a": 2}))
	h.join("m1", "a")
	h.join("m2", "a")
	h.send(Request{Version: 1, MemberID: "m1", MemberEpoch: 1, RebalanceTimeout: -1}) // revoke asked
	resp := h.send(Request{Version: 1, MemberID: "m1", MemberEpoch: EpochLeave})
	if resp.ErrorCode != 0 || resp.MemberEpoch != EpochLeave {
		t.Fatalf("leave %+v", resp)
	}
	if resp := h.beat("m2"); h.parts("m2") != "a-0,a-1" || resp.MemberEpoch != 3 {
		t.Fatalf("m2 after m1 left: %+v %q", resp, h.parts("m2"))
	}
	if resp := h.send(Request{Version: 1, MemberID: "m1", MemberEpoch: 1, RebalanceTimeout: -1}); resp.ErrorCode != CodeUnknownMemberID {
		t.Fatalf("heartbeat after leave: %+v", resp)
	}
}

func TestSessionExpiry(t *testing.T) {
	h := newHarness(t, Config{SessionTimeout: 10 * time.Second}, meta(map[string]int32{"a": 2}))
	h.join("m1", "a")
	h.join("m2", "a")
	for i := 0; i < 3; i++ {
		h.beat("m1")
		h.beat("m2")
	}
	h.now = h.now.Add(6 * time.Second)
	h.beat("m2")
	h.now = h.now.Add(6 * time.Second) // m1 silent for 12 s
	if !h.g.Tick(h.now, h.md) {
		t.Fatal("expiry did not change the group")
	}
	if _, ok := h.g.Member("m1"); ok {
		t.Fatal("m1 not expired")
	}
	h.beat("m2")
	if h.parts("m2") != "a-0,a-1" {
		t.Fatalf("m2 %q", h.parts("m2"))
	}
	if resp := h.beat("m1"); resp.ErrorCode != CodeUnknownMemberID {
		t.Fatalf("expired member: %+v", resp)
	}
}

// TestRebalanceTimeout: a member that does not revoke within its rebalance
// timeout is removed, and its partitions go to the others.
func TestRebalanceTimeout(t *testing.T) {
	h := newHarness(t, Config{SessionTimeout: time.Minute}, meta(map[string]int32{"a": 2}))
	h.join("m1", "a")
	h.join("m2", "a")
	stuck := Request{Version: 1, MemberID: "m1", MemberEpoch: 1, RebalanceTimeout: -1, OwnedSent: true, Owned: setOf([]TopicPartitions{{topicID("a"), []int32{0, 1}}}).list()}
	h.send(stuck)
	h.now = h.now.Add(20 * time.Second)
	if resp := h.send(stuck); resp.ErrorCode != 0 || resp.MemberEpoch != 1 {
		t.Fatalf("still revoking: %+v", resp)
	}
	h.now = h.now.Add(11 * time.Second) // 31 s > 30 s
	h.beat("m2")
	if _, ok := h.g.Member("m1"); ok {
		t.Fatal("m1 kept after its rebalance timeout")
	}
	if h.parts("m2") != "a-0,a-1" {
		t.Fatalf("m2 %q", h.parts("m2"))
	}
}

func TestStaticMemberRejoin(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"a": 4}))
	join := func(id, inst string) Response {
		resp := h.send(Request{Version: 1, MemberID: id, MemberEpoch: 0, InstanceID: strp(inst), RebalanceTimeout: 30000, SubscribedTopics: []string{"a"}, OwnedSent: true, Owned: []TopicPartitions{}})
		h.took(id, resp)
		return resp
	}
	join("m1", "i1")
	join("m2", "i2")
	for i := 0; i < 3; i++ {
		h.beat("m1")
		h.beat("m2")
	}
	before := h.parts("m1")
	epoch, _ := h.g.Epoch()
	// Another member with i1 while m1 is active: refused.
	if resp := join("m3", "i1"); resp.ErrorCode != CodeUnreleasedInstanceID {
		t.Fatalf("duplicate instance: %+v", resp)
	}
	// m1 leaves temporarily.
	if resp := h.send(Request{Version: 1, MemberID: "m1", MemberEpoch: EpochLeaveStatic, InstanceID: strp("i1")}); resp.MemberEpoch != EpochLeaveStatic {
		t.Fatalf("static leave: %+v", resp)
	}
	if g, _ := h.g.Epoch(); g != epoch {
		t.Fatalf("static leave bumped the group epoch %d → %d", epoch, g)
	}
	// Its instance rejoins under a new member id: same partitions, no rebalance.
	resp := join("m3", "i1")
	if resp.ErrorCode != 0 || h.parts("m3") != before || resp.MemberEpoch != h.epoch["m2"] {
		t.Fatalf("rejoin: %+v %q want %q", resp, h.parts("m3"), before)
	}
	if g, _ := h.g.Epoch(); g != epoch {
		t.Fatalf("static rejoin bumped the group epoch %d → %d", epoch, g)
	}
	if resp := h.send(Request{Version: 1, MemberID: "m1", MemberEpoch: 2, InstanceID: strp("i1"), RebalanceTimeout: -1}); resp.ErrorCode != CodeFencedInstanceID {
		t.Fatalf("old member id of the instance: %+v", resp)
	}
	// A static member that left and never came back expires with its session.
	h.send(Request{Version: 1, MemberID: "m2", MemberEpoch: EpochLeaveStatic, InstanceID: strp("i2")})
	h.now = h.now.Add(30 * time.Second)
	h.beat("m3")
	h.now = h.now.Add(20 * time.Second) // i2 silent 50 s, m3 20 s
	h.beat("m3")
	h.beat("m3")
	if _, ok := h.g.Member("m2"); ok {
		t.Fatal("the static member that left was kept past its session")
	}
	if h.parts("m3") != "a-0,a-1,a-2,a-3" {
		t.Fatalf("after i2 expired m3 holds %q", h.parts("m3"))
	}
}

func TestFencing(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"a": 2}))
	h.join("m1", "a")
	h.join("m2", "a")
	h.owned["m1"] = setOf([]TopicPartitions{{topicID("a"), []int32{0}}})
	h.beat("m1") // revokes a-1, moves to epoch 2
	if h.epoch["m1"] != 2 {
		t.Fatalf("m1 epoch %d", h.epoch["m1"])
	}
	cases := []struct {
		name  string
		epoch int32
		owned []int32
		want  int16
	}{
		{"greater epoch", 3, []int32{0}, CodeFencedMemberEpoch},
		{"previous epoch, subset owned (lost answer)", 1, []int32{0}, CodeNone},
		{"previous epoch, more than assigned", 1, []int32{0, 1}, CodeFencedMemberEpoch},
		{"epoch 0 is a rejoin, not a fence", 0, nil, CodeNone},
	}
	for _, c := range cases {
		req := Request{Version: 1, MemberID: "m1", MemberEpoch: c.epoch, RebalanceTimeout: -1, OwnedSent: true, Owned: []TopicPartitions{{topicID("a"), c.owned}}}
		if c.epoch == 0 {
			req.RebalanceTimeout, req.SubscribedTopics, req.Owned = 30000, []string{"a"}, []TopicPartitions{}
		}
		if resp := h.send(req); resp.ErrorCode != c.want {
			t.Errorf("%s: %+v, want code %d", c.name, resp, c.want)
		}
	}
	if resp := h.send(Request{Version: 1, MemberID: "nobody", MemberEpoch: 5, RebalanceTimeout: -1}); resp.ErrorCode != CodeUnknownMemberID {
		t.Errorf("unknown member: %+v", resp)
	}
	if code := h.g.ValidateCommit("m1", 1, 9, false); code != CodeStaleMemberEpoch {
		t.Errorf("commit at stale epoch: %d", code)
	}
	if code := h.g.ValidateCommit("m1", 2, 9, false); code != CodeNone {
		t.Errorf("commit at current epoch: %d", code)
	}
	if code := h.g.ValidateCommit("m1", 2, 8, false); code != CodeUnsupportedVersion {
		t.Errorf("commit v8 by a consumer member: %d", code)
	}
	if code := h.g.ValidateCommit("", -1, 9, false); code != CodeUnknownMemberID {
		t.Errorf("memberless commit on an active group: %d", code)
	}
	if code := h.g.ValidateFetch("m1", 1); code != CodeStaleMemberEpoch {
		t.Errorf("fetch at stale epoch: %d", code)
	}
	if code := h.g.ValidateFetch("", -1); code != CodeNone {
		t.Errorf("admin fetch: %d", code)
	}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", 300)
	cases := []struct {
		name string
		req  Request
		want int16
	}{
		{"v1 empty member id", Request{Version: 1, RebalanceTimeout: 1, SubscribedTopics: []string{"a"}, OwnedSent: true}, CodeInvalidRequest},
		{"v0 empty member id", Request{Version: 0, RebalanceTimeout: 1, SubscribedTopics: []string{"a"}, OwnedSent: true}, CodeNone},
		{"join without rebalance timeout", Request{Version: 1, MemberID: "m", RebalanceTimeout: -1, SubscribedTopics: []string{"a"}, OwnedSent: true}, CodeInvalidRequest},
		{"join with owned partitions", Request{Version: 1, MemberID: "m", RebalanceTimeout: 1, SubscribedTopics: []string{"a"}, OwnedSent: true, Owned: []TopicPartitions{{Partitions: []int32{0}}}}, CodeInvalidRequest},
		{"join without subscription", Request{Version: 1, MemberID: "m", RebalanceTimeout: 1, OwnedSent: true}, CodeInvalidRequest},
		{"empty instance id", Request{Version: 1, MemberID: "m", MemberEpoch: 3, InstanceID: strp(""), RebalanceTimeout: -1}, CodeInvalidRequest},
		{"static leave without instance", Request{Version: 1, MemberID: "m", MemberEpoch: -2}, CodeInvalidRequest},
		{"epoch -3", Request{Version: 1, MemberID: "m", MemberEpoch: -3}, CodeInvalidRequest},
		{"unknown assignor", Request{Version: 1, MemberID: "m", MemberEpoch: 3, RebalanceTimeout: -1, ServerAssignor: strp("sticky")}, CodeUnsupportedAssignor},
		{"bad regex", Request{Version: 1, MemberID: "m", MemberEpoch: 3, RebalanceTimeout: -1, SubscribedRegex: strp("a(")}, CodeInvalidRegularExpression},
		{"topic name too long", Request{Version: 1, MemberID: "m", MemberEpoch: 3, RebalanceTimeout: -1, SubscribedTopics: []string{long}}, CodeInvalidRequest},
		{"too many topics", Request{Version: 1, MemberID: "m", MemberEpoch: 3, RebalanceTimeout: -1, SubscribedTopics: make([]string, DefaultMaxSubscribedTopics+1)}, CodeInvalidRequest},
		{"member id too long", Request{Version: 1, MemberID: long, MemberEpoch: 3, RebalanceTimeout: -1}, CodeInvalidRequest},
	}
	for _, c := range cases {
		if code, msg := Validate(c.req, Config{}); code != c.want {
			t.Errorf("%s: code %d (%s), want %d", c.name, code, msg, c.want)
		}
	}
}

func TestMaxMembers(t *testing.T) {
	h := newHarness(t, Config{MaxMembers: 2}, meta(map[string]int32{"a": 2}))
	h.join("m1", "a")
	h.join("m2", "a")
	if resp := h.join("m3", "a"); resp.ErrorCode != CodeGroupMaxSizeReached {
		t.Fatalf("third member: %+v", resp)
	}
}

// TestNewPartitionReassigns: a subscribed topic growing bumps the group epoch
// and its new partition is assigned.
func TestNewPartitionReassigns(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"a": 1}))
	h.join("m1", "a")
	h.md["a"] = Topic{Name: "a", ID: topicID("a"), Partitions: 2}
	resp := h.beat("m1")
	if resp.MemberEpoch != 2 || h.parts("m1") != "a-0,a-1" {
		t.Fatalf("after growth: %+v %q", resp, h.parts("m1"))
	}
	// A topic that did not exist at the subscription is assigned once created.
	h.send(Request{Version: 1, MemberID: "m1", MemberEpoch: 2, RebalanceTimeout: -1, SubscribedTopics: []string{"a", "later"}})
	h.md["later"] = Topic{Name: "later", ID: topicID("later"), Partitions: 1}
	h.beat("m1")
	if h.parts("m1") != "a-0,a-1,later-0" && h.parts("m1") != "later-0,a-0,a-1" {
		t.Fatalf("after creation: %q", h.parts("m1"))
	}
}

func TestRegexSubscription(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"orders-1": 1, "orders-2": 1, "other": 1, "__consumer_offsets": 1}))
	resp := h.send(Request{Version: 1, MemberID: "m1", RebalanceTimeout: 1000, SubscribedRegex: strp("orders-.*"), OwnedSent: true, Owned: []TopicPartitions{}})
	h.took("m1", resp)
	if got := len(h.owned["m1"]); got != 2 {
		t.Fatalf("regex matched %d partitions: %q", got, h.parts("m1"))
	}
	// A new matching topic is picked up at the next refresh.
	h.md["orders-3"] = Topic{Name: "orders-3", ID: topicID("orders-3"), Partitions: 1}
	h.beat("m1")
	if len(h.owned["m1"]) != 2 {
		t.Fatalf("refreshed before the interval: %q", h.parts("m1"))
	}
	h.now = h.now.Add(DefaultRegexRefreshInterval)
	h.beat("m1")
	if len(h.owned["m1"]) != 3 {
		t.Fatalf("after refresh: %q", h.parts("m1"))
	}
}

func TestAssignors(t *testing.T) {
	mk := func(ids ...string) assignInput {
		in := assignInput{topics: map[string]Topic{"a": {ID: topicID("a"), Partitions: 5}, "b": {ID: topicID("b"), Partitions: 5}}}
		for _, id := range ids {
			in.members = append(in.members, assignMember{id: id, topics: []string{"a", "b"}})
		}
		return in
	}
	r := assignRange(mk("x", "y"))
	if show(r["x"]) != "a-0,a-1,a-2,b-0,b-1,b-2" || show(r["y"]) != "a-3,a-4,b-3,b-4" {
		t.Fatalf("range: x=%q y=%q", show(r["x"]), show(r["y"]))
	}
	u := assignUniform(mk("x", "y", "z"))
	for id, s := range u {
		if n := len(s); n < 3 || n > 4 {
			t.Fatalf("uniform: %s holds %d of 10", id, n)
		}
	}
	// Sticky: a fourth member takes partitions, the others keep the rest.
	in := mk("x", "y", "z", "w")
	in.prev = u
	u2 := assignUniform(in)
	moved := 0
	for _, id := range []string{"x", "y", "z"} {
		for k := range u[id] {
			if _, ok := u2[id][k]; !ok {
				moved++
			}
		}
	}
	if len(u2["w"]) != 2 || moved != 2 {
		t.Fatalf("uniform after join: w holds %d, %d partitions moved", len(u2["w"]), moved)
	}
	// Heterogeneous: a topic only one member subscribes to stays with it.
	in = assignInput{topics: map[string]Topic{"a": {ID: topicID("a"), Partitions: 4}, "b": {ID: topicID("b"), Partitions: 2}},
		members: []assignMember{{id: "x", topics: []string{"a", "b"}}, {id: "y", topics: []string{"a"}}}}
	u = assignUniform(in)
	if len(u["x"]) != 3 || len(u["y"]) != 3 {
		t.Fatalf("heterogeneous: x=%q y=%q", show(u["x"]), show(u["y"]))
	}
	for k := range u["y"] {
		if k.id == topicID("b") {
			t.Fatalf("y got a partition of b it does not subscribe to")
		}
	}
}

func TestRangeAssignorChosen(t *testing.T) {
	h := newHarness(t, Config{}, meta(map[string]int32{"a": 3}))
	resp := h.send(Request{Version: 1, MemberID: "m1", RebalanceTimeout: 1000, SubscribedTopics: []string{"a"}, ServerAssignor: strp("range"), OwnedSent: true, Owned: []TopicPartitions{}})
	if resp.ErrorCode != 0 || h.g.Describe().Assignor != AssignorRange {
		t.Fatalf("%+v assignor %q", resp, h.g.Describe().Assignor)
	}
}
