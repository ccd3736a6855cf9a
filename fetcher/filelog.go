package fetcher

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// FileLog is the durable Log: one directory per partition in Kafka's own
// layout (<base>.log segments holding the raw batches, sparse <base>.index
// offset indexes, created with their first entry, leader-epoch-checkpoint), plus the kmirror-log-state file
// (two 512-byte slots of one text line each, "1 <seq> <leader epoch> <log
// start offset> <pending> <offset> <crc32c>\n" zero-padded, with pending
// "none", "truncate" or "full": the valid slot with the higher seq is the
// state, and a write goes in place to the other slot; absent while the log
// has no leader epoch and starts at its first segment's base) and the
// kmirror-recovery-point file (text: "0\n<n>\n", then "<base> <size> <next
// offset>\n" for each of the n rolled segments and for the active segment's
// flush point; absent while a new log holds no data). No .timeindex is
// written; the leader-epoch-checkpoint is rewritten in place without fsync, as recovery
// rebuilds it from the batches. Safe for concurrent use (one writer, many readers).
//
// The recovery point is written atomically when a segment is rolled, at
// Close and, every FileLogOptions.RecoveryPointInterval, at Flush when data
// was fsynced since (by Flush or by the fsync policy), and by truncations. It is Kafka's recovery point made exact:
// everything below it was fsynced, so OpenFileLog accepts no damage there.
type FileLog struct {
	dir       string
	opts      FileLogOptions
	files     *FileCache
	claimed   string   // dir as registered in files (claimDir)
	lock      *os.File // nil with FileLogOptions.DirLockedByCaller
	writeback bool     // the policy fsyncs later: start writebacks (maybeWritebackLocked)

	guarded     // mu guards st and the fields below
	segs        []*segment
	unflushed   int64
	closed      bool
	ckpt        []byte    // last checkpoint written
	rpData      []byte    // last recovery point written
	rpAt        time.Time // when Flush last wrote the recovery point (or the open)
	dirUnsynced bool      // a segment file was created since dir was last fsynced
	failed      error     // set when a truncation stopped half-way (ErrLogFailed)
	discarded   []Discard // what OpenFileLog removed
	metaSeq     uint64    // sequence number of the state file's current slot; 0: no file in the two-slot layout yet
	metaSlot    int       // the slot (0 or 1) holding it
	// metaUnsynced: the current slot was written and not synced
	// (BumpLeaderEpochUnsynced); the other slot holds the last durable
	// record, so the next write goes to this slot again.
	metaUnsynced bool
	group        *syncGroup // dir's filesystem's group syncs; nil: off
}

var _ Log = (*FileLog)(nil)

// OpenFileLog opens (creating if needed) the log in dir, takes its exclusive
// lock (an error Is(ErrLocked) when another FileLog holds it; in this
// process only, with FileLogOptions.DirLockedByCaller) and recovers it.
// Every segment's batch headers are read; the CRC of every batch is verified
// except below the recovery point of a segment file whose change time is
// before the recovery point's modification time (unchanged since it was
// fsynced and recorded: a restart after a clean Close reads only headers,
// as Kafka does not recover below its recovery point). Flushed data is
// never dropped silently: an invalid batch in a rolled segment or below the
// active segment's flush point, a segment file the recovery point lists but
// the directory lacks, a rolled segment whose size or end offset differs
// from its record (a file cut short), a segment file it does not list, or
// overlapping segments make Open fail with a *CorruptSegmentError
// (Is(ErrCorruptLog)) naming the file, the offset and the position, and
// nothing is modified; FileLogOptions.RepairCorruption cuts there instead.
// Only a torn tail past the active segment's flush point is cut
// automatically, as Kafka recovers past its recovery point; both cuts are
// reported by Discarded. A log written before recovery points existed opens
// with its last segment recovered this way and the others checked whole.
//
// Recovery then rebuilds the indexes, the epoch cache and the producer
// state from the batches (the leader-epoch-checkpoint is rewritten when it
// differs: it is kept for Kafka's tools and may lag what survived a crash),
// redoes a truncation interrupted by a crash and fsyncs the active segment.
// Open cost is one read of every batch header plus the data past the
// recovery point (the whole log when its files changed since); Truncate
// reads every batch header once. The open holds no descriptor when it
// returns except those its FileCache keeps.
func OpenFileLog(dir string, opts FileLogOptions) (*FileLog, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fetcher: create log dir: %w", err)
	}
	files := opts.Files
	if files == nil {
		files = DefaultFileCache()
	}
	claimed, ok := files.claimDir(dir)
	if !ok {
		return nil, fmt.Errorf("%w: %s is open in another log of this process", ErrLocked, dir)
	}
	l := &FileLog{dir: dir, opts: opts, files: files, claimed: claimed,
		writeback: opts.Fsync == FsyncOnFlush || opts.Fsync == FsyncEveryNBytes, group: groupFor(dir)}
	if !opts.DirLockedByCaller {
		lock, err := lockLogDir(dir)
		if err != nil {
			files.releaseDir(claimed)
			return nil, err
		}
		l.lock = lock
	}
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, fileLimitError(err)
	}
	l.share()
	return l, nil
}

// lockLogDir takes the exclusive flock of dir's lock file, which other
// processes' FileLogs respect; the descriptor is held until closeFiles.
func lockLogDir(dir string) (*os.File, error) {
	lock, err := os.OpenFile(filepath.Join(dir, LockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		if isFileLimit(err) {
			return nil, fmt.Errorf("%w: open lock file: %w", ErrTooManyOpenFiles, err)
		}
		return nil, fmt.Errorf("fetcher: open lock file: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is used by another process or log", ErrLocked, dir)
		}
		return nil, fmt.Errorf("fetcher: lock %s: %w", dir, err)
	}
	return lock, nil
}

// writeCheckpointLocked rewrites the leader-epoch checkpoint in place when
// the epoch cache changed, without fsyncs: recovery rebuilds the cache from
// the batches and only rewrites the file, so a checkpoint a crash left
// stale, empty or torn costs nothing. Kafka stopped fsyncing it on the
// append path for the same reason (KAFKA-15046). In place, not a temporary
// file renamed over it: at a shutdown of 100,000 partitions the create and
// the rename of each were a third of the Close's CPU.
func (l *FileLog) writeCheckpointLocked() error {
	data := epoch.EncodeCheckpoint(l.st.epochs.Entries())
	if bytes.Equal(data, l.ckpt) {
		return nil
	}
	if err := withFileSlot(func() error { return overwriteFile(l.path(CheckpointFileName), data) }); err != nil {
		return fmt.Errorf("fetcher: write %s: %w", CheckpointFileName, fileLimitError(err))
	}
	l.ckpt = data
	return nil
}

// Read implements Log. It uses the segment's sparse index to find the batch
// and returns whole batches of one segment.
func (l *FileLog) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.ReadBuffer(offset, maxBytes, true, nil)
}

// ReadBuffer is Read into buf when its capacity holds the read (else into a
// new slice): the result is a prefix of buf or new memory, and the caller
// owns buf again only once it no longer uses the result. A server reuses
// read buffers with it.
//
// minOne is Kafka's minOneMessage: true returns the first batch even when it
// is larger than maxBytes (Read, and the first partition of a Fetch answer
// with data); false returns nothing then, with only the batch's header read,
// so that a Fetch whose response budget is nearly spent does not read a
// whole batch of every later partition to drop it.
func (l *FileLog) ReadBuffer(offset int64, maxBytes int, minOne bool, buf []byte) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	if offset < l.st.logStart || offset > l.st.logEnd {
		return nil, &OutOfRangeError{Offset: offset, LogStart: l.st.logStart, LogEnd: l.st.logEnd}
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	i = max(i, 0)
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		start, _, err := l.locate(s, offset, func(b batchInfo) bool { return b.next() > offset })
		if err != nil {
			return nil, err
		}
		if start >= s.size {
			continue // offset is in a gap after this segment's last batch
		}
		// One read of up to maxBytes (at least the first batch), then keep
		// the whole batches.
		hdr := make([]byte, records.HeaderSize)
		if _, err := s.log.ReadAt(hdr, start); err != nil {
			return nil, fmt.Errorf("fetcher: read segment: %w", err)
		}
		first := int64(headerInfo(hdr).size)
		if first < records.HeaderSize || first > s.size-start {
			return nil, fmt.Errorf("fetcher: segment %d corrupt at %d: %w", s.base, start, records.ErrCorrupt)
		}
		if !minOne && first > int64(maxBytes) {
			return nil, nil
		}
		n := min(max(first, int64(maxBytes)), s.size-start)
		out := buf[:0]
		if int64(cap(out)) < n {
			out = make([]byte, n)
		}
		out = out[:n]
		if _, err := s.log.ReadAt(out, start); err != nil {
			return nil, fmt.Errorf("fetcher: read segment: %w", err)
		}
		keep := 0
		for keep+records.HeaderSize <= len(out) {
			size := headerInfo(out[keep:]).size
			if size < records.HeaderSize || keep+size > len(out) {
				break
			}
			keep += size
		}
		out = out[:keep:keep]
		return out, nil
	}
	return nil, nil
}

// BumpLeaderEpoch implements Log; the new epoch is durable in the state file
// (a slot written in place and fdatasynced) before it is returned.
func (l *FileLog) BumpLeaderEpoch(min int32) (int32, error) { return l.bumpLeaderEpoch(min, true) }

// BumpLeaderEpochUnsynced implements UnsyncedBumper: the bump's slot is
// written and not synced. The log's next SyncData (or Flush, or Close) makes
// it durable with the batches appended meanwhile, in one sync: a STOPPING's
// bump and barrier then cost one syncfs round, not two. A crash before that
// may keep batches appended at the new epoch and lose the bump; the open then
// raises the leader epoch to the epoch of the log's last batch (recover), so
// it is never below a batch the log holds.
func (l *FileLog) BumpLeaderEpochUnsynced(min int32) (int32, error) {
	return l.bumpLeaderEpoch(min, false)
}

func (l *FileLog) bumpLeaderEpoch(min int32, sync bool) (int32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	e, err := bumpEpoch(l.st.leaderEpoch, min)
	if err != nil {
		return 0, err
	}
	m := l.metaLocked()
	m.leaderEpoch = e
	if err := l.writeMetaSync(m, sync); err != nil {
		return 0, err
	}
	l.st.leaderEpoch = e
	return e, nil
}

// Flush implements Log: it fsyncs the active segment (unless the policy is
// FsyncNever), then, once FileLogOptions.RecoveryPointInterval passed since
// they were last written, writes the recovery point (the new flush point)
// and the leader-epoch checkpoint if they changed.
func (l *FileLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	return l.flushLocked(false)
}

// SyncData implements DataSyncer: it makes the batches appended so far
// durable (an fsync of the active segment, and of the directory when a
// segment file was created since its last one) and writes nothing else. The
// recovery point and the leader-epoch checkpoint that Flush writes once
// FileLogOptions.RecoveryPointInterval passed follow at the next such Flush
// or at Close; an open after a crash in between recovers the synced tail
// past the older recovery point, its CRCs checked, instead of skipping it.
// With FsyncNever it does nothing, as Flush.
func (l *FileLog) SyncData() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if l.opts.Fsync == FsyncNever || l.unflushed == 0 {
		return l.syncMetaLocked()
	}
	return l.syncDataLocked()
}

// flushLocked is Flush; final (Close) writes the recovery point and the
// checkpoint whatever the interval.
func (l *FileLog) flushLocked(final bool) error {
	if l.opts.Fsync != FsyncNever && l.unflushed > 0 {
		if err := l.syncDataLocked(); err != nil {
			return err
		}
	}
	if err := l.syncMetaLocked(); err != nil {
		return err
	}
	if final && l.opts.Fsync != FsyncNever {
		if err := l.syncDirLocked(); err != nil {
			return err
		}
	}
	if !final && l.opts.RecoveryPointInterval > 0 && time.Since(l.rpAt) < l.opts.RecoveryPointInterval {
		return nil
	}
	if err := l.writeRecoveryPoint(l.recoveryPointLocked()); err != nil {
		return err
	}
	if err := l.writeCheckpointLocked(); err != nil {
		return err
	}
	l.rpAt = time.Now()
	return nil
}

// Close implements Log: it flushes (as Flush), closes the files and releases
// the lock. After a truncation failed half-way (ErrLogFailed) it writes
// nothing and returns that failure.
func (l *FileLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	if l.failed != nil {
		l.closeFiles()
		return l.failed
	}
	err := l.flushLocked(true)
	if err == nil {
		err = l.active().idx.syncIfDirty()
	}
	l.closeFiles()
	return err
}

func (l *FileLog) closeFiles() {
	for _, s := range l.segs {
		s.close()
	}
	l.segs = nil
	if l.lock != nil {
		_ = syscall.Flock(int(l.lock.Fd()), syscall.LOCK_UN)
		l.lock.Close()
		l.lock = nil
	}
	if l.claimed != "" {
		l.files.releaseDir(l.claimed)
		l.claimed = ""
	}
}

// Dir returns the log's directory.
func (l *FileLog) Dir() string { return l.dir }
