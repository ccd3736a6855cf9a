package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/kmirror/kmirror/records"
)

// MemoryStore is an in-memory Store with crash and fault injection, for
// tests and single-process hosts that do not need durability.
//
// It keeps one committed log per partition. Append is atomic. Crash drops
// every append still in flight (the in-flight call then returns ErrCrashed
// and its records are never visible) and fences every current owner, as a
// process restart would: the next owner must Load again (any epoch above the
// previous highest works, and so does the same epoch).
//
// MemoryStore is safe for concurrent use.
type MemoryStore struct {
	mu         sync.Mutex
	logs       map[int32][]records.StateRecord
	owner      map[int32]int32 // highest owner epoch loaded per partition
	loaded     map[int32]bool  // whether the current owner is loaded (reset by Crash)
	generation uint64          // bumped by Crash
	failAt     int             // fail the failAt-th append from now (0 = off)
	failErr    error
	hook       func(partition int32, recs []records.StateRecord) error
	appends    int
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{logs: make(map[int32][]records.StateRecord), owner: make(map[int32]int32),
		loaded: make(map[int32]bool)}
}

// Load implements Store. An ownerEpoch below the highest seen for the
// partition fails with a *FencedError.
func (m *MemoryStore) Load(ctx context.Context, partition, ownerEpoch int32, fn func(records.StateRecord) error) error {
	m.mu.Lock()
	if cur, ok := m.owner[partition]; ok && ownerEpoch < cur {
		m.mu.Unlock()
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: cur}
	}
	m.owner[partition] = ownerEpoch
	m.loaded[partition] = true
	log := m.logs[partition] // append-only: the prefix is immutable
	m.mu.Unlock()
	for i, r := range log {
		if i&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fn(r); err != nil {
			return fmt.Errorf("coordinator: replay of partition %d record %d: %w", partition, i, err)
		}
	}
	return nil
}

// Append implements Store. The append hook (SetAppendHook) runs between
// staging and commit; a Crash during it makes the append fail with
// ErrCrashed.
func (m *MemoryStore) Append(ctx context.Context, partition, ownerEpoch int32, recs []records.StateRecord) error {
	m.mu.Lock()
	if err := m.checkOwnerLocked(partition, ownerEpoch); err != nil {
		m.mu.Unlock()
		return err
	}
	m.appends++
	if m.failAt > 0 {
		m.failAt--
		if m.failAt == 0 {
			err := m.failErr
			m.mu.Unlock()
			return err
		}
	}
	gen, hook := m.generation, m.hook
	m.mu.Unlock()
	if hook != nil {
		if err := hook(partition, recs); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.generation != gen {
		return ErrCrashed
	}
	if err := m.checkOwnerLocked(partition, ownerEpoch); err != nil {
		return err
	}
	m.logs[partition] = append(m.logs[partition], recs...)
	return nil
}

func (m *MemoryStore) checkOwnerLocked(partition, ownerEpoch int32) error {
	cur, ok := m.owner[partition]
	if ok && ownerEpoch < cur {
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: cur}
	}
	if !ok || ownerEpoch != cur || !m.loaded[partition] {
		return fmt.Errorf("%w: partition %d epoch %d", ErrNotOwner, partition, ownerEpoch)
	}
	return nil
}

// Unload implements Store; it does nothing (ownership is fenced by epochs).
func (m *MemoryStore) Unload(partition, ownerEpoch int32) {}

// Close implements Store.
func (m *MemoryStore) Close() error { return nil }

// Crash simulates a process crash: in-flight appends fail with ErrCrashed
// and are not visible; committed records survive; owners must Load again.
func (m *MemoryStore) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.generation++
	clear(m.loaded)
}

// FailAppend makes the n-th Append from now (1 = the next) fail with err
// without committing anything. n <= 0 disarms it.
func (m *MemoryStore) FailAppend(n int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAt, m.failErr = max(n, 0), err
}

// SetAppendHook installs fn to run inside every Append after the ownership
// check and before the commit; a non-nil error fails the append with nothing
// committed. Tests use it to block an append and crash meanwhile. nil
// removes the hook.
func (m *MemoryStore) SetAppendHook(fn func(partition int32, recs []records.StateRecord) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = fn
}

// Records returns a copy of the committed log of partition.
func (m *MemoryStore) Records(partition int32) []records.StateRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]records.StateRecord(nil), m.logs[partition]...)
}

// Appends returns the number of Append calls that passed the ownership check.
func (m *MemoryStore) Appends() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.appends
}
