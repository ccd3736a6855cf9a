package mirror

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// pathTo is a chain of legal coordinator moves from UNKNOWN to each state.
var pathTo = map[statemachine.State][]statemachine.State{
	statemachine.Unknown:          nil,
	statemachine.Preparing:        {statemachine.Preparing},
	statemachine.Mirroring:        {statemachine.Preparing, statemachine.Mirroring},
	statemachine.EpochFencing:     {statemachine.Preparing, statemachine.Mirroring, statemachine.EpochFencing},
	statemachine.ULELogTruncation: {statemachine.Preparing, statemachine.Mirroring, statemachine.ULELogTruncation},
	statemachine.Pausing:          {statemachine.Preparing, statemachine.Mirroring, statemachine.Pausing},
	statemachine.Paused:           {statemachine.Preparing, statemachine.Mirroring, statemachine.Pausing, statemachine.Paused},
	statemachine.Stopping:         {statemachine.Preparing, statemachine.Mirroring, statemachine.Stopping},
	statemachine.Stopped:          {statemachine.Preparing, statemachine.Mirroring, statemachine.Stopping, statemachine.Stopped},
	statemachine.Failed:           {statemachine.Failed},
}

// TestLifecycleRefusals enumerates every admin operation in every actual state it must
// refuse: the partitions are driven into the state by direct coordinator writes (no
// reconciler runs), and the operation must fail with INVALID_CLUSTER_MIRROR_STATES
// naming the topic, the partition and the state. It also checks the unknown-mirror and
// duplicate-create errors.
func TestLifecycleRefusals(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	b.m.eng.DisableReconcilers()

	cases := 0
	for i, st := range statemachine.States() {
		require.Contains(t, pathTo, st, "state %s has no path", st)
		name, topic := "m-"+strings.ToLower(st.String()), "t-"+strings.ToLower(st.String())
		id := records.UUID{0xEE, byte(i)}
		createTopic(t, a, topic, id, 2)
		createTopic(t, b, topic, id, 2)
		require.NoError(t, b.m.CreateClusterMirror(ctx, name, bootstrap(a)))
		_, err := b.m.ctrl.StartTopics(ctx, name, []TopicMeta{{Name: topic, TopicID: id, NumPartitions: 2}}, nil, nil)
		require.NoError(t, err)
		for p := int32(0); p < 2; p++ {
			for _, s := range pathTo[st] {
				resp, err := b.m.coord.WriteMirrorStates(ctx, coordinator.WriteRequest{MirrorName: name,
					Partitions: []coordinator.WritePartition{{TopicID: id, Partition: p, State: s, LeaderEpoch: -1, StateEpoch: -1, LastMirrorEpoch: -1}}})
				require.NoError(t, err)
				require.Equal(t, admin.CodeNone, resp.Partitions[0].ErrorCode, "%s -> %s", st, s)
			}
		}
		for _, op := range statemachine.Ops() {
			if statemachine.CheckOp(op, topic, 0, st) == nil {
				continue
			}
			cases++
			var got error
			switch op {
			case statemachine.OpStart:
				got = single(t)(b.m.StartMirrorTopics(ctx, name, []string{topic}, StartOptions{}))
			case statemachine.OpStop:
				got = single(t)(b.m.StopMirrorTopics(ctx, name, []string{topic}, StopOptions{}))
			case statemachine.OpPause:
				got = single(t)(b.m.PauseMirrorTopics(ctx, name, []string{topic}, LifecycleOptions{}))
			case statemachine.OpResume:
				got = single(t)(b.m.ResumeMirrorTopics(ctx, name, []string{topic}, LifecycleOptions{}))
			case statemachine.OpDelete:
				got = b.m.DeleteClusterMirrors(ctx, []string{name})[name]
			}
			require.Error(t, got, "%s in %s", op, st)
			require.Equal(t, admin.CodeInvalidClusterMirrorStates, admin.CodeOf(got), "%s in %s: %v", op, st, got)
			require.Contains(t, got.Error(), fmt.Sprintf("topic %q partition 0 in state %s", topic, st), "%s in %s", op, st)
		}
		// Nothing changed: the desired state is still MIRRORING, the mirror still exists.
		ts, ok := b.m.ctrl.Topic(topic)
		require.True(t, ok)
		require.Equal(t, statemachine.DesiredMirroring, ts.Desired)
		_, ok = b.m.ctrl.Mirror(name)
		require.True(t, ok)
	}
	t.Logf("covered %d refused (operation, actual state) cases", cases)
	require.Equal(t, 37, cases) // start 7, stop 3, pause 9, resume 9, delete 9

	checkUnknownRefusals(ctx, t, b.m, a)
}

// checkUnknownRefusals: every operation on an unknown mirror is UNKNOWN_CLUSTER_MIRROR,
// a second create of mirror m-mirroring is CLUSTER_MIRROR_ALREADY_EXISTS, and a topic
// the mirror or its source does not have is UNKNOWN_TOPIC_OR_PARTITION.
func checkUnknownRefusals(ctx context.Context, t *testing.T, m *Mirror, a *site) {
	for _, op := range statemachine.Ops() {
		var got error
		switch op {
		case statemachine.OpStart:
			_, got = m.StartMirrorTopics(ctx, "nope", []string{"x"}, StartOptions{})
		case statemachine.OpStop:
			_, got = m.StopMirrorTopics(ctx, "nope", []string{"x"}, StopOptions{})
		case statemachine.OpPause:
			_, got = m.PauseMirrorTopics(ctx, "nope", []string{"x"}, LifecycleOptions{})
		case statemachine.OpResume:
			_, got = m.ResumeMirrorTopics(ctx, "nope", []string{"x"}, LifecycleOptions{})
		case statemachine.OpDelete:
			got = m.DeleteClusterMirrors(ctx, []string{"nope"})["nope"]
		}
		require.Equal(t, admin.CodeUnknownClusterMirror, admin.CodeOf(got), "%s: %v", op, got)
	}
	_, err := m.DescribeClusterMirrors(ctx, []string{"nope"}, DescribeOptions{})
	require.Equal(t, admin.CodeUnknownClusterMirror, admin.CodeOf(err))
	err = m.CreateClusterMirror(ctx, "m-mirroring", bootstrap(a))
	require.Equal(t, admin.CodeClusterMirrorAlreadyExists, admin.CodeOf(err))
	// A topic that is not a topic of the mirror.
	require.Equal(t, admin.CodeUnknownTopicOrPartition,
		admin.CodeOf(single(t)(m.PauseMirrorTopics(ctx, "m-mirroring", []string{"t-paused"}, LifecycleOptions{}))))
	// A topic the source does not have.
	require.Equal(t, admin.CodeUnknownTopicOrPartition,
		admin.CodeOf(single(t)(m.StartMirrorTopics(ctx, "m-mirroring", []string{"ghost"}, StartOptions{}))))
}

// single returns the one per-topic error of a lifecycle call.
func single(t testing.TB) func([]TopicResult, error) error {
	return func(res []TopicResult, err error) error {
		t.Helper()
		require.NoError(t, err)
		require.Len(t, res, 1)
		return res[0].Err
	}
}

// TestStartPatternsAndRPCs: include patterns start every matching source topic; the RPC
// surface reads and writes states by topic name.
func TestStartPatternsAndRPCs(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a, b := w.newSite(t, "A"), w.newSite(t, "B")
	for i, name := range []string{"logs.a", "logs.b", "other"} {
		createTopic(t, a, name, records.UUID{0x10, byte(i)}, 1)
		appendBatch(t, a.log(t, name, 0), 0, 2, name)
	}
	require.NoError(t, b.m.CreateClusterMirror(ctx, "m", bootstrap(a)))
	res, err := b.m.StartMirrorTopics(ctx, "m", nil, StartOptions{IncludePatterns: []string{`logs\..*`}, ExcludePatterns: []string{"logs.b"}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, "logs.a", res[0].Topic)
	require.NoError(t, res[0].Err)
	require.NoError(t, b.m.WaitForLag(ctx, "m", []string{"logs.a"}, 0))
	_, ok := b.dest.Topic("other")
	require.False(t, ok)

	rreq := admin.NewPtrReadMirrorStatesRequest()
	rreq.MirrorName = "m"
	rt := admin.NewReadMirrorStatesRequestTopic()
	rt.TopicName = "logs.a"
	rp := admin.NewReadMirrorStatesRequestTopicPartition()
	rp.PartitionIndex, rp.LeaderEpoch = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	rreq.Topics = append(rreq.Topics, rt)
	rresp, err := b.m.ReadMirrorStates(ctx, rreq)
	require.NoError(t, err)
	require.Equal(t, int8(statemachine.Mirroring), rresp.Topics[0].Partitions[0].State)
	// A stale state epoch is fenced.
	wreq := admin.NewPtrWriteMirrorStatesRequest()
	wreq.MirrorName = "m"
	wt := admin.NewWriteMirrorStatesRequestTopic()
	wt.TopicName = "logs.a"
	wp := admin.NewWriteMirrorStatesRequestTopicPartition()
	wp.PartitionIndex, wp.State, wp.LeaderEpoch, wp.StateEpoch, wp.LastMirrorEpoch = 0, int8(statemachine.Pausing), -1, 0, -1
	wt.Partitions = append(wt.Partitions, wp)
	wreq.Topics = append(wreq.Topics, wt)
	wresp, err := b.m.WriteMirrorStates(ctx, wreq)
	require.NoError(t, err)
	require.Equal(t, int16(admin.CodeFencedStateEpoch), wresp.Topics[0].Partitions[0].ErrorCode)

	oreq := admin.NewPtrReadMirrorOffsetsRequest()
	oreq.MirrorName = "m"
	ot := admin.NewReadMirrorOffsetsRequestTopic()
	ot.TopicName, ot.Partitions = "logs.a", []int32{0, 7}
	oreq.Topics = append(oreq.Topics, ot)
	dst := b.log(t, "logs.a", 0)
	waitCond(t, ctx, b.m, "mirrored", func() bool { return dst.LogEndOffset() == 2 })
	oresp, err := b.m.ReadMirrorOffsets(ctx, oreq)
	require.NoError(t, err)
	require.Equal(t, int64(2), oresp.Topics[0].Partitions[0].DestinationOffset)
	require.Equal(t, int16(admin.CodeUnknownTopicOrPartition), oresp.Topics[0].Partitions[1].ErrorCode)

	breq := admin.NewPtrBumpLeaderEpochsRequest()
	bt := admin.NewBumpLeaderEpochsRequestTopic()
	bt.TopicName = "logs.a"
	bp := admin.NewBumpLeaderEpochsRequestTopicPartition()
	bp.PartitionIndex, bp.MinLeaderEpoch = 0, 41
	bt.Partitions = append(bt.Partitions, bp)
	breq.Topics = append(breq.Topics, bt)
	bresp, err := b.m.BumpLeaderEpochs(ctx, breq)
	require.NoError(t, err)
	require.Equal(t, int32(42), bresp.Topics[0].Partitions[0].LeaderEpoch)
	require.Equal(t, int32(42), dst.LeaderEpoch())

	_, err = b.m.ReadMirrorStates(context.Background(), &admin.ReadMirrorStatesRequest{MirrorName: "nope"})
	require.Equal(t, admin.CodeUnknownClusterMirror, admin.CodeOf(err))
}
