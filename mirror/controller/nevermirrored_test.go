package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
)

// A user's topics.exclude and topic.properties.exclude add to the built-in lists; they
// never replace them (setting topics.exclude once mirrored __remote_log_metadata).
func TestNeverMirroredWhateverThePatterns(t *testing.T) {
	for _, raw := range []map[string]string{
		{KeyBootstrapServers: "a:1", KeyTopicsInclude: ".*", KeyTopicsExclude: "secret.*", KeyTopicPropertiesExcl: "segment.bytes"},
		{KeyBootstrapServers: "a:1", "mirror.topics.include": ".*", "mirror.topics.exclude": "secret.*", "mirror.topic.properties.exclude": "segment.bytes"},
		{KeyBootstrapServers: "a:1", KeyTopicsInclude: "__.*,.*", KeyTopicsExclude: "secret.*", KeyTopicPropertiesExcl: "segment.bytes"},
	} {
		c, err := ParseMirrorConfig(raw)
		require.NoError(t, err)
		for _, topic := range []string{"__remote_log_metadata", "__consumer_offsets", "__transaction_state",
			"__share_group_state", "__cluster_metadata", "__mirror_state", "__anything", "secret1"} {
			require.False(t, c.IncludesTopic(topic), "%s with %v", topic, raw)
			require.True(t, c.ExcludesTopic(topic), "%s with %v", topic, raw)
		}
		require.True(t, c.IncludesTopic("orders"))
		require.True(t, c.IncludesTopic("_schemas"), "one underscore is a user topic")
		for _, prop := range []string{"segment.bytes", "remote.storage.enable", "remote.log.copy.disable",
			"remote.log.delete.on.disable", "local.retention.ms", "local.retention.bytes",
			"leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
			"min.insync.replicas", "unclean.leader.election.enable", "message.timestamp.type",
			"message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "mirror.support.unclean.leader.election"} {
			require.False(t, c.SyncsTopicProperty(prop), "%s with %v", prop, raw)
		}
		for _, prop := range []string{"retention.ms", "retention.bytes", "cleanup.policy", "compression.type", "max.message.bytes"} {
			require.True(t, c.SyncsTopicProperty(prop), "%s with %v", prop, raw)
		}
	}
}

func TestNeverMirroredRefusedAtStart(t *testing.T) {
	ctx := context.Background()
	c, _ := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1", KeyTopicsExclude: "x"}))
	rs, err := c.StartTopics(ctx, "m", []TopicMeta{{Name: "__consumer_offsets", TopicID: id(1), NumPartitions: 50}}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, admin.CodeInvalidRequest, topicErrs(rs)["__consumer_offsets"])
	require.ErrorContains(t, rs[0].Err, "never mirrored")

	// An include pattern naming it is added to topics.include, yet the topic stays out.
	rs, err = c.StartTopics(ctx, "m", []TopicMeta{{Name: "__consumer_offsets", TopicID: id(1), NumPartitions: 50}}, []string{"__consumer_offsets"}, nil)
	require.NoError(t, err)
	require.Equal(t, admin.CodeInvalidRequest, topicErrs(rs)["__consumer_offsets"])
	_, known := c.Topic("__consumer_offsets")
	require.False(t, known)
	m, _ := c.Mirror("m")
	require.False(t, m.Config.IncludesTopic("__consumer_offsets"))
	require.Equal(t, []string{"x"}, m.Config.TopicsExclude)
}

func TestRecordSourceClusterID(t *testing.T) {
	ctx := context.Background()
	log := &MemoryControllerLog{}
	c, err := OpenController(ctx, log)
	require.NoError(t, err)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	require.Equal(t, admin.CodeUnknownClusterMirror, admin.CodeOf(c.RecordSourceClusterID(ctx, "x", "id")))
	require.Equal(t, admin.CodeInvalidConfig, admin.CodeOf(c.RecordSourceClusterID(ctx, "m", "has space")))
	require.NoError(t, c.RecordSourceClusterID(ctx, "m", "src-1"))
	off := c.Offset()
	require.NoError(t, c.RecordSourceClusterID(ctx, "m", "src-1"))
	require.Equal(t, off, c.Offset(), "the same id again writes nothing")
	c2, err := OpenController(ctx, log)
	require.NoError(t, err)
	m, _ := c2.Mirror("m")
	require.Equal(t, "src-1", m.Config.SourceClusterID)
	require.Equal(t, []string{"a:1"}, m.Config.BootstrapServers)
}
