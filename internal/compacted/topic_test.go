package compacted

import (
	"context"
	"errors"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
)

func TestCompactOnly(t *testing.T) {
	for policy, want := range map[string]bool{
		"compact": true, " compact ": true, "[compact]": true, "Compact": true, "compact,compact": true,
		"compact,delete": false, "delete,compact": false, "compact, delete": false, "[delete, compact]": false,
		"delete": false, "": false, ",": false,
	} {
		require.Equal(t, want, CompactOnly(policy), "%q", policy)
	}
}

func TestOpenCreatesTopic(t *testing.T) {
	c := newCluster(t)
	cfg := testConfig(c.ListenAddrs(), "state", 3)
	cfg.ReplicationFactor, cfg.MinInSyncReplicas = 1, 1
	l := openLog(t, cfg)
	require.Equal(t, "state", l.Topic())
	require.Equal(t, int32(3), l.Partitions())
	info := c.TopicInfo("state")
	require.NotNil(t, info)
	require.Equal(t, "compact", *info.Configs["cleanup.policy"])
	require.Equal(t, "1", *info.Configs["min.insync.replicas"])
	require.Len(t, c.PartitionInfos("state"), 3)
	// the same config accepts the topic it created
	require.NoError(t, openLog(t, cfg).Close())
}

// TestOpenRefusesTopic: an existing topic is refused with a typed error that names the
// topic, whenever retention could delete the latest value of a key (compact,delete as
// well as delete), the partition count differs, or a partition has too few replicas.
func TestOpenRefusesTopic(t *testing.T) {
	c := newCluster(t)
	require.NoError(t, c.CreateTopic("plain", 1, nil))
	require.NoError(t, c.CreateTopic("both", 1, map[string]string{"cleanup.policy": "compact,delete"}))
	require.NoError(t, c.CreateTopic("both2", 1, map[string]string{"cleanup.policy": "delete,compact"}))
	require.NoError(t, c.CreateTopic("wide", 3, map[string]string{"cleanup.policy": "compact"}))
	require.NoError(t, c.CreateTopic("ok", 1, map[string]string{"cleanup.policy": "compact"}))
	ctx := context.Background()
	for topic, want := range map[string]string{"plain": "delete", "both": "compact,delete", "both2": "delete,compact"} {
		_, err := Open(ctx, testConfig(c.ListenAddrs(), topic, 1))
		require.ErrorIs(t, err, ErrTopic, topic)
		var pe *CleanupPolicyError
		require.True(t, errors.As(err, &pe), "%s: %v", topic, err)
		require.Equal(t, topic, pe.Topic)
		require.Equal(t, want, pe.Policy)
		require.Contains(t, err.Error(), topic)
	}
	_, err := Open(ctx, testConfig(c.ListenAddrs(), "wide", 1))
	var ce *PartitionCountError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, PartitionCountError{Topic: "wide", Partitions: 3, Want: 1}, *ce)
	require.ErrorIs(t, err, ErrTopic)

	cfg := testConfig(c.ListenAddrs(), "ok", 1)
	cfg.ReplicationFactor = 3
	_, err = Open(ctx, cfg)
	var re *ReplicationError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, ReplicationError{Topic: "ok", Partition: 0, Replicas: 1, Want: 3}, *re)
	require.ErrorIs(t, err, ErrTopic)

	cfg.ReplicationFactor = 1
	require.NoError(t, openLog(t, cfg).Close(), "an existing compacted topic is used")
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Brokers: []string{"a:1"}, Topic: "t", Partitions: 1}
	require.NoError(t, ok.Validate())
	old := sarama.NewConfig()
	old.Version = sarama.V2_4_0_0
	for name, mut := range map[string]func(*Config){
		"no brokers":       func(c *Config) { c.Brokers = nil },
		"no topic":         func(c *Config) { c.Topic = "" },
		"no partitions":    func(c *Config) { c.Partitions = 0 },
		"replication":      func(c *Config) { c.ReplicationFactor = -2 },
		"min isr":          func(c *Config) { c.MinInSyncReplicas = -1 },
		"min isr above rf": func(c *Config) { c.ReplicationFactor, c.MinInSyncReplicas = 1, 2 },
		"fetch bytes":      func(c *Config) { c.FetchMaxBytes = -1 },
		"fetch wait":       func(c *Config) { c.FetchMaxWait = -1 },
		"retry timeout":    func(c *Config) { c.RetryTimeout = -1 },
		"old version":      func(c *Config) { c.Sarama = old },
	} {
		c := ok
		mut(&c)
		before := c
		require.ErrorIs(t, c.Validate(), ErrInvalidConfig, name)
		require.Equal(t, before, c, "Validate does not mutate")
	}
	_, err := Open(context.Background(), Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
