package consumergroup

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkHeartbeat measures one steady heartbeat of a member of a stable
// group of 100 members over 10 topics of 100 partitions.
func BenchmarkHeartbeat(b *testing.B) {
	parts := map[string]int32{}
	var topics []string
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("t%d", i)
		parts[name], topics = 100, append(topics, name)
	}
	h := newHarness(&testing.T{}, Config{}, meta(parts))
	var ids []string
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("m%03d", i)
		ids = append(ids, id)
		h.join(id, topics...)
	}
	for round := 0; round < 5; round++ {
		for _, id := range ids {
			h.beat(id)
		}
	}
	if h.g.State() != StateStable {
		b.Fatalf("group %s", h.g.State())
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := ids[i%len(ids)]
		h.now = h.now.Add(time.Millisecond)
		if resp := h.beat(id); resp.ErrorCode != 0 {
			b.Fatal(resp)
		}
	}
}

// BenchmarkRebalance measures one member joining a stable group of 100
// members over 1000 partitions, the group settling (every member
// heartbeating until stable), the member leaving and the group settling
// again.
func BenchmarkRebalance(b *testing.B) {
	h := newHarness(&testing.T{}, Config{}, meta(map[string]int32{"t": 1000}))
	var ids []string
	for j := 0; j < 100; j++ {
		id := fmt.Sprintf("m%03d", j)
		ids = append(ids, id)
		h.join(id, "t")
	}
	settle := func(ids []string) {
		for round := 0; round < 4; round++ {
			for _, id := range ids {
				h.beat(id)
			}
		}
		if h.g.State() != StateStable {
			b.Fatalf("group %s", h.g.State())
		}
	}
	settle(ids)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("new%d", i)
		h.join(id, "t")
		settle(append(ids, id))
		h.send(Request{Version: 1, MemberID: id, MemberEpoch: EpochLeave})
		delete(h.owned, id)
		settle(ids)
	}
}
