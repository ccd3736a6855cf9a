package coordinator

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// Defaults of KafkaConfig.
const (
	DefaultStateTopic      = "__mirror_state"
	DefaultTransactionalID = "kmirror-mirror-state"
	// DefaultKafkaVersion is the protocol version KafkaStore asks sarama for when
	// KafkaConfig.Version is zero, in sarama.ParseKafkaVersion form; transactions
	// need at least 0.11, and the epoch-bump recovery of KIP-360 needs 2.5. (It was
	// a sarama.KafkaVersion variable; a constant cannot be changed by a caller.)
	DefaultKafkaVersion = "3.6.0"
)

// KafkaConfig configures a KafkaStore.
type KafkaConfig struct {
	// Brokers is the bootstrap list (required).
	Brokers []string
	// Topic is the state topic (default "__mirror_state").
	Topic string
	// NumPartitions is the partition count used to create the topic, and the
	// count an existing topic must have (default 50).
	NumPartitions int32
	// ReplicationFactor for a topic the store creates, and the fewest replicas a
	// partition of an existing topic may have (default 3).
	ReplicationFactor int16
	// MinInSyncReplicas for a topic the store creates; 0 means
	// min(2, ReplicationFactor).
	MinInSyncReplicas int16
	// TransactionalIDPrefix is the group of the transactional ids, one per
	// owned partition: "<prefix>-<partition>" (default
	// "kmirror-mirror-state"). Every process sharing the topic must use the
	// same prefix, or owners do not fence each other.
	TransactionalIDPrefix string
	// Version is the Kafka protocol version for sarama (default
	// DefaultKafkaVersion).
	Version sarama.KafkaVersion
	// LoadBufferSize is the fetch size used when loading (default 5 MiB).
	LoadBufferSize int32
	// Timeout bounds each network round trip of sarama, and the retries of
	// one stalled step of a load (a leader error, OFFSET_OUT_OF_RANGE)
	// (default 10 s).
	Timeout time.Duration
	// ClientID is sent to the brokers (default "kmirror-coordinator").
	ClientID string
	// Configure, when set, is called on every sarama.Config the store
	// builds (after its own settings) — for TLS, SASL and the like. The
	// transactional and idempotence settings of the producers are applied
	// after it.
	Configure func(*sarama.Config)
}

// defaultKafkaVersion is DefaultKafkaVersion parsed.
func defaultKafkaVersion() sarama.KafkaVersion {
	v, err := sarama.ParseKafkaVersion(DefaultKafkaVersion)
	if err != nil {
		panic(fmt.Sprintf("coordinator: DefaultKafkaVersion %q: %v", DefaultKafkaVersion, err)) // a constant
	}
	return v
}

func (c KafkaConfig) withDefaults() KafkaConfig {
	if c.Topic == "" {
		c.Topic = DefaultStateTopic
	}
	if c.NumPartitions == 0 {
		c.NumPartitions = DefaultNumPartitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.MinInSyncReplicas == 0 {
		c.MinInSyncReplicas = min(2, c.ReplicationFactor)
	}
	if c.TransactionalIDPrefix == "" {
		c.TransactionalIDPrefix = DefaultTransactionalID
	}
	if c.Version == (sarama.KafkaVersion{}) {
		c.Version = defaultKafkaVersion()
	}
	if c.LoadBufferSize == 0 {
		c.LoadBufferSize = DefaultLoadBufferSize
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.ClientID == "" {
		c.ClientID = "kmirror-coordinator"
	}
	return c
}

// Validate checks the configuration after defaults.
func (c KafkaConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: no brokers", ErrInvalidConfig)
	case c.NumPartitions < 1:
		return fmt.Errorf("%w: NumPartitions %d < 1", ErrInvalidConfig, c.NumPartitions)
	case c.ReplicationFactor < 1:
		return fmt.Errorf("%w: ReplicationFactor %d < 1", ErrInvalidConfig, c.ReplicationFactor)
	case c.MinInSyncReplicas < 1 || c.MinInSyncReplicas > c.ReplicationFactor:
		return fmt.Errorf("%w: MinInSyncReplicas %d not in [1,%d]", ErrInvalidConfig, c.MinInSyncReplicas, c.ReplicationFactor)
	case c.LoadBufferSize < 1:
		return fmt.Errorf("%w: LoadBufferSize %d < 1", ErrInvalidConfig, c.LoadBufferSize)
	case !c.Version.IsAtLeast(sarama.V2_5_0_0):
		return fmt.Errorf("%w: Version %s < 2.5.0 (transactions with epoch bump)", ErrInvalidConfig, c.Version)
	}
	return nil
}

// saramaConfig is the client config of the store (txnID "") or the tuning of
// the producer with transactional id txnID; package compacted adds the
// settings every transactional producer needs.
func (c KafkaConfig) saramaConfig(txnID string) *sarama.Config {
	sc := sarama.NewConfig()
	sc.Version = c.Version
	sc.ClientID = c.ClientID
	sc.Net.DialTimeout = c.Timeout
	sc.Net.ReadTimeout = c.Timeout
	sc.Net.WriteTimeout = c.Timeout
	sc.Metadata.Retry.Max = 3
	sc.Metadata.Retry.Backoff = 50 * time.Millisecond
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	if txnID != "" {
		sc.Producer.Retry.Max = 3
		sc.Producer.Retry.Backoff = 50 * time.Millisecond
		sc.Producer.Timeout = c.Timeout
		sc.Producer.Flush.Messages = 0
		sc.Producer.Transaction.Timeout = time.Minute
		// After a commit the coordinator answers CONCURRENT_TRANSACTIONS
		// until its markers are written; a short backoff keeps the next
		// append from waiting sarama's default 100 ms.
		sc.Producer.Transaction.Retry.Max = 100
		sc.Producer.Transaction.Retry.Backoff = 2 * time.Millisecond
	}
	if c.Configure != nil {
		c.Configure(sc)
	}
	return sc
}
