package coordinator

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package. Typed errors below wrap them.
var (
	// ErrInvalidRecord is returned by Shard.Replay for a record with no key
	// or with both keys set.
	ErrInvalidRecord = errors.New("coordinator: invalid state record")
	// ErrFenced is returned by a Store when the caller's owner epoch is no
	// longer the newest owner of the partition (a newer owner loaded it).
	ErrFenced = errors.New("coordinator: owner fenced")
	// ErrNotOwner is returned by a Store for an Append to a partition the
	// caller has not loaded with that owner epoch.
	ErrNotOwner = errors.New("coordinator: partition not loaded by this owner")
	// ErrCrashed is returned by MemoryStore for appends cut off by Crash.
	ErrCrashed = errors.New("coordinator: store crashed")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("coordinator: closed")
	// ErrInvalidConfig is wrapped by Config.Validate errors.
	ErrInvalidConfig = errors.New("coordinator: invalid config")
	// ErrTopicMismatch is wrapped when an existing state topic has the wrong
	// partition count or is not compacted.
	ErrTopicMismatch = errors.New("coordinator: state topic does not match the configuration")
)

// FencedError reports that an owner epoch was fenced by a newer one.
// It matches ErrFenced with errors.Is.
type FencedError struct {
	Partition int32
	Epoch     int32 // the caller's owner epoch
	Current   int32 // the newest owner epoch, -1 when unknown
	Cause     error // the underlying client error, if any
}

// Error describes the fenced owner epoch and the partition.
func (e *FencedError) Error() string {
	msg := fmt.Sprintf("coordinator: owner epoch %d of state partition %d fenced", e.Epoch, e.Partition)
	if e.Current >= 0 {
		msg += fmt.Sprintf(" by epoch %d", e.Current)
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is makes a *FencedError match ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Unwrap returns the underlying client error.
func (e *FencedError) Unwrap() error { return e.Cause }
