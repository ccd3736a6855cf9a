package fetcher

import (
	"fmt"
	"sort"
)

// MemoryLogOptions configures a MemoryLog. The zero value is a log starting
// at offset 0 whose appends become durable only on Flush.
type MemoryLogOptions struct {
	// StartOffset is the initial LogStartOffset (= LogEndOffset).
	StartOffset int64
	// SyncEveryAppend makes every successful append durable at once (as the
	// FileLog fsync policy FsyncEveryAppend), so Crash never drops it.
	SyncEveryAppend bool
	// FailAppendN makes the Nth call (1-based, counting Append and
	// AppendAsLeader calls from now) fail with ErrInjected; 0 = never.
	FailAppendN int
	// FailFlushN makes the Nth Flush call (1-based) fail with ErrInjected;
	// 0 = never.
	FailFlushN int
}

type memBatch struct {
	info batchInfo
	data []byte
}

// MemoryLog is an in-memory Log for tests, with crash simulation and fault
// injection. Truncations and leader-epoch bumps are durable at once; appended
// batches are durable after Flush (or at once with SyncEveryAppend). Safe for
// concurrent use.
type MemoryLog struct {
	guarded // mu guards st and the fields below
	batches []memBatch
	floor   int64 // log end implied by the last truncation (an empty tail)
	durable int   // batches[:durable] survive Crash
	closed  bool

	syncEach           bool
	appends, flushes   int
	failAppN, failFlsN int
}

var _ Log = (*MemoryLog)(nil)

// NewMemoryLog returns an empty MemoryLog.
func NewMemoryLog(opts MemoryLogOptions) *MemoryLog {
	start := max(opts.StartOffset, 0)
	m := &MemoryLog{
		guarded:  guarded{st: newLogState(start)},
		floor:    start,
		syncEach: opts.SyncEveryAppend,
		failAppN: opts.FailAppendN,
		failFlsN: opts.FailFlushN,
	}
	m.share()
	return m
}

// FailAppendAfter makes the nth append call from now (1-based) fail with
// ErrInjected; 0 disables the fault.
func (m *MemoryLog) FailAppendAfter(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.appends, m.failAppN = 0, n
}

// FailFlushAfter makes the nth Flush call from now (1-based) fail with
// ErrInjected; 0 disables the fault.
func (m *MemoryLog) FailFlushAfter(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushes, m.failFlsN = 0, n
}

// Crash simulates a crash and restart: every batch appended since the last
// successful Flush is dropped and the state (epoch cache, producer state,
// high watermark) is rebuilt from what remains, as a reopen would. The log
// stays usable (a closed log is reopened).
func (m *MemoryLog) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.batches) > m.durable {
		m.batches = m.batches[:m.durable:m.durable]
		// A truncation floor above the surviving data would leave a hole where the
		// dropped batches were: the log ends where its durable data ends.
		end := m.st.logStart
		if n := len(m.batches); n > 0 {
			end = m.batches[n-1].info.next()
		}
		m.floor = min(m.floor, max(end, m.st.logStart))
	}
	m.rebuildLocked()
	m.st.hw = m.st.logEnd
	m.closed = false
}

// rebuildLocked recomputes the epoch cache, producer state and log end from
// the batches, keeping logStart, hw (capped), the leader epoch and the
// read-only flag.
func (m *MemoryLog) rebuildLocked() {
	start, hw, le, ro := m.st.logStart, m.st.hw, m.st.leaderEpoch, m.st.readOnly
	m.st = newLogState(start)
	m.st.leaderEpoch, m.st.readOnly = le, ro
	m.st.logEnd = m.floor
	for _, b := range m.batches {
		m.st.apply(b.info)
	}
	m.st.hw = min(hw, m.st.logEnd)
}

func (m *MemoryLog) faultAppendLocked() error {
	m.appends++
	if m.failAppN > 0 && m.appends == m.failAppN {
		return fmt.Errorf("%w: append %d", ErrInjected, m.appends)
	}
	return nil
}

// Append implements Log.
func (m *MemoryLog) Append(batches []byte) error { return m.appendChecked(batches, true) }

// appendPreverified implements preverifiedAppender: Append without
// recomputing the CRCs the fetch loop has just verified.
func (m *MemoryLog) appendPreverified(batches []byte) error { return m.appendChecked(batches, false) }

func (m *MemoryLog) appendChecked(batches []byte, verifyCRC bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if err := m.faultAppendLocked(); err != nil {
		return err
	}
	infos, err := splitBatchesCRC(batches, m.st.logEnd, verifyCRC)
	if err != nil {
		return err
	}
	m.appendLocked(batches, infos)
	return nil
}

func (m *MemoryLog) appendLocked(buf []byte, infos []batchInfo) {
	for _, in := range infos {
		data := append([]byte(nil), buf[in.pos:in.pos+in.size]...)
		in.pos = 0
		m.batches = append(m.batches, memBatch{info: in, data: data})
		m.st.apply(in)
	}
	if m.syncEach {
		m.durable = len(m.batches)
	}
	m.st.hw = m.st.logEnd
}

// AppendAsLeader implements Log.
func (m *MemoryLog) AppendAsLeader(batch []byte) (int64, error) {
	return m.appendAsLeader(batch, false)
}

// AppendAsLeaderIfWritable implements WritableAppender.
func (m *MemoryLog) AppendAsLeaderIfWritable(batch []byte) (int64, error) {
	return m.appendAsLeader(batch, true)
}

func (m *MemoryLog) appendAsLeader(batch []byte, onlyWritable bool) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	if err := m.faultAppendLocked(); err != nil {
		return 0, err
	}
	base := m.st.logEnd
	stamped, err := m.st.stampLeader(batch, onlyWritable)
	if err != nil {
		return 0, err
	}
	infos, err := splitBatches(stamped, base)
	if err != nil {
		return 0, err
	}
	m.appendLocked(stamped, infos)
	return base, nil
}

// Truncate implements Log.
func (m *MemoryLog) Truncate(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.truncatableLocked(offset); err != nil {
		return err
	}
	if offset >= m.st.logEnd {
		return nil
	}
	if offset <= m.st.logStart {
		m.truncateFullyLocked(offset)
		return nil
	}
	keep := sort.Search(len(m.batches), func(i int) bool { return m.batches[i].info.base >= offset })
	m.batches = m.batches[:keep:keep]
	m.durable = min(m.durable, keep)
	newEnd := offset
	if keep > 0 {
		newEnd = max(newEnd, m.batches[keep-1].info.next())
	}
	m.floor = newEnd
	le, hw := m.st.leaderEpoch, m.st.hw
	epochs := m.st.epochs
	m.rebuildLocked()
	epochs.TruncateFromEnd(newEnd)
	m.st.epochs = epochs
	m.st.leaderEpoch = le
	m.st.hw = min(hw, newEnd)
	return nil
}

// truncatableLocked is the check Truncate and TruncateFullyAndStartAt start
// with: an open log and a valid offset.
func (m *MemoryLog) truncatableLocked(offset int64) error {
	if m.closed {
		return ErrClosed
	}
	return checkOffset(offset)
}

func (m *MemoryLog) truncateFullyLocked(offset int64) {
	m.batches, m.durable, m.floor = nil, 0, offset
	m.st.resetTo(offset)
}

// TruncateFullyAndStartAt implements Log.
func (m *MemoryLog) TruncateFullyAndStartAt(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.truncatableLocked(offset); err != nil {
		return err
	}
	m.truncateFullyLocked(offset)
	return nil
}

// Read implements Log.
func (m *MemoryLog) Read(offset int64, maxBytes int) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	if offset < m.st.logStart || offset > m.st.logEnd {
		return nil, &OutOfRangeError{Offset: offset, LogStart: m.st.logStart, LogEnd: m.st.logEnd}
	}
	i := sort.Search(len(m.batches), func(i int) bool { return m.batches[i].info.next() > offset })
	var out []byte
	for ; i < len(m.batches); i++ {
		d := m.batches[i].data
		if len(out) > 0 && len(out)+len(d) > maxBytes {
			break
		}
		out = append(out, d...)
	}
	return out, nil
}

// BumpLeaderEpoch implements Log.
func (m *MemoryLog) BumpLeaderEpoch(min int32) (int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	e, err := bumpEpoch(m.st.leaderEpoch, min)
	if err != nil {
		return 0, err
	}
	m.st.leaderEpoch = e
	return e, nil
}

// Flush implements Log: every batch appended so far survives Crash.
func (m *MemoryLog) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.flushes++
	if m.failFlsN > 0 && m.flushes == m.failFlsN {
		return fmt.Errorf("%w: flush %d", ErrInjected, m.flushes)
	}
	m.durable = len(m.batches)
	return nil
}

// Close implements Log. Unflushed batches stay visible until Crash.
func (m *MemoryLog) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	return nil
}
