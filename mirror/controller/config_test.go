package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
)

func TestConfigPrototypeDefaults(t *testing.T) {
	c, err := ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1"})
	require.NoError(t, err)
	require.Equal(t, time.Second, c.FetchMaxWait)
	require.Equal(t, time.Second, c.FetchBackoff)
	require.Equal(t, int32(1), c.FetchMinBytes)
	require.Equal(t, int32(10485760), c.FetchResponseMaxBytes)
	require.Equal(t, int32(1048576), c.FetchPartitionMaxBytes)
	require.Equal(t, 30*time.Second, c.SocketTimeout)
	require.Equal(t, 65536, c.SocketReceiveBufferBytes)
	require.Empty(t, c.TopicsExclude, "the user's list: internal topics are excluded besides it")
	require.Empty(t, c.TopicsInclude)
	require.Equal(t, []string{".*"}, c.GroupsInclude)
	require.Len(t, c.ACLsInclude, 1)
	require.Equal(t, "*", c.ACLsInclude[0].ResourceType)
	require.False(t, c.IncludesTopic("__consumer_offsets"))
}

func TestConfigBothSpellings(t *testing.T) {
	values := map[string]string{
		KeyFetchWaitMaxMs: "77", KeyFetchBackoffMs: "78", KeyFetchMinBytes: "79",
		KeyFetchResponseMaxBytes: "80000", KeyFetchMaxBytes: "81000", KeySocketTimeoutMs: "82",
		KeySocketReceiveBufferBytes: "83000", KeyTopicsInclude: "t.*", KeyTopicsExclude: "x",
		KeyGroupsInclude: "g.*", KeyGroupsExclude: "h", KeyACLsInclude: "TOPIC;t.*;READ",
		KeyTopicPropertiesExcl: "segment.bytes",
	}
	require.ElementsMatch(t, prefixedKeys, keysOf(values))
	for _, prefixed := range []bool{false, true} {
		raw := map[string]string{KeyBootstrapServers: "a:1"}
		for k, v := range values {
			if prefixed {
				k = "mirror." + k
			}
			raw[k] = v
		}
		c, err := ParseMirrorConfig(raw)
		require.NoError(t, err, "prefixed=%v", prefixed)
		require.Equal(t, 77*time.Millisecond, c.FetchMaxWait)
		require.Equal(t, 78*time.Millisecond, c.FetchBackoff)
		require.Equal(t, int32(79), c.FetchMinBytes)
		require.Equal(t, int32(80000), c.FetchResponseMaxBytes)
		require.Equal(t, int32(81000), c.FetchPartitionMaxBytes)
		require.Equal(t, 82*time.Millisecond, c.SocketTimeout)
		require.Equal(t, 83000, c.SocketReceiveBufferBytes)
		require.True(t, c.IncludesTopic("t1"))
		require.False(t, c.IncludesTopic("x"))
		require.True(t, c.IncludesGroup("g1"))
		require.False(t, c.IncludesGroup("h"))
		require.Equal(t, []string{"segment.bytes"}, c.TopicPropertiesExclude)
		require.Equal(t, "READ", c.ACLsInclude[0].Operation)
		require.True(t, c.ACLsInclude[0].MatchesResourceName("t9"))
		canon, err := CanonicalMirrorConfigs(raw)
		require.NoError(t, err)
		for k, v := range values {
			require.Equal(t, v, canon[k])
			require.NotContains(t, canon, "mirror."+k)
		}
	}
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestConfigSpellingConflictAndUnknown(t *testing.T) {
	_, err := ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1",
		"fetch.wait.max.ms": "5", "mirror.fetch.wait.max.ms": "5"})
	require.NoError(t, err, "same value in both spellings")

	_, err = ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1",
		"topics.include": "a", "mirror.topics.include": "b"})
	requireCode(t, admin.CodeInvalidConfig, err)
	require.Contains(t, err.Error(), "mirror.topics.include")
	require.Contains(t, err.Error(), "topics.include=")

	for _, k := range []string{"mirror.bootstrap.servers", "mirror.fetch.wait.max", "topic.include", "mirror.mirror.topics.include"} {
		_, err = ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1", k: "1"})
		requireCode(t, admin.CodeInvalidConfig, err)
		require.Contains(t, err.Error(), "unknown config")
	}
	_, err = ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1", "mirror.socket.timeout.ms": "0"})
	requireCode(t, admin.CodeInvalidConfig, err)
	_, err = ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1", KeySocketReceiveBufferBytes: "-1"})
	require.NoError(t, err, "-1 keeps the system default")
}

func TestConfigACLRules(t *testing.T) {
	r, err := ParseACLRule("topic;orders-.*;read;allow;User:alice")
	require.NoError(t, err)
	require.Equal(t, ACLRule{ResourceType: "TOPIC", ResourceName: "orders-.*", Operation: "READ",
		PermissionType: "ALLOW", Principal: "User:alice", name: r.name}, r)
	require.True(t, r.MatchesResourceName("orders-1"))
	require.False(t, r.MatchesResourceName("xorders-1"))
	r, err = ParseACLRule("GROUP")
	require.NoError(t, err)
	require.Equal(t, "*", r.Principal)
	require.True(t, r.MatchesResourceName("anything"))
	for _, bad := range []string{"QUEUE;x", "TOPIC;([;READ", "TOPIC;x;EAT", "TOPIC;x;READ;MAYBE",
		"TOPIC;x;READ;ALLOW;alice", "TOPIC;x;READ;ALLOW;User:a;extra"} {
		_, err := ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1", "mirror.acls.include": "GROUP," + bad})
		requireCode(t, admin.CodeInvalidConfig, err)
		require.Contains(t, err.Error(), bad, "the error names the rule")
	}
}

// TestControllerStoresCanonicalKeys: a mirror created with prefixed keys is stored
// canonical, so StartTopics patterns (which write the canonical keys) do not conflict,
// and a record written with the old prefixed spelling still replays.
func TestControllerStoresCanonicalKeys(t *testing.T) {
	ctx := context.Background()
	c, log := testController(t)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1",
		"mirror.topics.include": "a.*", "mirror.fetch.min.bytes": "9"}))
	mi, ok := c.Mirror("m")
	require.True(t, ok)
	require.Equal(t, map[string]string{KeyBootstrapServers: "a:1", KeyTopicsInclude: "a.*", KeyFetchMinBytes: "9"}, mi.Configs)
	_, err := c.StartTopics(ctx, "m", nil, []string{"b.*"}, nil)
	require.NoError(t, err)
	mi, _ = c.Mirror("m")
	require.Equal(t, []string{"a.*", "b.*"}, mi.Config.TopicsInclude)

	old := mirrorRecord("old", map[string]string{KeyBootstrapServers: "a:1", "mirror.topics.include": "o.*"})
	c.mu.Lock()
	err = c.commitLocked(ctx, []records.ControllerRecord{old})
	c.mu.Unlock()
	require.NoError(t, err)
	c2, err := OpenController(ctx, log)
	require.NoError(t, err)
	mi, ok = c2.Mirror("old")
	require.True(t, ok)
	require.Equal(t, map[string]string{KeyBootstrapServers: "a:1", KeyTopicsInclude: "o.*"}, mi.Configs)
	require.True(t, mi.Config.IncludesTopic("o1"))
}

func TestConfigRetryAndSyncSettings(t *testing.T) {
	c, err := ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1"})
	require.NoError(t, err)
	require.False(t, c.MetadataRefreshSet)
	require.Equal(t, FailedRetry{}, c.FailedRetry)
	c, err = ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1", KeyMetadataRefreshIntervalMs: "60000",
		KeyFailedRetryInitialBackoffMs: "100", KeyFailedRetryMaxBackoffMs: "300000", KeyFailedRetryMaxAttempts: "20"})
	require.NoError(t, err)
	require.Equal(t, time.Minute, c.MetadataRefreshInterval)
	require.True(t, c.MetadataRefreshSet)
	require.Equal(t, FailedRetry{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Minute, MaxAttempts: 20, MaxAttemptsSet: true}, c.FailedRetry)
	for _, bad := range []map[string]string{
		{KeyMetadataRefreshIntervalMs: "-1"}, {KeyFailedRetryInitialBackoffMs: "0"}, {KeyFailedRetryMaxBackoffMs: "x"},
		{KeyFailedRetryMaxAttempts: "32768"}, {KeyFailedRetryMaxAttempts: "-1"},
		{KeyFailedRetryInitialBackoffMs: "2000", KeyFailedRetryMaxBackoffMs: "1000"},
	} {
		bad[KeyBootstrapServers] = "a:1"
		_, err := ParseMirrorConfig(bad)
		require.Equal(t, admin.CodeInvalidConfig, admin.CodeOf(err), "%v", bad)
		var ke *KeyError
		require.ErrorAs(t, err, &ke, "%v", bad)
	}
}
