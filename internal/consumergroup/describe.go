package consumergroup

import "sort"

// Description is what ConsumerGroupDescribe shows of a group.
type Description struct {
	Group           string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []MemberDescription
}

// MemberDescription is one member of a Description.
type MemberDescription struct {
	MemberID         string
	InstanceID       *string
	RackID           *string
	MemberEpoch      int32
	ClientID         string
	ClientHost       string
	SubscribedTopics []string
	SubscribedRegex  *string
	Assignment       []TopicPartitions
	TargetAssignment []TopicPartitions
}

// Describe returns the group's description, members in member id order.
func (g *Group) Describe() Description {
	d := Description{Group: g.id, State: g.State(), Epoch: g.epoch, AssignmentEpoch: g.targetEpoch, Assignor: g.assignor()}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		md := MemberDescription{MemberID: id, MemberEpoch: m.epoch, ClientID: m.clientID, ClientHost: m.clientHost,
			SubscribedTopics: append([]string{}, m.topics...), Assignment: m.assigned.list(), TargetAssignment: g.target[id].list()}
		if m.instanceID != "" {
			s := m.instanceID
			md.InstanceID = &s
		}
		if m.rackID != "" {
			s := m.rackID
			md.RackID = &s
		}
		if m.regex != "" {
			s := m.regex
			md.SubscribedRegex = &s
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// Member returns the epoch of a member and whether the group has it.
func (g *Group) Member(id string) (epoch int32, ok bool) {
	m, ok := g.members[id]
	if !ok {
		return 0, false
	}
	return m.epoch, true
}
