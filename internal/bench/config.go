package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Contender names, in the order Run executes them.
const (
	ContenderRaw     = "raw"
	ContenderKmirror = "kmirror"
	ContenderSarama  = "sarama"
	ContenderMM2     = "mm2"
)

// AllContenders lists every contender in run order.
var AllContenders = []string{ContenderRaw, ContenderKmirror, ContenderSarama, ContenderMM2}

// Fetch sizes shared by the raw ceiling and kmirror (the fetcher defaults).
const (
	fetchMaxWait           = 500 * time.Millisecond
	fetchMaxBytes          = 64 << 20
	fetchPartitionMaxBytes = 8 << 20
)

var (
	// ErrConfig is returned for an invalid Config.
	ErrConfig = errors.New("bench: invalid config")
	// ErrIncomplete is returned when a contender stopped before copying everything.
	ErrIncomplete = errors.New("bench: copy incomplete")
)

// Config configures one benchmark run. Zero fields take the documented defaults.
type Config struct {
	// SourceBrokers are the seed brokers of the source cluster A. Required.
	SourceBrokers []string
	// DestBrokers are the seed brokers of the destination cluster B; required
	// for the sarama and mm2 contenders.
	DestBrokers []string
	// DataBytes is the uncompressed record value bytes to produce (default 512 MiB).
	DataBytes int64
	// RecordBytes is the value size of one record (default 1024).
	RecordBytes int
	// Partitions of the benchmark topic (default 6).
	Partitions int32
	// ReplicationFactor of the benchmark topics (default 1).
	ReplicationFactor int16
	// Topic is the source topic name (default "kmirror-bench-<unix seconds>").
	Topic string
	// Contenders to run, a subset of AllContenders (default all), in run order.
	Contenders []string
	// WorkDir holds kmirror's FileLogs and MM2's files (default a temp dir).
	WorkDir string
	// ResultsJSON, Markdown and Chart are the output files; empty skips one.
	ResultsJSON, Markdown, Chart string
	// MM2Classpath is the java classpath of MirrorMaker 2 (scripts/bench/mm2.sh classpath).
	MM2Classpath string
	// MM2Tasks is MirrorMaker's tasks.max (default 3).
	MM2Tasks int
	// MM2HeapOpts are the JVM heap flags of MM2 (default "-Xms256m -Xmx2g", as
	// Kafka's connect-mirror-maker.sh).
	MM2HeapOpts []string
	// Repeat is the number of rounds of each Go contender (default 3); the
	// median round is reported. MM2 always runs once.
	Repeat int
	// KafkaVersion is recorded in the results (default "unknown").
	KafkaVersion string
	// Command is the command line recorded in the results.
	Command string
	// Timeout bounds each contender (default 30 min).
	Timeout time.Duration
	// Executable is the binary re-executed for Go contenders (default os.Executable()).
	Executable string
	// KmirrorNoFsync runs the kmirror contender with FsyncNever instead of
	// FsyncOnFlush, to measure what the final fsync costs (a diagnostic; the
	// reported figures use FsyncOnFlush).
	KmirrorNoFsync bool
	// ProfileDir, when set, makes every Go contender child write a CPU
	// profile there (<contender>-<round>.pprof); profiling costs some CPU.
	ProfileDir string
	// KeepTopics keeps the benchmark topics on both clusters after the run.
	KeepTopics bool
	// Log receives progress lines (default io.Discard).
	Log io.Writer
}

func (c *Config) defaults() {
	if c.DataBytes == 0 {
		c.DataBytes = 512 << 20
	}
	if c.RecordBytes == 0 {
		c.RecordBytes = 1024
	}
	if c.Partitions == 0 {
		c.Partitions = 6
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	if c.Topic == "" {
		c.Topic = fmt.Sprintf("kmirror-bench-%d", time.Now().Unix())
	}
	if len(c.Contenders) == 0 {
		c.Contenders = slices.Clone(AllContenders)
	}
	if c.Repeat == 0 {
		c.Repeat = 3
	}
	if c.MM2Tasks == 0 {
		c.MM2Tasks = 3
	}
	if len(c.MM2HeapOpts) == 0 {
		c.MM2HeapOpts = []string{"-Xms256m", "-Xmx2g"}
	}
	if c.KafkaVersion == "" {
		c.KafkaVersion = "unknown"
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Validate checks the configuration (after defaults are applied by Run).
func (c Config) Validate() error {
	if len(c.SourceBrokers) == 0 {
		return fmt.Errorf("%w: no source brokers", ErrConfig)
	}
	if c.DataBytes < 0 || c.RecordBytes < 0 || c.Partitions < 0 || c.ReplicationFactor < 0 || c.MM2Tasks < 0 || c.Repeat < 0 || c.Timeout < 0 {
		return fmt.Errorf("%w: negative value", ErrConfig)
	}
	if c.RecordBytes != 0 && c.RecordBytes < 16 {
		return fmt.Errorf("%w: RecordBytes %d < 16", ErrConfig, c.RecordBytes)
	}
	for _, name := range c.Contenders {
		if !slices.Contains(AllContenders, name) {
			return fmt.Errorf("%w: unknown contender %q", ErrConfig, name)
		}
		if (name == ContenderSarama || name == ContenderMM2) && len(c.DestBrokers) == 0 {
			return fmt.Errorf("%w: contender %s needs destination brokers", ErrConfig, name)
		}
		if name == ContenderMM2 && c.MM2Classpath == "" {
			return fmt.Errorf("%w: contender mm2 needs MM2Classpath", ErrConfig)
		}
	}
	return nil
}
