package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

func testController(t *testing.T) (*Controller, *MemoryControllerLog) {
	t.Helper()
	log := &MemoryControllerLog{}
	c, err := OpenController(context.Background(), log)
	require.NoError(t, err)
	return c, log
}

func id(b byte) records.UUID { return records.UUID{b, 1, 2, 3} }

func requireCode(t *testing.T, want admin.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, admin.CodeOf(err), "error: %v", err)
}

func topicErrs(rs []TopicResult) map[string]admin.Code {
	out := map[string]admin.Code{}
	for _, r := range rs {
		out[r.Topic] = admin.CodeOf(r.Err)
	}
	return out
}

func TestControllerCreateValidation(t *testing.T) {
	ctx := context.Background()
	c, _ := testController(t)
	requireCode(t, admin.CodeInvalidConfig, c.CreateMirror(ctx, "m", map[string]string{}))
	requireCode(t, admin.CodeInvalidConfig, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1", "no.such.key": "1"}))
	requireCode(t, admin.CodeInvalidConfig, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1", KeyTopicsInclude: "(["}))
	requireCode(t, admin.CodeInvalidConfig, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "nohostport"}))
	requireCode(t, admin.CodeInvalidRequest, c.CreateMirror(ctx, "bad/name", map[string]string{KeyBootstrapServers: "a:1"}))
	requireCode(t, admin.CodeInvalidRequest, c.CreateMirror(ctx, "..", map[string]string{KeyBootstrapServers: "a:1"}))
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	requireCode(t, admin.CodeClusterMirrorAlreadyExists, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "b:2"}))
	m, ok := c.Mirror("m")
	require.True(t, ok)
	require.Equal(t, []string{"a:1"}, m.Config.BootstrapServers)
	require.Empty(t, m.Config.TopicsExclude)
	require.True(t, m.Config.ExcludesTopic("__consumer_offsets"), "internal topics excluded by default")
}

func TestControllerLifecycleAndReplay(t *testing.T) {
	ctx := context.Background()
	c, log := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	var seen []TopicState
	c.Watch(func(ts TopicState) { seen = append(seen, ts) })

	rs, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: "orders", TopicID: id(1), NumPartitions: 3}}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]admin.Code{"orders": admin.CodeNone}, topicErrs(rs))
	ts, _ := c.Topic("orders")
	require.Equal(t, statemachine.DesiredMirroring, ts.Desired)
	require.Len(t, seen, 1)

	// starting again is a no-op success with no record
	before := c.Offset()
	rs, err = c.StartTopics(ctx, "m", []TopicMeta{{Name: "orders", TopicID: id(1)}}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.Equal(t, before, c.Offset())

	// resume of a MIRRORING topic is refused; pause works; pause again refused
	rs, _ = c.ResumeTopics(ctx, "m", []string{"orders"}, -1)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, topicErrs(rs)["orders"])
	rs, _ = c.PauseTopics(ctx, "m", []string{"orders"}, -1)
	require.NoError(t, rs[0].Err)
	rs, _ = c.PauseTopics(ctx, "m", []string{"orders"}, -1)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, topicErrs(rs)["orders"])
	// start of a PAUSED topic is refused
	rs, _ = c.StartTopics(ctx, "m", []TopicMeta{{Name: "orders", TopicID: id(1)}}, nil, nil)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, topicErrs(rs)["orders"])

	// delete refused while a topic is not STOPPED
	requireCode(t, admin.CodeInvalidClusterMirrorStates, c.DeleteMirror(ctx, "m", -1))

	// PAUSED -> STOPPED is valid (JR63.2); stopping again succeeds with no record
	rs, _ = c.StopTopics(ctx, "m", []string{"orders"}, nil, -1)
	require.NoError(t, rs[0].Err)
	before = c.Offset()
	rs, _ = c.StopTopics(ctx, "m", []string{"orders"}, nil, -1)
	require.NoError(t, rs[0].Err)
	require.Equal(t, before, c.Offset())

	// replaying the log gives the same view
	c2, err := OpenController(ctx, log)
	require.NoError(t, err)
	require.Equal(t, c.Topics(""), c2.Topics(""))
	require.Equal(t, c.Mirrors(), c2.Mirrors())
	require.Equal(t, c.Offset(), c2.Offset())

	require.NoError(t, c.DeleteMirror(ctx, "m", -1))
	_, ok := c.Mirror("m")
	require.False(t, ok)
	ts, _ = c.Topic("orders")
	require.Equal(t, "", ts.Mirror, "stopped topic dissociated")
	require.Equal(t, statemachine.DesiredUnknown, ts.Desired)
	requireCode(t, admin.CodeUnknownClusterMirror, c.DeleteMirror(ctx, "m", -1))
}

func TestControllerUnknownMirrorAndTopic(t *testing.T) {
	ctx := context.Background()
	c, _ := testController(t)
	_, err := c.StartTopics(ctx, "nope", []TopicMeta{{Name: "t", TopicID: id(1)}}, nil, nil)
	requireCode(t, admin.CodeUnknownClusterMirror, err)
	_, err = c.StopTopics(ctx, "nope", []string{"t"}, nil, -1)
	requireCode(t, admin.CodeUnknownClusterMirror, err)
	_, err = c.PauseTopics(ctx, "nope", []string{"t"}, -1)
	requireCode(t, admin.CodeUnknownClusterMirror, err)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	rs, err := c.PauseTopics(ctx, "m", []string{"t"}, -1)
	require.NoError(t, err)
	require.Equal(t, admin.CodeUnknownTopicOrPartition, topicErrs(rs)["t"])
}

func TestControllerTopicIDConflictsAndOtherMirror(t *testing.T) {
	ctx := context.Background()
	c, _ := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m1", map[string]string{KeyBootstrapServers: "a:1"}))
	require.NoError(t, c.CreateMirror(ctx, "m2", map[string]string{KeyBootstrapServers: "b:1"}))
	_, err := c.StartTopics(ctx, "m1", []TopicMeta{{Name: "t", TopicID: id(1)}}, nil, nil)
	require.NoError(t, err)
	rs, _ := c.StartTopics(ctx, "m1", []TopicMeta{{Name: "t", TopicID: id(2)}, {Name: "u", TopicID: id(1)}}, nil, nil)
	require.Equal(t, map[string]admin.Code{"t": admin.CodeTopicAlreadyExists, "u": admin.CodeTopicAlreadyExists}, topicErrs(rs))
	rs, _ = c.StartTopics(ctx, "m2", []TopicMeta{{Name: "t", TopicID: id(1)}}, nil, nil)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, topicErrs(rs)["t"], "active in another mirror")
	// once stopped in m1 the topic can move to m2 (failback uses another mirror)
	_, err = c.StopTopics(ctx, "m1", []string{"t"}, nil, -1)
	require.NoError(t, err)
	rs, _ = c.StartTopics(ctx, "m2", []TopicMeta{{Name: "t", TopicID: id(1)}}, nil, nil)
	require.NoError(t, rs[0].Err)
	ts, _ := c.Topic("t")
	require.Equal(t, "m2", ts.Mirror)
}

func TestControllerPatterns(t *testing.T) {
	ctx := context.Background()
	c, _ := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	_, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: "orders.eu", TopicID: id(1)}, {Name: "orders.us", TopicID: id(2)}}, []string{"orders\\..*"}, []string{"tmp.*"})
	require.NoError(t, err)
	m, _ := c.Mirror("m")
	require.True(t, m.Config.IncludesTopic("orders.asia"))
	require.False(t, m.Config.IncludesTopic("tmp.orders"))
	require.False(t, m.Config.IncludesTopic("__consumer_offsets"))

	// an explicit topic matching exclude is refused
	rs, _ := c.StartTopics(ctx, "m", []TopicMeta{{Name: "tmp1", TopicID: id(3)}}, nil, nil)
	require.Equal(t, admin.CodeInvalidRequest, topicErrs(rs)["tmp1"])

	// stop by pattern: removed from include, added to exclude, matching topics stopped
	rs, err = c.StopTopics(ctx, "m", nil, []string{"orders\\..*"}, -1)
	require.NoError(t, err)
	require.Equal(t, map[string]admin.Code{"orders.eu": admin.CodeNone, "orders.us": admin.CodeNone}, topicErrs(rs))
	m, _ = c.Mirror("m")
	require.False(t, m.Config.IncludesTopic("orders.asia"))
	require.True(t, m.Config.ExcludesTopic("orders.asia"))
	for _, ts := range c.Topics("m") {
		require.Equal(t, statemachine.DesiredStopped, ts.Desired, ts.Topic)
	}

	// adding an exclude pattern on start stops matching topics of the mirror
	_, err = c.StartTopics(ctx, "m", []TopicMeta{{Name: "logs", TopicID: id(4)}}, []string{"logs"}, nil)
	require.NoError(t, err)
	_, err = c.StartTopics(ctx, "m", nil, nil, []string{"logs"})
	require.NoError(t, err)
	ts, _ := c.Topic("logs")
	require.Equal(t, statemachine.DesiredStopped, ts.Desired)

	_, err = c.StartTopics(ctx, "m", nil, []string{"(["}, nil)
	requireCode(t, admin.CodeInvalidRequest, err)
}

func TestControllerStateOffsetFencing(t *testing.T) {
	ctx := context.Background()
	c, _ := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	_, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: "t", TopicID: id(1)}}, nil, nil)
	require.NoError(t, err)
	validated := c.Offset()
	// a concurrent pause+resume moves the topic after the validated offset
	_, err = c.PauseTopics(ctx, "m", []string{"t"}, -1)
	require.NoError(t, err)
	_, err = c.ResumeTopics(ctx, "m", []string{"t"}, -1)
	require.NoError(t, err)
	rs, _ := c.StopTopics(ctx, "m", []string{"t"}, nil, validated)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, topicErrs(rs)["t"])
	rs, _ = c.StopTopics(ctx, "m", []string{"t"}, nil, c.Offset())
	require.NoError(t, rs[0].Err)
}

func TestControllerAppendFailureChangesNothing(t *testing.T) {
	ctx := context.Background()
	c, log := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	log.FailAppends = 1
	_, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: "t", TopicID: id(1)}}, nil, nil)
	require.Error(t, err)
	_, ok := c.Topic("t")
	require.False(t, ok, "nothing applied when the append failed")
	var ae *admin.Error
	require.True(t, errors.As(err, &ae))
}

// TestControllerApprovals: a start's approvals live with the topic's MIRRORING record
// and survive a reopen (replay); ApproveRemovals replaces one partition's and keeps
// the others'; ClearApproval removes one; any other desired-state change drops them;
// Covers bounds what an approval licenses.
func TestControllerApprovals(t *testing.T) {
	ctx := context.Background()
	c, log := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	ap := []Approval{{Partition: 0, From: 10, To: 40}, {Partition: 2, From: 0, To: 5}}
	res, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: "t", TopicID: id(1), NumPartitions: 3, Approvals: ap}}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	ts, _ := c.Topic("t")
	require.Equal(t, ap, ts.Approvals)
	c2, err := OpenController(ctx, log)
	require.NoError(t, err)
	ts2, _ := c2.Topic("t")
	require.Equal(t, ap, ts2.Approvals, "durable: replayed from the log")

	require.NoError(t, c.ApproveRemovals(ctx, "m", "t", []Approval{{Partition: 0, From: 12, To: 50}}, -1))
	ts, _ = c.Topic("t")
	require.Equal(t, []Approval{{Partition: 0, From: 12, To: 50}, {Partition: 2, From: 0, To: 5}}, ts.Approvals)
	require.NoError(t, c.ClearApproval(ctx, "m", "t", 0))
	ts, _ = c.Topic("t")
	require.Equal(t, []Approval{{Partition: 2, From: 0, To: 5}}, ts.Approvals)
	require.Equal(t, statemachine.DesiredMirroring, ts.Desired)
	off := c.Offset()
	require.NoError(t, c.ClearApproval(ctx, "m", "t", 0), "nothing to clear")
	require.Equal(t, off, c.Offset(), "no record written")
	requireCode(t, admin.CodeUnknownTopicOrPartition, c.ApproveRemovals(ctx, "other", "t", ap, -1))
	requireCode(t, admin.CodeInvalidClusterMirrorStates, c.ApproveRemovals(ctx, "m", "t", ap, off-1))

	_, err = c.PauseTopics(ctx, "m", []string{"t"}, -1)
	require.NoError(t, err)
	ts, _ = c.Topic("t")
	require.Empty(t, ts.Approvals, "a pause drops the approvals")
	requireCode(t, admin.CodeInvalidClusterMirrorStates, c.ApproveRemovals(ctx, "m", "t", ap, -1))

	a := Approval{Partition: 0, From: 10, To: 40}
	require.True(t, a.Covers(OffsetRange{From: 10, To: 40}))
	require.True(t, a.Covers(OffsetRange{From: 12, To: 40}), "less than approved")
	require.False(t, a.Covers(OffsetRange{From: 10, To: 4000}), "more local writes since")
	require.False(t, a.Covers(OffsetRange{From: 0, To: 40}), "a lower cut")
}
