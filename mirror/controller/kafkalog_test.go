package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/internal/compacted/compactedtest"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

func klogCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func openKLog(t *testing.T, c *kfake.Cluster, topic string) *KafkaControllerLog {
	t.Helper()
	l, err := OpenKafkaControllerLog(context.Background(), KafkaControllerLogConfig{Brokers: c.ListenAddrs(), Topic: topic})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// view is the comparable state of a controller.
type klogView struct {
	Mirrors []MirrorInfo
	Topics  []TopicState
	Offset  int64
}

func viewOf(c *Controller) klogView {
	ms := c.Mirrors()
	for i := range ms {
		ms[i].Config = MirrorConfig{} // holds compiled regexps; Configs is the source of truth
	}
	return klogView{Mirrors: ms, Topics: c.Topics(""), Offset: c.Offset()}
}

func TestKafkaControllerLogReplay(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t)
	l1 := openKLog(t, kc, "")
	require.Equal(t, DefaultControllerTopic, l1.Topic())
	info := kc.TopicInfo(DefaultControllerTopic)
	require.NotNil(t, info, "topic created")
	require.Equal(t, "compact", *info.Configs["cleanup.policy"])

	c1, err := OpenController(ctx, l1)
	require.NoError(t, err)
	require.Equal(t, int64(-1), c1.Offset())
	require.NoError(t, c1.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "src:9092"}))
	require.NoError(t, c1.CreateMirror(ctx, "gone", map[string]string{KeyBootstrapServers: "src:9092"}))
	rs, err := c1.StartTopics(ctx, "m", []TopicMeta{{Name: "a", TopicID: id(1), NumPartitions: 2}, {Name: "b", TopicID: id(2), NumPartitions: 1}}, []string{"x.*"}, nil)
	require.NoError(t, err)
	require.Empty(t, topicErrs(rs)["a"])
	_, err = c1.PauseTopics(ctx, "m", []string{"a"}, c1.Offset())
	require.NoError(t, err)
	_, err = c1.StopTopics(ctx, "m", []string{"b"}, nil, c1.Offset())
	require.NoError(t, err)
	require.NoError(t, c1.DeleteMirror(ctx, "gone", -1))

	// Offsets grow and a transaction's commit marker leaves gaps between appends.
	a, _ := c1.Topic("a")
	b, _ := c1.Topic("b")
	require.Greater(t, b.StateOffset, a.StateOffset)
	want := viewOf(c1)

	// A second log on the same topic (same transactional id) fences the first writer.
	l2 := openKLog(t, kc, DefaultControllerTopic)
	c2, err := OpenController(ctx, l2)
	require.NoError(t, err)
	require.Equal(t, want, viewOf(c2), "replay gives the same view")
	_, err = c1.ResumeTopics(ctx, "m", []string{"a"}, -1)
	require.Error(t, err, "the fenced writer cannot append")

	// The new writer goes on; a third reader sees its records.
	_, err = c2.ResumeTopics(ctx, "m", []string{"a"}, -1)
	require.NoError(t, err)
	l3, err := OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: kc.ListenAddrs(), TransactionalID: "reader"})
	require.NoError(t, err)
	defer l3.Close()
	c3, err := OpenController(ctx, l3)
	require.NoError(t, err)
	require.Equal(t, viewOf(c2), viewOf(c3))
	ta, _ := c3.Topic("a")
	require.Equal(t, statemachine.DesiredMirroring, ta.Desired)
}

func TestKafkaControllerLogAbortedNotLoaded(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t)
	l := openKLog(t, kc, "ctl")
	first, err := l.Append(ctx, []records.ControllerRecord{mirrorRecord("m", map[string]string{KeyBootstrapServers: "a:1"})})
	require.NoError(t, err)
	require.Equal(t, int64(0), first)
	// An aborted transaction of another transactional producer.
	key, value := records.EncodeControllerRecord(mirrorRecord("aborted", map[string]string{KeyBootstrapServers: "a:1"}))
	compactedtest.AbortedTxn(t, kc.ListenAddrs(), "aborter", "ctl", 0, string(key), string(value))
	second, err := l.Append(ctx, []records.ControllerRecord{
		topicRecord("t", id(1), "m", statemachine.DesiredMirroring),
		topicRecord("u", id(2), "m", statemachine.DesiredMirroring),
	})
	require.NoError(t, err)
	require.Greater(t, second, first+1)

	var got []int64
	var names []string
	require.NoError(t, l.Load(ctx, func(off int64, r records.ControllerRecord) error {
		got = append(got, off)
		switch {
		case r.Mirror != nil:
			names = append(names, r.Mirror.MirrorName)
		case r.TopicState != nil:
			names = append(names, r.TopicState.TopicName)
		}
		return nil
	}))
	require.Equal(t, []int64{0, second, second + 1}, got)
	require.Equal(t, []string{"m", "t", "u"}, names, "the aborted record is not loaded")

	_, err = l.Append(ctx, nil)
	require.ErrorIs(t, err, ErrControllerLog)
	_, err = l.Append(ctx, []records.ControllerRecord{{}})
	require.ErrorIs(t, err, ErrControllerLog, "invalid record refused before writing")
	require.NoError(t, l.Close())
	_, err = l.Append(ctx, []records.ControllerRecord{mirrorRecord("x", map[string]string{KeyBootstrapServers: "a:1"})})
	require.ErrorIs(t, err, ErrControllerLogClosed)
}

func TestKafkaControllerLogRefusesBadTopic(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t)
	require.NoError(t, kc.CreateTopic("plain", 1, nil))
	require.NoError(t, kc.CreateTopic("wide", 3, map[string]string{"cleanup.policy": "compact"}))
	require.NoError(t, kc.CreateTopic("both", 1, map[string]string{"cleanup.policy": "compact,delete"}))
	for _, topic := range []string{"plain", "wide", "both"} {
		_, err := OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: kc.ListenAddrs(), Topic: topic})
		require.ErrorIs(t, err, ErrControllerTopic, topic)
		t.Logf("%s: %v", topic, err)
	}
	// compact,delete is refused with the topic and the policy named
	_, err := OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: kc.ListenAddrs(), Topic: "both"})
	var pe *CleanupPolicyError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, CleanupPolicyError{Topic: "both", Policy: "compact,delete"}, *pe)
	require.NoError(t, kc.CreateTopic("ok", 1, map[string]string{"cleanup.policy": "compact"}))
	l, err := OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: kc.ListenAddrs(), Topic: "ok"})
	require.NoError(t, err, "an existing compacted single-partition topic is used")
	require.NoError(t, l.Close())

	l, err = OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: kc.ListenAddrs(), Topic: "created", ReplicationFactor: 1, MinInsyncReplicas: 1})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	info := kc.TopicInfo("created")
	require.Equal(t, "compact", *info.Configs["cleanup.policy"])
	require.Equal(t, "1", *info.Configs["min.insync.replicas"])
	require.Len(t, kc.PartitionInfos("created"), 1)

	var cfg KafkaControllerLogConfig
	require.Error(t, cfg.Validate(), "brokers required")
	cfg = KafkaControllerLogConfig{Brokers: []string{"a:1"}}
	require.NoError(t, cfg.Validate())
	require.Empty(t, cfg.Topic, "Validate never changes the config")
	cfg = cfg.withDefaults()
	require.Equal(t, DefaultControllerTopic, cfg.Topic)
	require.Equal(t, int16(-1), cfg.ReplicationFactor)
	require.Equal(t, "kmirror-controller-"+DefaultControllerTopic, cfg.TransactionalID)
}

func TestKafkaControllerLogCompaction(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t)
	l := openKLog(t, kc, "ctl")
	c, err := OpenController(ctx, l)
	require.NoError(t, err)
	for _, name := range []string{"keep", "drop"} {
		require.NoError(t, c.CreateMirror(ctx, name, map[string]string{KeyBootstrapServers: "src:9092"}))
	}
	_, err = c.StartTopics(ctx, "drop", []TopicMeta{{Name: "t1", TopicID: id(1), NumPartitions: 1}}, nil, nil)
	require.NoError(t, err)
	_, err = c.StartTopics(ctx, "keep", []TopicMeta{{Name: "t2", TopicID: id(2), NumPartitions: 1}}, nil, nil)
	require.NoError(t, err)
	_, err = c.PauseTopics(ctx, "keep", []string{"t2"}, -1)
	require.NoError(t, err)
	_, err = c.StopTopics(ctx, "drop", []string{"t1"}, nil, -1)
	require.NoError(t, err)
	require.NoError(t, c.DeleteMirror(ctx, "drop", -1))
	want := viewOf(c)

	count := func() int {
		n := 0
		require.NoError(t, l.Load(ctx, func(int64, records.ControllerRecord) error { n++; return nil }))
		return n
	}
	before := count()
	kc.Compact()
	after := count()
	t.Logf("records before compaction %d, after %d", before, after)
	require.Less(t, after, before, "compaction removed superseded records")

	l2 := openKLog(t, kc, "ctl")
	c2, err := OpenController(ctx, l2)
	require.NoError(t, err)
	got := viewOf(c2)
	require.Equal(t, want.Mirrors, got.Mirrors, "the deleted mirror stays deleted")
	require.Equal(t, want.Topics, got.Topics)
	_, ok := c2.Mirror("drop")
	require.False(t, ok)
	t1, _ := c2.Topic("t1")
	require.Equal(t, "", t1.Mirror, "t1 stays dissociated")
}

func TestKafkaControllerLogFailedAppend(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t)
	l := openKLog(t, kc, "ctl")
	c, err := OpenController(ctx, l)
	require.NoError(t, err)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "src:9092"}))

	// A produce that fails: the transaction is aborted and nothing of it is loaded.
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "ctl", Err: kerr.InvalidRecord})
	_, err = c.StartTopics(ctx, "m", []TopicMeta{{Name: "lost", TopicID: id(1), NumPartitions: 1}}, nil, nil)
	require.Equal(t, admin.CodeNotController, admin.CodeOf(err), "err: %v", err)
	_, ok := c.Topic("lost")
	require.False(t, ok, "a failed append changes nothing")

	// The log recovers: the next append commits.
	_, err = c.StartTopics(ctx, "m", []TopicMeta{{Name: "kept", TopicID: id(2), NumPartitions: 1}}, nil, nil)
	require.NoError(t, err)
	stale := c.Offset()
	_, err = c.PauseTopics(ctx, "m", []string{"kept"}, -1)
	require.NoError(t, err)
	rs, err := c.ResumeTopics(ctx, "m", []string{"kept"}, stale)
	require.NoError(t, err)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, topicErrs(rs)["kept"], "StateOffset fencing holds with transactional offset gaps")
	rs, err = c.ResumeTopics(ctx, "m", []string{"kept"}, c.Offset())
	require.NoError(t, err)
	require.Equal(t, admin.CodeNone, topicErrs(rs)["kept"])

	c2, err := OpenController(ctx, openKLog(t, kc, "ctl"))
	require.NoError(t, err)
	require.Equal(t, viewOf(c), viewOf(c2))
	_, ok = c2.Topic("lost")
	require.False(t, ok, "the aborted records are not loaded")
}

func TestKafkaControllerLogLoadInSmallFetches(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t)
	l, err := OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: kc.ListenAddrs(), Topic: "ctl", FetchMaxBytes: 1})
	require.NoError(t, err)
	defer l.Close()
	c, err := OpenController(ctx, l)
	require.NoError(t, err)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "src:9092"}))
	for i := 0; i < 20; i++ {
		_, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: fmt.Sprintf("t%02d", i), TopicID: id(byte(i + 1)), NumPartitions: 1}}, nil, nil)
		require.NoError(t, err)
	}
	fetches := kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Observe: true, Count: -1})
	c2, err := OpenController(ctx, l)
	require.NoError(t, err)
	require.Equal(t, viewOf(c), viewOf(c2))
	require.GreaterOrEqual(t, fetches.Hits(), 21, "one batch per fetch")
}

// TestKafkaControllerLogLoadRetries: leader errors and OFFSET_OUT_OF_RANGE met while
// loading are retried (with a bounded backoff), and the load gives the same view.
func TestKafkaControllerLogLoadRetries(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t)
	l := openKLog(t, kc, "ctl")
	c, err := OpenController(ctx, l)
	require.NoError(t, err)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "src:9092"}))
	_, err = c.StartTopics(ctx, "m", []TopicMeta{{Name: "a", TopicID: id(1), NumPartitions: 1}}, nil, nil)
	require.NoError(t, err)
	want := viewOf(c)
	for _, f := range []kfake.Fault{
		{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: "ctl", Err: kerr.LeaderNotAvailable, Count: 2},
		{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "ctl", Err: kerr.NotLeaderForPartition, Count: 2},
		{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "ctl", Err: kerr.OffsetOutOfRange, Count: 2},
	} {
		h := kc.Fault(f)
		c2, err := OpenController(ctx, l)
		require.NoError(t, err, f.Err.Message)
		require.Equal(t, want, viewOf(c2), f.Err.Message)
		require.Equal(t, f.Count, h.Hits(), "%s retried", f.Err.Message)
	}

	// A leader error that does not go away fails the load after RetryTimeout.
	short, err := OpenKafkaControllerLog(ctx, KafkaControllerLogConfig{Brokers: kc.ListenAddrs(), Topic: "ctl",
		TransactionalID: "short", RetryTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	defer short.Close()
	h := kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "ctl", Err: kerr.NotLeaderForPartition, Count: -1})
	defer h.Remove()
	_, err = OpenController(ctx, short)
	require.ErrorIs(t, err, ErrControllerLog)
	require.ErrorIs(t, err, sarama.ErrNotLeaderForPartition)
}
