package dataplane

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkClassicGroupLifecycle: one member's whole classic-group life on
// the handlers (JoinGroup with MEMBER_ID_REQUIRED and the rejoin, the
// leader's SyncGroup, a Heartbeat, LeaveGroup), each iteration a new group.
func BenchmarkClassicGroupLifecycle(b *testing.B) {
	s := startSite(b, Config{InitialRebalanceDelay: -1, GroupRejoinGrace: -1})
	ctx := context.Background()
	serve := func(req kmsg.Request) kmsg.Response {
		resp, err := s.dp.Serve(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		group := fmt.Sprintf("g%d", i)
		m := serve(joinRequest(group, "", nil)).(*kmsg.JoinGroupResponse).MemberID
		j := serve(joinRequest(group, m, nil)).(*kmsg.JoinGroupResponse)
		if j.ErrorCode != 0 {
			b.Fatalf("join: %d", j.ErrorCode)
		}
		sy := kmsg.NewPtrSyncGroupRequest()
		sy.Version, sy.Group, sy.MemberID, sy.Generation = 5, group, m, j.Generation
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, []byte("assignment")
		sy.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{ga}
		if c := serve(sy).(*kmsg.SyncGroupResponse).ErrorCode; c != 0 {
			b.Fatalf("sync: %d", c)
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, group, m, j.Generation
		if c := serve(hb).(*kmsg.HeartbeatResponse).ErrorCode; c != 0 {
			b.Fatalf("heartbeat: %d", c)
		}
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Version, lv.Group = 5, group
		lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m}}
		if c := serve(lv).(*kmsg.LeaveGroupResponse).Members[0].ErrorCode; c != 0 {
			b.Fatalf("leave: %d", c)
		}
	}
	if n := len(s.dp.classic.groups); n != 0 {
		b.Fatalf("%d groups left behind", n)
	}
}
