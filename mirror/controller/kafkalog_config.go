package controller

import (
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/kmirror/kmirror/internal/compacted"
)

// DefaultControllerTopic is the default topic of a KafkaControllerLog.
const DefaultControllerTopic = "__mirror_controller"

// KafkaControllerLogConfig configures a KafkaControllerLog.
type KafkaControllerLogConfig struct {
	// Brokers is the bootstrap list of the cluster holding the topic (required).
	Brokers []string
	// Sarama is an optional base client config (TLS, SASL, timeouts); it is copied, never
	// modified. Default: sarama.NewConfig with Version 3.6. Its Version must be >= 2.8.
	Sarama *sarama.Config
	// Topic is the compacted single-partition topic; default DefaultControllerTopic.
	Topic string
	// ReplicationFactor of the topic when it is created, and the fewest replicas the
	// partition of an existing topic may have; default -1 (the broker's
	// default.replication.factor, nothing checked).
	ReplicationFactor int16
	// MinInsyncReplicas sets min.insync.replicas on a created topic; 0 leaves the
	// broker default.
	MinInsyncReplicas int
	// TransactionalID of the writer; default "kmirror-controller-" + Topic. Opening a
	// second log with the same id fences the first (its Appends fail).
	TransactionalID string
	// FetchMaxWait bounds one fetch while loading; default 500 ms.
	FetchMaxWait time.Duration
	// FetchMaxBytes is the partition byte budget of one fetch while loading (the broker
	// returns at least one whole batch anyway); default 1 MiB.
	FetchMaxBytes int32
	// RetryTimeout bounds the retries of one stalled step of Open or Load (a leader
	// error, OFFSET_OUT_OF_RANGE, a created topic without a leader); default 30 s.
	RetryTimeout time.Duration
}

// Validate checks cfg; it never changes it (zero values stand for the defaults).
func (cfg KafkaControllerLogConfig) Validate() error {
	var problems []string
	if len(cfg.Brokers) == 0 {
		problems = append(problems, "Brokers is required")
	}
	if cfg.ReplicationFactor < -1 {
		problems = append(problems, "ReplicationFactor must be -1 or positive")
	}
	if cfg.MinInsyncReplicas < 0 || cfg.MinInsyncReplicas > 1<<15-1 {
		problems = append(problems, "MinInsyncReplicas must be in [0,32767]")
	}
	if cfg.Sarama != nil && !cfg.Sarama.Version.IsAtLeast(sarama.V2_8_0_0) {
		problems = append(problems, "Sarama.Version must be at least 2.8")
	}
	if len(problems) > 0 {
		return fmt.Errorf("mirror: kafka controller log config: %s", strings.Join(problems, "; "))
	}
	return nil
}

// withDefaults returns cfg with every unset field at its default: the one place
// the defaults live.
func (cfg KafkaControllerLogConfig) withDefaults() KafkaControllerLogConfig {
	if cfg.Topic == "" {
		cfg.Topic = DefaultControllerTopic
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = -1
	}
	if cfg.TransactionalID == "" {
		cfg.TransactionalID = "kmirror-controller-" + cfg.Topic
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = 500 * time.Millisecond
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = 1 << 20
	}
	if cfg.RetryTimeout <= 0 {
		cfg.RetryTimeout = compacted.DefaultRetryTimeout
	}
	return cfg
}

// logConfig is the compacted.Config of the log and the base of its producer's config.
func (cfg *KafkaControllerLogConfig) logConfig() (compacted.Config, *sarama.Config) {
	base := sarama.NewConfig()
	if cfg.Sarama != nil {
		c := *cfg.Sarama
		base = &c
	} else {
		base.Version = sarama.V3_6_0_0
	}
	client := *base
	client.ClientID = "kmirror-controller-log"
	producer := *base
	producer.ClientID = "kmirror-controller-log-producer"
	producer.Producer.Retry.Max = 10
	return compacted.Config{
		Brokers: cfg.Brokers, Sarama: &client, Topic: cfg.Topic, Partitions: 1,
		ReplicationFactor: cfg.ReplicationFactor, MinInSyncReplicas: int16(cfg.MinInsyncReplicas),
		FetchMaxBytes: cfg.FetchMaxBytes, FetchMaxWait: cfg.FetchMaxWait, RetryTimeout: cfg.RetryTimeout,
	}, &producer
}
