package fetcher

// The read-only guard of a destination partition (spec §5: a mirror partition refuses
// client writes in every state but STOPPED). It lives in the Log, under the log's own
// lock, so a client write and a SetReadOnly never interleave and no handle to the log can
// skip the check. Replication (Append) and the library's own control batches (ABORT,
// COMMIT, MIRROR_PID_RESET, written with AppendAsLeader) are not client writes and pass.

// SetReadOnly implements Log.
func (m *MemoryLog) SetReadOnly(readOnly bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.readOnly = readOnly
}

// ReadOnly implements Log.
func (m *MemoryLog) ReadOnly() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.readOnly
}

// SetReadOnly implements Log. The flag is not stored in the log directory: the
// Destination that owns the partition persists it and sets it again after open.
func (l *FileLog) SetReadOnly(readOnly bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.readOnly = readOnly
}

// ReadOnly implements Log.
func (l *FileLog) ReadOnly() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.readOnly
}
