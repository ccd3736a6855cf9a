package fetcher

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kmirror/kmirror/internal/atomicfile"
)

// writebackBytes is how many appended, not yet fsynced bytes of a segment
// make a FileLog with FsyncOnFlush or FsyncEveryNBytes start their writeback
// (startWriteback), so the disk writes while the mirror fetches instead of
// all at the next fsync.
const writebackBytes = 1 << 20

func (l *FileLog) active() *segment { return l.segs[len(l.segs)-1] }

// fits reports whether b can go into s, which holds size bytes.
func (l *FileLog) fits(s *segment, size int64, b batchInfo) bool {
	return b.base >= s.base && b.last-s.base <= math.MaxInt32 &&
		(size == 0 || size+int64(b.size) <= l.opts.SegmentBytes)
}

// rollLocked fsyncs the active segment and starts a new one at base. The
// recovery point recording the rolled segment is written before the new
// file exists (an empty active segment found missing is created again).
func (l *FileLog) rollLocked(base int64) error {
	old := l.active()
	if err := old.log.Sync(); err != nil {
		return fmt.Errorf("fetcher: sync segment: %w", err)
	}
	if err := old.idx.syncIfDirty(); err != nil {
		return fmt.Errorf("fetcher: sync index: %w", err)
	}
	old.synced, old.syncedEnd = old.size, old.end
	l.unflushed = 0
	rp := l.recoveryPointLocked()
	rp.rolled = append(rp.rolled, segMark{old.base, old.size, old.end})
	rp.active = segMark{base, 0, base}
	if err := l.writeRecoveryPoint(rp); err != nil {
		return err
	}
	_, err := l.newSegmentLocked(base)
	return err
}

func (l *FileLog) appendLocked(buf []byte, infos []batchInfo) error {
	epochBefore := l.st.epochs.LatestEpoch()
	for i := 0; i < len(infos); {
		s := l.active()
		if !l.fits(s, s.size, infos[i]) {
			if err := l.rollLocked(infos[i].base); err != nil {
				return err
			}
			s = l.active()
		}
		size, j := s.size, i
		for j < len(infos) && l.fits(s, size, infos[j]) {
			size += int64(infos[j].size)
			j++
		}
		run := buf[infos[i].pos : infos[j-1].pos+infos[j-1].size]
		if _, err := s.log.WriteAt(run, s.size); err != nil {
			_ = s.log.Truncate(s.size)
			return fmt.Errorf("fetcher: append: %w", err)
		}
		var idx []byte
		pos := s.size
		for _, in := range infos[i:j] {
			if s.addIndex(in, pos, l.opts.IndexIntervalBytes) {
				e := s.index[len(s.index)-1]
				idx = binary.BigEndian.AppendUint32(idx, uint32(e.rel))
				idx = binary.BigEndian.AppendUint32(idx, uint32(e.pos))
			}
			pos += int64(in.size)
			s.end = in.next()
			l.st.apply(in)
		}
		if len(idx) > 0 {
			if _, err := s.idx.WriteAt(idx, int64(8*len(s.index)-len(idx))); err != nil {
				return fmt.Errorf("fetcher: append index: %w", err)
			}
		}
		s.size = size
		l.unflushed += int64(len(run))
		l.maybeWritebackLocked(s)
		i = j
	}
	switch l.opts.Fsync {
	case FsyncEveryAppend:
		if err := l.syncDataLocked(); err != nil {
			return err
		}
	case FsyncEveryNBytes:
		if l.unflushed >= l.opts.FsyncBytes {
			if err := l.syncDataLocked(); err != nil {
				return err
			}
		}
	}
	l.st.hw = l.st.logEnd
	if l.st.epochs.LatestEpoch() != epochBefore && l.opts.Fsync == FsyncEveryAppend {
		return l.writeCheckpointLocked()
	}
	return nil
}

// maybeWritebackLocked starts the writeback of s's recent appends once
// writebackBytes accumulated, for the policies that fsync later.
func (l *FileLog) maybeWritebackLocked(s *segment) {
	if !l.writeback {
		return
	}
	s.wbPos = min(s.wbPos, s.size) // the segment may have been cut since
	if s.size-s.wbPos >= writebackBytes {
		l.files.hint(wbRange{s.log, s.wbPos, s.size - s.wbPos})
		s.wbPos = s.size
	}
}

func (l *FileLog) syncDataLocked() error {
	a := l.active()
	grouped, err := syncCached(a.log, l.group)
	if err != nil {
		return fmt.Errorf("fetcher: fsync: %w", err)
	}
	if grouped {
		// The round started after the state slot was written: durable too.
		l.metaUnsynced = false
	} else if err := l.syncMetaLocked(); err != nil {
		return err
	}
	if err := l.syncDirLocked(); err != nil {
		return err
	}
	a.synced, a.syncedEnd = a.size, l.st.logEnd
	l.unflushed = 0
	return nil
}

// syncDirLocked fsyncs the log's directory if a segment file was created
// since it was last fsynced: a new segment's entry is made durable with its
// first data, so creating thousands of empty logs costs no directory fsync.
func (l *FileLog) syncDirLocked() error {
	if !l.dirUnsynced {
		return nil
	}
	if err := withFileSlot(func() error { return atomicfile.SyncDir(l.dir) }); err != nil {
		return fmt.Errorf("fetcher: sync dir: %w", fileLimitError(err))
	}
	l.dirUnsynced = false
	return nil
}

// Append implements Log.
func (l *FileLog) Append(batches []byte) error { return l.appendChecked(batches, true) }

// appendPreverified implements preverifiedAppender: Append without
// recomputing the CRCs the fetch loop has just verified.
func (l *FileLog) appendPreverified(batches []byte) error { return l.appendChecked(batches, false) }

func (l *FileLog) appendChecked(batches []byte, verifyCRC bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	infos, err := splitBatchesCRC(batches, l.st.logEnd, verifyCRC)
	if err != nil {
		return err
	}
	return l.appendLocked(batches, infos)
}

// AppendAsLeader implements Log.
func (l *FileLog) AppendAsLeader(batch []byte) (int64, error) {
	return l.appendAsLeader(batch, false)
}

// AppendAsLeaderIfWritable implements WritableAppender.
func (l *FileLog) AppendAsLeaderIfWritable(batch []byte) (int64, error) {
	return l.appendAsLeader(batch, true)
}

func (l *FileLog) appendAsLeader(batch []byte, onlyWritable bool) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	base := l.st.logEnd
	stamped, err := l.st.stampLeader(batch, onlyWritable)
	if err != nil {
		return 0, err
	}
	infos, err := splitBatches(stamped, base)
	if err != nil {
		return 0, err
	}
	return base, l.appendLocked(stamped, infos)
}
