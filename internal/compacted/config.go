package compacted

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// Defaults of Config.
const (
	DefaultFetchMaxBytes = 1 << 20
	DefaultFetchMaxWait  = 100 * time.Millisecond
	DefaultRetryTimeout  = 30 * time.Second
	// DefaultKafkaVersion is the protocol version of a Config without a Sarama base.
	DefaultKafkaVersion = "3.6.0"
)

// MinKafkaVersion is the oldest protocol version a Log accepts: transactions with the
// epoch-bump recovery of KIP-360 (2.5), which also has fetch v11.
const MinKafkaVersion = "2.5.0"

// Config configures a Log.
type Config struct {
	// Brokers is the bootstrap list (required).
	Brokers []string
	// Sarama is the base client config (TLS, SASL, timeouts, version); the Log copies it
	// and never changes it. The replay fetches with a franz-go client that takes over
	// its ClientID, Net.DialTimeout, Net.TLS and Net.SASL (PLAIN, SCRAM-SHA-256 or
	// SCRAM-SHA-512); other SASL mechanisms are refused with a *ConnSettingError. Nil
	// means sarama.NewConfig with DefaultKafkaVersion.
	Sarama *sarama.Config
	// Topic is the topic of the log (required).
	Topic string
	// Partitions is the partition count of a created topic and the count an existing
	// topic must have (required, at least 1).
	Partitions int32
	// ReplicationFactor of a created topic, and the fewest replicas a partition of an
	// existing topic may have; -1 uses the broker's default.replication.factor and
	// checks nothing. 0 means -1.
	ReplicationFactor int16
	// MinInSyncReplicas sets min.insync.replicas on a created topic; 0 leaves the
	// broker's default.
	MinInSyncReplicas int16
	// FetchMaxBytes is the partition byte budget of one replay fetch (the budget
	// doubles for a batch larger than it); default DefaultFetchMaxBytes.
	FetchMaxBytes int32
	// FetchMaxWait is the fetch's max wait; default DefaultFetchMaxWait.
	FetchMaxWait time.Duration
	// RetryTimeout bounds the retries of one stalled step (a leader error, an
	// OFFSET_OUT_OF_RANGE, a created topic without leaders); the budget starts again
	// after each step that makes progress. Default DefaultRetryTimeout.
	RetryTimeout time.Duration
	// OnLost, when set, accepts that a replay passes offsets [from, to) deleted under it
	// (the log start moved past them): it is called with the range and the replay goes
	// on from the log start. Nil refuses such a replay with a *LostError: nothing is
	// skipped silently.
	OnLost func(partition int32, from, to int64)
}

// withDefaults returns c with the defaults filled in; c itself is not changed.
func (c Config) withDefaults() Config {
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = DefaultFetchMaxWait
	}
	if c.RetryTimeout == 0 {
		c.RetryTimeout = DefaultRetryTimeout
	}
	return c
}

// Validate checks c after defaults; it never changes c.
func (c Config) Validate() error {
	c = c.withDefaults()
	minVersion := sarama.V2_5_0_0
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: no brokers", ErrInvalidConfig)
	case c.Topic == "":
		return fmt.Errorf("%w: no topic", ErrInvalidConfig)
	case c.Partitions < 1:
		return fmt.Errorf("%w: Partitions %d < 1", ErrInvalidConfig, c.Partitions)
	case c.ReplicationFactor < -1:
		return fmt.Errorf("%w: ReplicationFactor %d (want -1 or positive)", ErrInvalidConfig, c.ReplicationFactor)
	case c.MinInSyncReplicas < 0:
		return fmt.Errorf("%w: MinInSyncReplicas %d < 0", ErrInvalidConfig, c.MinInSyncReplicas)
	case c.ReplicationFactor > 0 && c.MinInSyncReplicas > c.ReplicationFactor:
		return fmt.Errorf("%w: MinInSyncReplicas %d > ReplicationFactor %d", ErrInvalidConfig, c.MinInSyncReplicas, c.ReplicationFactor)
	case c.FetchMaxBytes < 0:
		return fmt.Errorf("%w: FetchMaxBytes %d < 0", ErrInvalidConfig, c.FetchMaxBytes)
	case c.FetchMaxWait < 0:
		return fmt.Errorf("%w: FetchMaxWait %v < 0", ErrInvalidConfig, c.FetchMaxWait)
	case c.RetryTimeout < 0:
		return fmt.Errorf("%w: RetryTimeout %v < 0", ErrInvalidConfig, c.RetryTimeout)
	case c.Sarama != nil && !c.Sarama.Version.IsAtLeast(minVersion):
		return fmt.Errorf("%w: Kafka version %s < %s", ErrInvalidConfig, c.Sarama.Version, MinKafkaVersion)
	}
	if c.Sarama != nil {
		if _, err := kgoOptions(c.Sarama); err != nil {
			return err
		}
	}
	return nil
}

// baseConfig returns a copy of the Sarama base config, or a new one.
func (c Config) baseConfig() *sarama.Config {
	if c.Sarama != nil {
		cp := *c.Sarama
		return &cp
	}
	sc := sarama.NewConfig()
	v, err := sarama.ParseKafkaVersion(DefaultKafkaVersion)
	if err != nil {
		panic(fmt.Sprintf("compacted: DefaultKafkaVersion %q: %v", DefaultKafkaVersion, err)) // a constant
	}
	sc.Version = v
	return sc
}
