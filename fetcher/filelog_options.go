package fetcher

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"
)

// FsyncPolicy says when a FileLog fsyncs appended data.
type FsyncPolicy int

const (
	// FsyncOnFlush fsyncs data only when the caller calls Flush (the caller
	// drives an interval). The default. The writeback of appended data is
	// started (not waited for) every MiB, so Flush has little left to write.
	FsyncOnFlush FsyncPolicy = iota
	// FsyncEveryAppend fsyncs the segment before Append returns.
	FsyncEveryAppend
	// FsyncEveryNBytes fsyncs once FsyncBytes bytes were appended since the
	// last fsync (and on Flush).
	FsyncEveryNBytes
	// FsyncNever never fsyncs appended data, not even on Flush (the page
	// cache decides). Segments are still fsynced when rolled, and metadata
	// files are always written atomically and fsynced.
	FsyncNever
)

// Defaults of FileLogOptions.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultIndexIntervalBytes = 4096
	DefaultFsyncBytes         = 1 << 20
	// DefaultRecoveryPointInterval is the default
	// FileLogOptions.RecoveryPointInterval.
	DefaultRecoveryPointInterval = time.Minute
)

// File names inside a FileLog directory.
const (
	// LockFileName is the exclusive lock file (flock LOCK_EX|LOCK_NB),
	// unless FileLogOptions.DirLockedByCaller.
	LockFileName = ".lock"
	// CheckpointFileName is Kafka's leader-epoch checkpoint file.
	CheckpointFileName = "leader-epoch-checkpoint"
	// StateFileName holds the host-owned leader epoch, the log start offset
	// and a pending truncation (see OpenFileLog).
	StateFileName = "kmirror-log-state"
	// RecoveryPointFileName records every rolled segment (base offset, size,
	// next offset) and the active segment's flush point (see OpenFileLog).
	RecoveryPointFileName = "kmirror-recovery-point"
)

// FileLogOptions configures a FileLog. The zero value is valid.
type FileLogOptions struct {
	// SegmentBytes is the size at which a segment is rolled (default 1 GiB,
	// at most math.MaxInt32).
	SegmentBytes int64
	// IndexIntervalBytes is the number of bytes between offset index
	// entries (default 4096), as Kafka's index.interval.bytes.
	IndexIntervalBytes int64
	// Fsync is the data fsync policy (default FsyncOnFlush).
	Fsync FsyncPolicy
	// FsyncBytes is the threshold of FsyncEveryNBytes (default 1 MiB).
	FsyncBytes int64
	// RecoveryPointInterval is how often Flush also writes the recovery
	// point and the leader-epoch checkpoint (default
	// DefaultRecoveryPointInterval, as Kafka's
	// log.flush.offset.checkpoint.interval.ms; negative: at every Flush).
	// A roll, a truncation and Close always write them. A recovery point
	// behind the flushed data costs only a longer open after a crash: the
	// data past it is verified batch by batch, and a torn tail there is cut
	// and reported (Discarded), as Kafka recovers past its recovery point.
	RecoveryPointInterval time.Duration
	// StartOffset is the log start offset of a log created by this open;
	// ignored when the directory already holds a log.
	StartOffset int64
	// RepairCorruption makes OpenFileLog cut a corrupt log at its first bad
	// offset instead of failing with a *CorruptSegmentError: the bad
	// segment keeps its valid prefix and every later segment file is
	// removed. What was removed is reported by (*FileLog).Discarded.
	RepairCorruption bool
	// Files is the FileCache the log opens its segment files through (nil:
	// DefaultFileCache, shared by the process). The log holds a descriptor
	// only while a read, a write or an fsync of it is under way, or while
	// the cache keeps one of its files open among the Max most recently
	// used.
	Files *FileCache
	// DirLockedByCaller says that the caller holds a lock excluding other
	// processes from the log's directory (LocalDestination's root lock):
	// OpenFileLog then takes no lock file of its own and holds no
	// descriptor for it. A second FileLog on the directory in this process
	// is refused (ErrLocked) either way.
	DirLockedByCaller bool
}

// Validate checks the options and reports the first invalid field.
func (o FileLogOptions) Validate() error {
	switch {
	case o.SegmentBytes < 0 || o.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("fetcher: SegmentBytes %d out of [0, %d]", o.SegmentBytes, math.MaxInt32)
	case o.IndexIntervalBytes < 0:
		return fmt.Errorf("fetcher: negative IndexIntervalBytes %d", o.IndexIntervalBytes)
	case o.Fsync < FsyncOnFlush || o.Fsync > FsyncNever:
		return fmt.Errorf("fetcher: unknown fsync policy %d", o.Fsync)
	case o.FsyncBytes < 0:
		return fmt.Errorf("fetcher: negative FsyncBytes %d", o.FsyncBytes)
	case o.StartOffset < 0:
		return fmt.Errorf("fetcher: negative StartOffset %d", o.StartOffset)
	}
	return nil
}

func (o FileLogOptions) withDefaults() FileLogOptions {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.FsyncBytes == 0 {
		o.FsyncBytes = DefaultFsyncBytes
	}
	if o.RecoveryPointInterval == 0 {
		o.RecoveryPointInterval = DefaultRecoveryPointInterval
	}
	return o
}

// PartitionDir is the directory of one partition's FileLog under root:
// root/<topic>-<partition>, as Kafka names it.
func PartitionDir(root, topic string, partition int32) string {
	return filepath.Join(root, topic+"-"+strconv.FormatInt(int64(partition), 10))
}
