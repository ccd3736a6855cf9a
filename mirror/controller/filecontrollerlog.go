package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/internal/statelog"
	"github.com/kmirror/kmirror/records"
)

// Errors of the file-backed state (FileControllerLog here, coordinator.FileStore for the
// partition states; the values are the same).
var (
	// ErrCorruptStateFile is matched by the error of a state file that cannot be read
	// without losing acknowledged records. A torn tail (the unacknowledged write a crash
	// cut short) is cut on open, never reported.
	ErrCorruptStateFile = coordinator.ErrCorruptStateFile
	// ErrStateFileVersion is matched by the error of a state file written by a newer
	// kmirror.
	ErrStateFileVersion = coordinator.ErrStateFileVersion
	// ErrControllerLogLocked is returned by OpenFileControllerLog when another log, in
	// this process or another, has the directory.
	ErrControllerLogLocked = errors.New("mirror: controller log directory locked")
)

// FileControllerLogLockFile is the lock file of a FileControllerLog directory.
const FileControllerLogLockFile = ".lock"

// FileControllerLog is the ControllerLog on local files: one compacted log in Kafka's
// segment format (v2 batches whose keys and values are exactly the records
// KafkaControllerLog writes, so kafka-dump-log reads it). One Append is one batch,
// fsynced before Append returns: acknowledged records survive kill -9 and power loss; a
// failed Append (a full disk) leaves nothing and loses nothing acknowledged. Open
// recovers the log (a torn tail is cut; other corruption matches ErrCorruptStateFile,
// a newer format ErrStateFileVersion) and locks the directory (ErrControllerLogLocked).
// The log is compacted by key as it grows: offsets are kept, tombstones dropped, and an
// offset is never given out twice. Safe for concurrent use; Appends are serialized.
type FileControllerLog struct {
	log  *statelog.Log
	lock *os.File

	mu     sync.Mutex
	closed bool
}

// OpenFileControllerLog opens (creating when missing) the controller log in dir.
func OpenFileControllerLog(dir string) (*FileControllerLog, error) {
	lock, err := statelog.LockDir(dir, FileControllerLogLockFile, ErrControllerLogLocked)
	if err != nil {
		return nil, err
	}
	l, err := statelog.Open(dir, statelog.Options{})
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("mirror: open controller log: %w", err)
	}
	return &FileControllerLog{log: l, lock: lock}, nil
}

// Dir is the log's directory.
func (l *FileControllerLog) Dir() string { return l.log.Dir() }

// Load implements ControllerLog.
func (l *FileControllerLog) Load(ctx context.Context, fn func(int64, records.ControllerRecord) error) error {
	err := l.log.Replay(ctx, func(off int64, key, value []byte) error {
		r, err := records.DecodeControllerRecord(key, value)
		if err != nil {
			return &statelog.CorruptError{Path: l.log.Dir(), Position: -1, Reason: fmt.Sprintf("record at offset %d: %v", off, err)}
		}
		return fn(off, r)
	})
	if errors.Is(err, statelog.ErrClosed) {
		return ErrControllerLogClosed
	}
	return err
}

// Append implements ControllerLog: recs are one batch, durable when Append returns.
func (l *FileControllerLog) Append(ctx context.Context, recs []records.ControllerRecord) (int64, error) {
	if len(recs) == 0 {
		return 0, errors.New("mirror: controller log: append of no records")
	}
	kvs := make([]statelog.KV, len(recs))
	for i, r := range recs {
		if err := r.Validate(); err != nil {
			return 0, fmt.Errorf("mirror: controller log: record %d: %w", i, err)
		}
		k, v := records.EncodeControllerRecord(r)
		kvs[i] = statelog.KV{Key: k, Value: v}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	first, err := l.log.Append(kvs)
	if errors.Is(err, statelog.ErrClosed) {
		return 0, ErrControllerLogClosed
	}
	if err != nil {
		return 0, fmt.Errorf("mirror: controller log append: %w", err)
	}
	return first, nil
}

// Close implements ControllerLog: it records the log as clean and releases the lock. A
// second Close returns nil.
func (l *FileControllerLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return errors.Join(l.log.Close(), l.lock.Close())
}
