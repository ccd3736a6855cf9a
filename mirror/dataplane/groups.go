package dataplane

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// Group error codes.
const (
	codeCoordinatorLoadInProgress int16 = 14
	codeIllegalGeneration         int16 = 22
	codeInconsistentGroupProtocol int16 = 23
	codeInvalidGroupID            int16 = 24
	codeInvalidSessionTimeout     int16 = 26
	codeRebalanceInProgress       int16 = 27
	codeNonEmptyGroup             int16 = 68
	codeGroupIDNotFound           int16 = 69
	codeMemberIDRequired          int16 = 79
	codeGroupMaxSizeReached       int16 = 81
	codeFencedInstanceID          int16 = 82
)

// groups returns the destination's group-offset store, or nil.
func (dp *DataPlane) groups() mirror.GroupOffsets {
	g, _ := dp.dst.(mirror.GroupOffsets)
	return g
}

// Coordinator types of FindCoordinator.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

// findCoordinator serves FindCoordinator: this node coordinates every
// transactional id, and every group when the destination stores group
// offsets.
func (dp *DataPlane) findCoordinator(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(key string) (code int16, msg string) {
		switch {
		case r.CoordinatorType == coordinatorTransaction && key == "":
			return int16(admin.CodeInvalidRequest), "empty transactional id"
		case r.CoordinatorType == coordinatorTransaction:
			return 0, ""
		case r.CoordinatorType != coordinatorGroup:
			return int16(admin.CodeInvalidRequest), "unknown coordinator type"
		case dp.groups() == nil:
			return int16(admin.CodeCoordinatorNotAvailable), "this destination keeps no group offsets"
		case key == "":
			return codeInvalidGroupID, "empty group id"
		}
		return 0, ""
	}
	if r.Version < 4 {
		code, msg := answer(r.CoordinatorKey)
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = code, -1, "", -1
		if code == 0 {
			resp.NodeID, resp.Host, resp.Port = dp.cfg.NodeID, dp.cfg.AdvertisedHost, dp.cfg.AdvertisedPort
		} else if r.Version >= 1 {
			resp.ErrorMessage = &msg
		}
		return resp, nil
	}
	for _, key := range r.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port = key, -1, -1
		code, msg := answer(key)
		c.ErrorCode = code
		if code == 0 {
			c.NodeID, c.Host, c.Port = dp.cfg.NodeID, dp.cfg.AdvertisedHost, dp.cfg.AdvertisedPort
		} else {
			c.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}

// offsetCommit serves OffsetCommit: a simple (memberless) commit, generation
// -1 and no member id as an admin client or a consumer with manual
// assignment sends, is accepted while the group has no members; a member's
// commit is validated by the protocol owning the group (groupRegistry:
// generation, member id, group instance id), UNKNOWN_MEMBER_ID when none
// does.
func (dp *DataPlane) offsetCommit(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.OffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	g := dp.groups()
	groupCode := int16(0)
	switch {
	case g == nil:
		groupCode = int16(admin.CodeCoordinatorNotAvailable)
	case r.Group == "":
		groupCode = codeInvalidGroupID
	default:
		groupCode = dp.groupReg.validateCommit(r.Group, memberCommit{MemberID: r.MemberID, InstanceID: r.InstanceID, Generation: r.Generation, Version: r.Version})
	}
	offsets := map[mirror.TopicPartition]int64{}
	for _, rt := range r.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		spec, ok := dp.dst.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, groupCode
			if groupCode == 0 && (!ok || rp.Partition < 0 || rp.Partition >= spec.Partitions) {
				p.ErrorCode = fetcher.CodeUnknownTopicOrPartition
			}
			if p.ErrorCode == 0 {
				offsets[mirror.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.Offset
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(offsets) == 0 {
		return resp, nil
	}
	if err := g.CommitOffsets(r.Group, offsets); err != nil {
		code := int16(admin.CodeOf(err))
		if code == int16(admin.CodeUnknownServerError) {
			code = codeKafkaStorageError
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
	}
	return resp, nil
}

// groupOffsets answers one group of OffsetFetch: the named topics'
// partitions (offset -1 when none is committed), or every committed offset
// when topics is nil.
type fetchedOffset struct {
	topic     string
	partition int32
	offset    int64
}

func (dp *DataPlane) groupOffsets(group string, topics map[string][]int32, all bool) []fetchedOffset {
	committed := map[mirror.TopicPartition]int64{}
	if g := dp.groups(); g != nil {
		committed = g.CommittedOffsets(group)
	}
	var out []fetchedOffset
	if all {
		for tp, o := range committed {
			out = append(out, fetchedOffset{tp.Topic, tp.Partition, o})
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].topic != out[j].topic {
				return out[i].topic < out[j].topic
			}
			return out[i].partition < out[j].partition
		})
		return out
	}
	for topic, parts := range topics {
		for _, p := range parts {
			o, ok := committed[mirror.TopicPartition{Topic: topic, Partition: p}]
			if !ok {
				o = -1
			}
			out = append(out, fetchedOffset{topic, p, o})
		}
	}
	return out
}
