package fetcher

// The read-only guard of a destination partition (spec §5: a mirror partition refuses
// client writes in every state but STOPPED). It lives in the Log, under the log's own
// lock, so a client write and a SetReadOnly never interleave and no handle to the log can
// skip the check. Replication (Append) and the library's own control batches (ABORT,
// COMMIT, MIRROR_PID_RESET, written with AppendAsLeader) are not client writes and pass.

// SetReadOnly implements Log. The flag is not stored by the log (nor in a
// FileLog's directory): the Destination that owns the partition persists it
// and sets it again after open.
func (g *guarded) SetReadOnly(readOnly bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.readOnly = readOnly
}

// ReadOnly implements Log.
func (g *guarded) ReadOnly() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.st.readOnly
}

// WritableAppender is implemented by MemoryLog and FileLog: the append of a control batch
// that is not the library's own, such as the COMMIT or ABORT marker a data plane's
// transaction coordinator writes for a transaction of one of its clients
// (TxnMarker.OnlyIfWritable). Such a marker must never reach a mirror partition: its
// open transactions are the source's.
type WritableAppender interface {
	// AppendAsLeaderIfWritable is AppendAsLeader, except that while the log is
	// read-only every batch, control batches included, is refused with an error
	// Is(ErrReadOnly) and nothing is appended; the check and the append are atomic
	// with respect to SetReadOnly.
	AppendAsLeaderIfWritable(batch []byte) (baseOffset int64, err error)
}

var (
	_ WritableAppender = (*MemoryLog)(nil)
	_ WritableAppender = (*FileLog)(nil)
)
