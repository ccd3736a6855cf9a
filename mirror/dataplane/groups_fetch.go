package dataplane

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
)

// offsetFetch serves OffsetFetch (one group before v8, a list from v8). From
// v9 a member of a consumer-protocol group fetches at its current epoch
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); epoch -1 is an admin client.
func (dp *DataPlane) offsetFetch(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.OffsetFetchRequest)
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	groupCode := func(group string) int16 {
		switch {
		case dp.groups() == nil:
			return int16(admin.CodeCoordinatorNotAvailable)
		case group == "":
			return codeInvalidGroupID
		}
		return 0
	}
	if r.Version < 8 {
		topics := map[string][]int32{}
		for _, t := range r.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
		code := groupCode(r.Group)
		resp.ErrorCode = code
		if code != 0 {
			return resp, nil
		}
		byTopic := map[string]int{}
		for _, o := range dp.groupOffsets(r.Group, topics, r.Topics == nil) {
			i, ok := byTopic[o.topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[o.topic] = i
				t := kmsg.NewOffsetFetchResponseTopic()
				t.Topic = o.topic
				resp.Topics = append(resp.Topics, t)
			}
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch = o.partition, o.offset, -1
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
		}
		return resp, nil
	}
	for _, rg := range r.Groups {
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group, g.ErrorCode = rg.Group, groupCode(rg.Group)
		if g.ErrorCode == 0 && r.Version >= 9 && rg.MemberEpoch != -1 {
			// A consumer-protocol member fetches at its current epoch.
			memberID := ""
			if rg.MemberID != nil {
				memberID = *rg.MemberID
			}
			g.ErrorCode = dp.consumer.validateFetch(rg.Group, memberID, rg.MemberEpoch)
		}
		if g.ErrorCode == 0 {
			topics := map[string][]int32{}
			for _, t := range rg.Topics {
				topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
			}
			byTopic := map[string]int{}
			for _, o := range dp.groupOffsets(rg.Group, topics, rg.Topics == nil) {
				i, ok := byTopic[o.topic]
				if !ok {
					i = len(g.Topics)
					byTopic[o.topic] = i
					t := kmsg.NewOffsetFetchResponseGroupTopic()
					t.Topic = o.topic
					g.Topics = append(g.Topics, t)
				}
				p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				p.Partition, p.Offset, p.LeaderEpoch = o.partition, o.offset, -1
				g.Topics[i].Partitions = append(g.Topics[i].Partitions, p)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// groupState is the state reported for a group no protocol owns: "Dead"
// without offsets, "Stable" when the destination says it has active members
// (mirror.LocalDestination.SetGroupActive), "Empty" otherwise.
func (dp *DataPlane) groupState(group string) string {
	g := dp.groups()
	switch {
	case g == nil:
		return stateDead
	case g.HasActiveMembers(group):
		return stateStable
	case len(g.CommittedOffsets(group)) == 0:
		return stateDead
	}
	return stateEmpty
}

// listGroups serves ListGroups: the groups a protocol owns (groupRegistry:
// classic and consumer groups with their state and type), then the
// destination's other groups with offsets (GroupLister), classic and Empty. The
// states filter (v4) and the types filter (v5) compare as Kafka's group
// coordinator does: case-insensitively, the states trimmed of spaces (the Java
// admin client sends "Classic", "Consumer", "Stable").
func (dp *DataPlane) listGroups(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.ListGroupsRequest)
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	if dp.groups() == nil {
		return resp, nil
	}
	add := func(name, protocolType, state, typ string) {
		if state == stateDead || !inFilter(r.StatesFilter, state, true) || !inFilter(r.TypesFilter, typ, false) {
			return
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = name, protocolType, state, typ
		resp.Groups = append(resp.Groups, g)
	}
	owned := map[string]bool{}
	for _, v := range dp.groupReg.views() {
		owned[v.Group] = true
		add(v.Group, v.ProtocolType, v.State, v.Type)
	}
	if gl, ok := dp.dst.(GroupLister); ok {
		for _, name := range gl.Groups() {
			if !owned[name] {
				add(name, "consumer", dp.groupState(name), GroupTypeClassic)
			}
		}
	}
	return resp, nil
}

// inFilter reports whether value is selected by a ListGroups filter: an empty filter
// selects everything, else one entry equal to value ignoring case (and surrounding
// spaces when trim).
func inFilter(filter []string, value string, trim bool) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if trim {
			f = strings.TrimSpace(f)
		}
		if strings.EqualFold(f, value) {
			return true
		}
	}
	return false
}

// describeGroups serves DescribeGroups: a group a protocol owns with its
// state, protocol type, protocol and members (metadata and assignment as
// the members sent them); another group with offsets as Empty, protocol
// type "consumer" and no members; else Dead.
func (dp *DataPlane) describeGroups(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.DescribeGroupsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range r.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = name
		v, owned := dp.groupReg.view(name)
		switch {
		case dp.groups() == nil:
			g.ErrorCode, g.State = int16(admin.CodeCoordinatorNotAvailable), stateDead
		case name == "":
			g.ErrorCode, g.State = codeInvalidGroupID, stateDead
		case owned && v.DescribeCode != 0:
			// Kafka answers a group of another type Dead, with the code from v6.
			g.State = stateDead
			if r.Version >= 6 {
				g.ErrorCode = v.DescribeCode
			}
		case owned:
			g.State, g.ProtocolType, g.Protocol = v.State, v.ProtocolType, v.Protocol
			for _, m := range v.Members {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
				dm.ProtocolMetadata, dm.MemberAssignment = m.Metadata, m.Assignment
				g.Members = append(g.Members, dm)
			}
		default:
			g.State = dp.groupState(name)
			if g.State != stateDead {
				g.ProtocolType = "consumer"
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// deleteGroups serves DeleteGroups: a group's committed offsets are deleted
// unless it has members (NON_EMPTY_GROUP; the check and the deletion hold
// its joins off); a group with neither offsets nor members is
// GROUP_ID_NOT_FOUND.
func (dp *DataPlane) deleteGroups(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.DeleteGroupsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	gd, _ := dp.dst.(GroupDeleter)
	for _, name := range r.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		switch {
		case gd == nil:
			rg.ErrorCode = codeCoordinatorNotAvailable
		case name == "":
			rg.ErrorCode = codeInvalidGroupID
		default:
			var had bool
			ran, err := dp.groupReg.whileInactive(name, func() (err error) {
				had, err = gd.DeleteGroupOffsets(name)
				return err
			})
			switch {
			case !ran:
				rg.ErrorCode = codeNonEmptyGroup
			case err != nil:
				rg.ErrorCode = codeKafkaStorageError
			case !had:
				rg.ErrorCode = codeGroupIDNotFound
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
