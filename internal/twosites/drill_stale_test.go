package twosites

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFailbackStaleGroupOffset: a group committed on A past what B mirrored
// (A's tail, removed by the failback) and was idle on B. The failback's
// truncation lowers that offset to the cut (dest.GroupOffsetLowerer), since the
// sync never lowers one: otherwise the group would resume inside the records B
// wrote after its barrier and skip them silently. The offset on A must not be
// beyond B's (or the truncation point).
func TestFailbackStaleGroupOffset(t *testing.T) {
	const tp = "stale"
	a, b := newSite(t, "A", drillSiteFlags...), newSite(t, "B", drillSiteFlags...)
	createTopic(t, a.addr, tp, 1)
	produceKgo(t, a.addr, tp, 1, 10, "a") // offsets 0..9
	createDrillMirror(b, "a-to-b", a.addr)
	b.ctl("--start", "--mirror", "a-to-b", "--topics", tp)
	b.waitPartitions("a-to-b", tp, 1, "caught up", func(p partitionDesc) bool { return p.DestinationOffset == 10 })
	ctx := context.Background()
	acl, bcl := kgoClient(t, a.addr, byName()), kgoClient(t, b.addr, byName())
	for _, g := range []string{"idle", "moving"} {
		require.NoError(t, commitOffsets(ctx, acl, g, tp, map[int32]int64{0: 10}))
	}
	waitGroupOffsetsOf(t, b, "idle", tp, map[int32]int64{0: 10})

	// The link is cut; A takes 5 more records and the idle group reads them.
	b.ctl("--pause", "--wait", "--mirror", "a-to-b", "--topics", tp)
	produceKgo(t, a.addr, tp, 1, 5, "a-lost") // 10..14, never on B
	require.NoError(t, commitOffsets(ctx, acl, "idle", tp, map[int32]int64{0: 15}))
	a.kill9()
	b.ctl("--stop", "--wait", "--mirror", "a-to-b", "--topics", tp) // barrier at 10
	produceKgo(t, b.addr, tp, 1, 10, "b")                           // 11..20
	require.NoError(t, commitOffsets(ctx, bcl, "moving", tp, map[int32]int64{0: 17}))

	a.start()
	createDrillMirror(a, "b-to-a", b.addr)
	a.ctl("--start", "--mirror", "b-to-a", "--topics", tp, "--allow-truncation")
	a.waitPartitions("b-to-a", tp, 1, "caught up", func(p partitionDesc) bool { return p.DestinationOffset == 21 })
	waitGroupOffsetsOf(t, a, "moving", tp, map[int32]int64{0: 17}) // a sync ran
	idle, err := fetchOffsets(ctx, acl, "idle", tp, 1)
	require.NoError(t, err)
	require.LessOrEqual(t, idle[0], int64(10), "group idle on A after the failback: B's records 11..20 from offset %d on would be skipped", idle[0])
}
