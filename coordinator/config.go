package coordinator

import (
	"fmt"
	"time"
)

// Defaults of Config (spec §13.1 names in parentheses).
const (
	DefaultNumPartitions     = 50                    // mirror.state.topic.num.partitions
	DefaultReplicationFactor = 3                     // mirror.state.topic.replication.factor
	DefaultAppendLinger      = 10 * time.Millisecond // mirror.coordinator.append.linger.ms
	DefaultWriteTimeout      = 5 * time.Second       // mirror.coordinator.write.timeout.ms
	DefaultLoadBufferSize    = 5 << 20               // mirror.coordinator.load.buffer.size
	DefaultMaxBatchRecords   = 1000
	DefaultQueueSize         = 1024
)

// Config configures a Runtime. The zero value of each field means its
// default; call WithDefaults to fill them and Validate to check.
type Config struct {
	// NumPartitions is the number of __mirror_state partitions (default 50).
	// It must never change after deployment: it decides which partition
	// holds a key.
	NumPartitions int32
	// AppendLinger is how long a partition waits for more writes before it
	// appends a batch (default 10 ms). A negative value means "no linger":
	// append as soon as the queue is drained.
	AppendLinger time.Duration
	// MaxBatchRecords flushes a batch early once it holds this many records
	// (default 1000).
	MaxBatchRecords int
	// WriteTimeout bounds one Store.Append (default 5 s).
	WriteTimeout time.Duration
	// LoadBufferSize is passed to stores that read in chunks (bytes, default
	// 5 MiB); the runtime itself does not use it.
	LoadBufferSize int
	// QueueSize is the capacity of each partition's request queue (default
	// 1024).
	QueueSize int
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.NumPartitions == 0 {
		c.NumPartitions = DefaultNumPartitions
	}
	if c.AppendLinger == 0 {
		c.AppendLinger = DefaultAppendLinger
	}
	if c.MaxBatchRecords == 0 {
		c.MaxBatchRecords = DefaultMaxBatchRecords
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.LoadBufferSize == 0 {
		c.LoadBufferSize = DefaultLoadBufferSize
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	return c
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig. It
// checks the values as given; call it on WithDefaults() to accept zeros.
func (c Config) Validate() error {
	switch {
	case c.NumPartitions < 1:
		return fmt.Errorf("%w: NumPartitions %d < 1", ErrInvalidConfig, c.NumPartitions)
	case c.MaxBatchRecords < 1:
		return fmt.Errorf("%w: MaxBatchRecords %d < 1", ErrInvalidConfig, c.MaxBatchRecords)
	case c.WriteTimeout <= 0:
		return fmt.Errorf("%w: WriteTimeout %v <= 0", ErrInvalidConfig, c.WriteTimeout)
	case c.LoadBufferSize < 1:
		return fmt.Errorf("%w: LoadBufferSize %d < 1", ErrInvalidConfig, c.LoadBufferSize)
	case c.QueueSize < 1:
		return fmt.Errorf("%w: QueueSize %d < 1", ErrInvalidConfig, c.QueueSize)
	}
	return nil
}
