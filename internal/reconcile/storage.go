package reconcile

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// ErrStorage is matched (errors.Is) by the cause of a partition FAILED because its
// destination storage failed: its log could not be opened (an unwritable or missing
// partition directory, a corrupt log), or a write to it failed with an I/O error
// (ENOSPC, EIO, EROFS, EDQUOT, a permission error). Such a partition stays local to its
// failure (the others go on) and is retried by the library's automatic FAILED retry
// (on by default, WithFailedRetry), so that it recovers once the disk is fixed.
var ErrStorage = errors.New("mirror: destination storage error")

// StorageError is the typed cause of a storage failure of one partition. It matches
// ErrStorage and unwraps to the I/O error.
type StorageError struct {
	Topic     string
	Partition int32
	Op        string // what failed: "open the log", "append", ...
	Err       error
}

// Error implements error.
func (e *StorageError) Error() string {
	return fmt.Sprintf("mirror: destination storage of %s-%d: %s: %v", e.Topic, e.Partition, e.Op, e.Err)
}

// Unwrap returns the I/O error.
func (e *StorageError) Unwrap() error { return e.Err }

// Is matches ErrStorage.
func (e *StorageError) Is(target error) bool { return target == ErrStorage }

// DefaultStorageRetry is the schedule on which the log open of a partition whose
// directory cannot be opened is retried: from 200 ms, doubling up to 30 s, without limit
// (a disk may be fixed hours later). Failures after the open follow the FAILED retry.
var DefaultStorageRetry = RetryConfig{Initial: 200 * time.Millisecond, Max: 30 * time.Second}

// ioErrnos are the errors of a local disk that a fixed disk clears, and the
// shortage of file descriptors (EMFILE, ENFILE: the log's files could not be
// opened, fetcher.ErrTooManyOpenFiles), which clears once descriptors are freed.
var ioErrnos = []syscall.Errno{syscall.ENOSPC, syscall.EIO, syscall.EROFS, syscall.EDQUOT,
	syscall.EACCES, syscall.EPERM, syscall.ENOTDIR, syscall.EMFILE, syscall.ENFILE}

// isStorageError reports whether err is a failure of the local disk: already an
// ErrStorage, or one of the I/O errnos (as a *fs.PathError from the log's files
// carries them).
func isStorageError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrStorage) {
		return true
	}
	for _, e := range ioErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// storageCause returns the cause to store with a FAILED state: err itself, wrapped in
// a *StorageError when it is a disk failure not yet typed as one.
func (r *Partition) storageCause(op string, err error) error {
	if err == nil || errors.Is(err, ErrStorage) || !isStorageError(err) {
		return err
	}
	return &StorageError{Topic: r.topic, Partition: r.partition, Op: op, Err: err}
}

// openOutcome is what one attempt of openLog did.
type openOutcome int

const (
	logOpen  openOutcome = iota // the log is open (r.log)
	logRetry                    // it did not open; a turn retries it (schedule)
	logGone                     // the reconciler stops, or the destination is closed
)

// openLog opens the partition's destination log before the first step. Until it opens
// the partition is FAILED with a *StorageError cause, so that describe shows the reason
// and a StateChange reports it at once, and the open is retried in a turn on the
// schedule of DefaultStorageRetry, with no goroutine held in between.
func (r *Partition) openLog() openOutcome {
	l, err := r.e.dest.Log(r.topic, r.partition)
	if err == nil {
		r.log = l
		r.logReady.Store(true)
		r.openBO = nil
		return logOpen
	}
	if errors.Is(err, fetcher.ErrClosed) || r.ctx.Err() != nil {
		return logGone
	}
	if r.openBO == nil {
		r.openBO = backoff.NewExponentialBackOff()
		r.openBO.InitialInterval, r.openBO.MaxInterval, r.openBO.MaxElapsedTime = DefaultStorageRetry.Initial, DefaultStorageRetry.Max, 0
	}
	if !r.openFailed {
		r.openFailed = r.failWithoutLog(&StorageError{Topic: r.topic, Partition: r.partition, Op: "open the log", Err: err})
		r.e.log.Error("mirror: destination log unavailable", "mirror", r.mirror, "topic", r.topic, "partition", r.partition, "err", err)
	}
	r.schedule(r.openBO.NextBackOff())
	return logRetry
}

// failWithoutLog writes FAILED with cause while the partition has no log (the leader
// epoch is not given, so it is not checked). It reports whether the write was done.
func (r *Partition) failWithoutLog(cause error) bool {
	if !r.known && !r.read() {
		return false
	}
	ev := statemachine.Error{Reason: cause.Error(), Cause: cause}
	if r.write(statemachine.Failed, ev) != writeOK {
		r.known = false
		return false
	}
	r.publish(r.state, r.pendingReason)
	return true
}

// leaderEpoch is the log's leader epoch, -1 (not checked) while the log is not open.
func (r *Partition) leaderEpoch() int32 {
	if r.log == nil {
		return -1
	}
	return r.log.LeaderEpoch()
}

// reassertReadOnly makes the read-only flag agree with the state when this owner first
// asserts it (after a restart or a leader change): a mirror partition is read-only in
// every state but STOPPED (whose re-run ClearReadOnly clears it) and UNKNOWN (no state
// yet). A crash between a state write and the flag write, or a flag changed behind the
// Mirror's back, is repaired here before the state's actions run.
func (r *Partition) reassertReadOnly() error {
	switch r.state {
	case statemachine.Unknown, statemachine.Stopped:
		return nil
	}
	if r.e.dest.ReadOnly(r.topic, r.partition) && r.log.ReadOnly() {
		return nil
	}
	r.e.log.Warn("mirror: read-only flag disagreed with the state; set again", "mirror", r.mirror, "topic", r.topic,
		"partition", r.partition, "state", r.state)
	return r.e.dest.SetReadOnly(r.topic, r.partition, true)
}
