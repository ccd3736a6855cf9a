package dataplane

import (
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordinatorTxn is FindCoordinator's key type of a transactional id.
const coordinatorTxn = 1

// authzFindCoordinator: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED)
// or on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per
// key; a refused key gets no coordinator.
func authzFindCoordinator(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.FindCoordinatorRequest)
	resType, code := ResourceGroup, codeGroupAuthorizationFailed
	if r.CoordinatorType == coordinatorTxn {
		resType, code = ResourceTransactional, codeTxnIDAuthorizationFailed
	}
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.FindCoordinatorResponse)
	msg := kmsg.StringPtr("not authorized: DESCRIBE on " + resType)
	if r.Version < 4 {
		if !z.allowed(OpDescribe, resType, r.CoordinatorKey) {
			resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = code, msg, -1, "", -1
		}
		return resp, nil
	}
	for i := range resp.Coordinators {
		c := &resp.Coordinators[i]
		if !z.allowed(OpDescribe, resType, c.Key) {
			c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = code, msg, -1, "", -1
		}
	}
	return resp, nil
}

// authzOffsetCommit: READ on the group (every partition
// GROUP_AUTHORIZATION_FAILED, nothing committed), then READ on each topic
// (TOPIC_AUTHORIZATION_FAILED for its partitions, not committed).
func authzOffsetCommit(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.OffsetCommitRequest)
	groupOK := z.allowed(OpRead, ResourceGroup, r.Group)
	kept, denied := split(r.Topics, func(rt kmsg.OffsetCommitRequestTopic) bool {
		return groupOK && z.allowed(OpRead, ResourceTopic, rt.Topic)
	})
	if len(denied) == 0 && groupOK {
		return next(r)
	}
	code := codeTopicAuthorizationFailed
	if !groupOK {
		code = codeGroupAuthorizationFailed
	}
	r.Topics = kept
	out, err := serveKept(r, len(kept) > 0, next)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.OffsetCommitResponse)
	for _, rt := range denied {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// authzOffsetFetch: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED, no
// offsets), then DESCRIBE on each topic: asked for by name, a refused
// topic's partitions answer offset -1 with TOPIC_AUTHORIZATION_FAILED; asked
// for all, refused topics are left out. It only reads, so it filters the
// handler's answer.
func authzOffsetFetch(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.OffsetFetchRequest)
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		all := map[string]bool{} // groups asked for all their topics
		for _, g := range r.Groups {
			all[g.Group] = g.Topics == nil
		}
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if !z.allowed(OpDescribe, ResourceGroup, g.Group) {
				g.ErrorCode, g.Topics = codeGroupAuthorizationFailed, nil
				continue
			}
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				switch {
				case z.allowed(OpDescribe, ResourceTopic, t.Topic):
				case all[g.Group]:
					continue
				default:
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, kmsg.StringPtr(""), codeTopicAuthorizationFailed
					}
				}
				kept = append(kept, t)
			}
			g.Topics = kept
		}
		return resp, nil
	}
	if !z.allowed(OpDescribe, ResourceGroup, r.Group) {
		return offsetFetchGroupDenied(r), nil
	}
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		switch {
		case z.allowed(OpDescribe, ResourceTopic, t.Topic):
		case r.Topics == nil:
			continue
		default:
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, kmsg.StringPtr(""), codeTopicAuthorizationFailed
			}
		}
		kept = append(kept, t)
	}
	resp.Topics = kept
	return resp, nil
}

// offsetFetchGroupDenied is the v1-v7 answer for a group the principal may
// not describe: the top-level code from v2, each asked partition's code
// before.
func offsetFetchGroupDenied(r *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 2 {
		resp.ErrorCode = codeGroupAuthorizationFailed
		return resp
	}
	for _, rt := range r.Topics {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.ErrorCode = p, -1, codeGroupAuthorizationFailed
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// authzDescribeGroups: DESCRIBE on each group, else only its id and
// GROUP_AUTHORIZATION_FAILED.
func authzDescribeGroups(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	out, err := next(req)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.DescribeGroupsResponse)
	for i, g := range resp.Groups {
		if !z.allowed(OpDescribe, ResourceGroup, g.Group) {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = g.Group, codeGroupAuthorizationFailed
			resp.Groups[i] = d
		}
	}
	return resp, nil
}

// authzListGroups: DESCRIBE on the cluster lists every group, else only the
// groups the principal may DESCRIBE.
func authzListGroups(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	out, err := next(req)
	if err != nil || z.allowed(OpDescribe, ResourceCluster, ClusterName) {
		return out, err
	}
	resp := out.(*kmsg.ListGroupsResponse)
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if z.allowed(OpDescribe, ResourceGroup, g.Group) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return resp, nil
}

// authzGroupMembership: READ on the group for JoinGroup, SyncGroup,
// Heartbeat and LeaveGroup, as Kafka's; refused, the request is answered
// GROUP_AUTHORIZATION_FAILED and changes nothing.
func authzGroupMembership(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	var group string
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		group = r.Group
	case *kmsg.SyncGroupRequest:
		group = r.Group
	case *kmsg.HeartbeatRequest:
		group = r.Group
	case *kmsg.LeaveGroupRequest:
		group = r.Group
	}
	if z.allowed(OpRead, ResourceGroup, group) {
		return next(req)
	}
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = codeGroupAuthorizationFailed, -1
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = codeGroupAuthorizationFailed
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = codeGroupAuthorizationFailed
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = codeGroupAuthorizationFailed
	}
	return resp, nil
}

// authzConsumerGroupHeartbeat: READ on the group (GROUP_AUTHORIZATION_FAILED),
// then DESCRIBE on every subscribed topic name (TOPIC_AUTHORIZATION_FAILED
// naming the refused topics), as Kafka's; refused, the heartbeat changes
// nothing.
func authzConsumerGroupHeartbeat(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !z.allowed(OpRead, ResourceGroup, r.Group) {
		resp.ErrorCode, resp.ErrorMessage = codeGroupAuthorizationFailed, kmsg.StringPtr("not authorized: READ on GROUP")
		return resp, nil
	}
	var refused []string
	for _, t := range r.SubscribedTopicNames {
		if !z.allowed(OpDescribe, ResourceTopic, t) {
			refused = append(refused, t)
		}
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		resp.ErrorCode = codeTopicAuthorizationFailed
		resp.ErrorMessage = kmsg.StringPtr("Unauthorized topics: [" + strings.Join(refused, ", ") + "]")
		return resp, nil
	}
	return next(r)
}

// authzConsumerGroupDescribe: DESCRIBE on each group
// (GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every topic of its members'
// assignments (TOPIC_AUTHORIZATION_FAILED for the group), as Kafka's; a
// refused group shows nothing but its id and code.
func authzConsumerGroupDescribe(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	out, err := next(req)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.ConsumerGroupDescribeResponse)
	for i, g := range resp.Groups {
		code := int16(0)
		if !z.allowed(OpDescribe, ResourceGroup, g.Group) {
			code = codeGroupAuthorizationFailed
		} else if g.ErrorCode == 0 && !describedTopicsAllowed(z, g) {
			code = codeTopicAuthorizationFailed
		}
		if code != 0 {
			d := kmsg.NewConsumerGroupDescribeResponseGroup()
			d.Group, d.ErrorCode = g.Group, code
			resp.Groups[i] = d
		}
	}
	return resp, nil
}

func describedTopicsAllowed(z *authz, g kmsg.ConsumerGroupDescribeResponseGroup) bool {
	for _, m := range g.Members {
		for _, a := range [][]kmsg.AssignmentTopicPartition{m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions} {
			for _, tp := range a {
				if !z.allowed(OpDescribe, ResourceTopic, tp.Topic) {
					return false
				}
			}
		}
	}
	return true
}

// authzDeleteGroups: DELETE on each group, else GROUP_AUTHORIZATION_FAILED
// for it and nothing deleted.
func authzDeleteGroups(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.DeleteGroupsRequest)
	kept, denied := split(r.Groups, func(g string) bool { return z.allowed(OpDelete, ResourceGroup, g) })
	r.Groups = kept
	out, err := serveKept(r, len(kept) > 0, next)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.DeleteGroupsResponse)
	for _, g := range denied {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, codeGroupAuthorizationFailed
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
