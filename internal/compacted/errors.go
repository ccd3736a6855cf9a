package compacted

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is wrapped by Config.Validate and ProducerConfig checks.
	ErrInvalidConfig = errors.New("compacted: invalid config")
	// ErrTopic is matched by every refusal of an existing topic (CleanupPolicyError,
	// PartitionCountError, ReplicationError).
	ErrTopic = errors.New("compacted: topic cannot hold a state log")
	// ErrFenced is matched by the errors of a Producer whose transactional id was
	// initialised by a newer producer.
	ErrFenced = errors.New("compacted: producer fenced")
	// ErrProducerBroken is wrapped once a Producer met a fatal error: it must be
	// reopened.
	ErrProducerBroken = errors.New("compacted: producer needs to be reopened")
	// ErrClosed is returned by the methods of a closed Log or Producer.
	ErrClosed = errors.New("compacted: closed")
	// ErrReplay wraps the failures of a replay that are not the callback's own.
	ErrReplay = errors.New("compacted: replay")
	// ErrLost is matched by a *LostError: a replay found its next offsets deleted.
	ErrLost = errors.New("compacted: replayed offsets were deleted")
	// ErrUnsupportedConn is matched by a ConnSettingError: a connection setting of
	// Config.Sarama the replay's client cannot take over.
	ErrUnsupportedConn = errors.New("compacted: unsupported connection setting")
)

// LostError refuses a replay whose next offsets were deleted under it: the log start
// moved past them (DeleteRecords, or retention on a topic whose policy was changed), so
// the latest values of their keys are gone for every reader. It matches ErrReplay and
// ErrLost. A Config.OnLost accepts the loss instead (it is then reported there).
type LostError struct {
	Topic     string
	Partition int32
	From, To  int64 // the offsets [From, To) that could not be read
}

func (e *LostError) Error() string {
	return fmt.Sprintf("compacted: replay of %s-%d: offsets [%d, %d) were deleted (log start moved to %d) before they were read",
		e.Topic, e.Partition, e.From, e.To, e.To)
}

// Is makes a LostError match ErrReplay and ErrLost.
func (e *LostError) Is(target error) bool { return target == ErrReplay || target == ErrLost }

// CleanupPolicyError refuses an existing topic whose cleanup.policy is not exactly
// compact: delete alone loses every value to retention, and compact,delete loses the
// latest value of a key once its segment passes retention.ms or retention.bytes.
type CleanupPolicyError struct {
	Topic  string
	Policy string // as the broker describes it
}

func (e *CleanupPolicyError) Error() string {
	return fmt.Sprintf("compacted: topic %q has cleanup.policy=%q, a state log needs exactly \"compact\" (retention would delete the latest value of a key)", e.Topic, e.Policy)
}

// Is matches ErrTopic.
func (e *CleanupPolicyError) Is(target error) bool { return target == ErrTopic }

// PartitionCountError refuses an existing topic with another partition count than
// configured: the count decides which partition holds a key.
type PartitionCountError struct {
	Topic      string
	Partitions int32 // of the topic
	Want       int32 // configured
}

func (e *PartitionCountError) Error() string {
	return fmt.Sprintf("compacted: topic %q has %d partitions, configured %d", e.Topic, e.Partitions, e.Want)
}

// Is matches ErrTopic.
func (e *PartitionCountError) Is(target error) bool { return target == ErrTopic }

// ReplicationError refuses an existing topic with a partition of fewer replicas than the
// configured replication factor.
type ReplicationError struct {
	Topic     string
	Partition int32
	Replicas  int   // of the partition
	Want      int16 // configured replication factor
}

func (e *ReplicationError) Error() string {
	return fmt.Sprintf("compacted: partition %s-%d has %d replicas, configured replication factor %d", e.Topic, e.Partition, e.Replicas, e.Want)
}

// Is matches ErrTopic.
func (e *ReplicationError) Is(target error) bool { return target == ErrTopic }

// FencedError is returned by a Producer whose transactional id now belongs to a newer
// producer epoch; it matches ErrFenced. Cause is Kafka's error.
type FencedError struct {
	TransactionalID string
	Cause           error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("compacted: transactional id %q fenced by a newer producer: %v", e.TransactionalID, e.Cause)
}

// Is matches ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Unwrap returns Cause.
func (e *FencedError) Unwrap() error { return e.Cause }

// KafkaError is an error code a broker answered a replay request with (Op is "Fetch",
// "ListOffsets" or "Metadata"). It unwraps to franz-go's kerr error of the code and to
// sarama's KError of it, so callers may match either (errors.Is(err,
// kerr.NotLeaderForPartition), errors.Is(err, sarama.ErrNotLeaderForPartition)).
type KafkaError struct {
	Op   string
	Code int16
}

func (e *KafkaError) Error() string {
	return fmt.Sprintf("compacted: %s: %v", e.Op, kerr.ErrorForCode(e.Code))
}

// Unwrap returns the kerr and the sarama error of Code.
func (e *KafkaError) Unwrap() []error {
	return []error{kerr.ErrorForCode(e.Code), sarama.KError(e.Code)}
}

// kafkaErr returns a *KafkaError for a non-zero code, nil for 0.
func kafkaErr(op string, code int16) error {
	if code == 0 {
		return nil
	}
	return &KafkaError{Op: op, Code: code}
}
