package fetcher

// RecordDeleter is implemented by logs that serve Kafka's DeleteRecords: the log start
// offset moves forward, durably; records below it are no longer served (Read refuses
// them, as Kafka does once the log start moved). FileLog and MemoryLog implement it;
// the segments below the new start stay on disk until a truncation removes them.
type RecordDeleter interface {
	// DeleteRecordsBefore makes offset the log start offset and returns the new log
	// start (Kafka's low watermark). -1 means the high watermark. An offset at or
	// below the current log start changes nothing. An offset above the high
	// watermark is an error Is(ErrOffsetOutOfRange); a read-only log (a mirror
	// partition) refuses with ErrReadOnly.
	DeleteRecordsBefore(offset int64) (int64, error)
}

var (
	_ RecordDeleter = (*FileLog)(nil)
	_ RecordDeleter = (*MemoryLog)(nil)
)

// deleteTarget checks a DeleteRecords offset against st and returns the new log start,
// or ok false when nothing changes.
func deleteTarget(st *logState, offset int64) (int64, bool, error) {
	if st.readOnly {
		return 0, false, ErrReadOnly
	}
	if offset == -1 {
		offset = st.hw
	}
	if offset < 0 || offset > st.hw {
		return 0, false, &OutOfRangeError{Offset: offset, LogStart: st.logStart, LogEnd: st.hw}
	}
	if offset <= st.logStart {
		return st.logStart, false, nil
	}
	return offset, true, nil
}

// DeleteRecordsBefore implements RecordDeleter: the new log start is written to the
// log's state file (a slot written in place and fdatasynced) before it takes effect.
func (l *FileLog) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	start, change, err := deleteTarget(&l.st, offset)
	if err != nil || !change {
		return start, err
	}
	m := l.metaLocked()
	m.logStart = start
	if err := l.writeMeta(m); err != nil {
		return 0, err
	}
	l.st.logStart = start
	return start, nil
}

// DeleteRecordsBefore implements RecordDeleter.
func (m *MemoryLog) DeleteRecordsBefore(offset int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	start, change, err := deleteTarget(&m.st, offset)
	if err != nil || !change {
		return start, err
	}
	m.st.logStart = start
	return start, nil
}
