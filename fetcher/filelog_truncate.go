package fetcher

import (
	"fmt"
	"sort"

	"github.com/kmirror/kmirror/internal/atomicfile"
	"github.com/kmirror/kmirror/records"
)

// usableLocked returns ErrClosed after Close, the failure of a truncation
// that stopped half-way (see ErrLogFailed), else nil.
func (l *FileLog) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// truncatableLocked is the check Truncate and TruncateFullyAndStartAt start
// with: a usable log and a valid offset.
func (l *FileLog) truncatableLocked(offset int64) error {
	if err := l.usableLocked(); err != nil {
		return err
	}
	return checkOffset(offset)
}

// fail records err as the log's failure: the files and the in-memory state
// may differ from here on.
func (l *FileLog) fail(err error) error {
	l.failed = fmt.Errorf("%w: %w", ErrLogFailed, err)
	return l.failed
}

// Truncate implements Log. The truncation is recorded in the state file
// first, so a crash in the middle is completed by the next open. Only the
// segments at and after offset are modified: the one holding offset is cut,
// the later ones are removed.
func (l *FileLog) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.truncatableLocked(offset); err != nil {
		return err
	}
	if offset >= l.st.logEnd {
		return nil
	}
	if offset <= l.st.logStart {
		return l.truncateFullyLocked(offset)
	}
	m := l.metaLocked()
	m.pending, m.pendingOff = "truncate", offset
	if err := l.writeMeta(m); err != nil {
		return err
	}
	if err := l.truncateLocked(offset); err != nil {
		return err
	}
	if err := l.writeCheckpointLocked(); err != nil {
		return err
	}
	return l.writeMeta(l.metaLocked())
}

// truncateLocked removes the batches with base >= offset (logStart < offset <
// logEnd, or a no-op). It does not touch the state file. The segment holding
// offset is fsynced and the recovery point recording it cut is written
// before anything is removed, so that a crash leaves a directory the next
// open accepts (with the truncation pending, the bytes past the new flush
// point and the later segments go then).
func (l *FileLog) truncateLocked(offset int64) error {
	if offset >= l.st.logEnd || offset <= l.st.logStart {
		return nil
	}
	k := len(l.segs)
	for k > 1 && l.segs[k-1].base >= offset {
		k--
	}
	x := l.segs[k-1]
	cutPos, keptEnd, err := l.cutPoint(x, offset)
	if err != nil {
		return err
	}
	newEnd := max(offset, keptEnd)
	if err := x.log.Sync(); err != nil {
		return fmt.Errorf("fetcher: sync segment: %w", err)
	}
	rp := l.recoveryPointLocked()
	rp.rolled = rp.rolled[:k-1]
	rp.active = segMark{x.base, cutPos, newEnd}
	if err := l.writeRecoveryPoint(rp); err != nil {
		return err
	}
	// From here on a failure leaves the files and the state apart.
	for _, s := range l.segs[k:] {
		if err := l.removeSegment(s); err != nil {
			l.segs = l.segs[:k] // s and the ones before it are closed
			return l.fail(err)
		}
	}
	l.segs = l.segs[:k]
	if err := x.log.Truncate(cutPos); err != nil {
		return l.fail(fmt.Errorf("fetcher: truncate segment: %w", err))
	}
	if err := x.log.Sync(); err != nil {
		return l.fail(fmt.Errorf("fetcher: sync segment: %w", err))
	}
	if err := withFileSlot(func() error { return atomicfile.SyncDir(l.dir) }); err != nil {
		return l.fail(fmt.Errorf("fetcher: sync dir: %w", err))
	}
	x.size, x.synced, x.syncedEnd, l.unflushed = cutPos, cutPos, newEnd, 0
	epochs, hw := l.st.epochs, l.st.hw
	if err := l.rebuildStateLocked(); err != nil {
		return l.fail(err)
	}
	if err := x.syncIndexFile(); err != nil {
		return l.fail(err)
	}
	l.st.logEnd = newEnd
	epochs.TruncateFromEnd(newEnd)
	l.st.epochs = epochs
	l.st.hw = min(hw, newEnd)
	return nil
}

// cutPoint returns the position of the first batch of s with base >= offset
// (s.size when none) and the end of the batches before it.
func (l *FileLog) cutPoint(s *segment, offset int64) (pos, end int64, err error) {
	i := sort.Search(len(s.index), func(i int) bool { return s.base+int64(s.index[i].rel) >= offset })
	end = s.base
	if i > 0 {
		pos = int64(s.index[i-1].pos) // its batch ends below offset: kept
	}
	hdr := make([]byte, records.HeaderSize)
	for pos+records.HeaderSize <= s.size {
		if _, err := s.log.ReadAt(hdr, pos); err != nil {
			return 0, 0, fmt.Errorf("fetcher: read segment: %w", err)
		}
		b := headerInfo(hdr)
		if b.size < records.HeaderSize {
			return 0, 0, &CorruptSegmentError{File: l.path(segName(s.base, ".log")), Offset: end, Position: pos,
				Reason: fmt.Errorf("%w: batch size %d", records.ErrCorrupt, b.size)}
		}
		if b.base >= offset {
			return pos, end, nil
		}
		end = b.next()
		pos += int64(b.size)
	}
	return s.size, end, nil
}

// TruncateFullyAndStartAt implements Log.
func (l *FileLog) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.truncatableLocked(offset); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

func (l *FileLog) truncateFullyLocked(offset int64) error {
	m := l.metaLocked()
	m.logStart, m.pending, m.pendingOff = offset, "full", offset
	if err := l.writeMeta(m); err != nil {
		return err
	}
	for i, s := range l.segs {
		if err := l.removeSegment(s); err != nil {
			l.segs = l.segs[i+1:]
			return l.fail(err)
		}
	}
	l.segs = nil
	l.unflushed = 0
	l.st.resetTo(offset)
	if _, err := l.newSegmentLocked(offset); err != nil {
		return l.fail(err)
	}
	if err := l.writeRecoveryPoint(l.recoveryPointLocked()); err != nil {
		return l.fail(err)
	}
	if err := l.writeCheckpointLocked(); err != nil {
		return err
	}
	return l.writeMeta(l.metaLocked())
}
