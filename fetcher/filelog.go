package fetcher

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// FsyncPolicy says when a FileLog fsyncs appended data.
type FsyncPolicy int

const (
	// FsyncOnFlush fsyncs data only when the caller calls Flush (the caller
	// drives an interval). The default. The writeback of appended data is
	// started (not waited for) every MiB, so Flush has little left to write.
	FsyncOnFlush FsyncPolicy = iota
	// FsyncEveryAppend fsyncs the segment before Append returns.
	FsyncEveryAppend
	// FsyncEveryNBytes fsyncs once FsyncBytes bytes were appended since the
	// last fsync (and on Flush).
	FsyncEveryNBytes
	// FsyncNever never fsyncs appended data, not even on Flush (the page
	// cache decides). Segments are still fsynced when rolled, and metadata
	// files are always written atomically and fsynced.
	FsyncNever
)

// Defaults of FileLogOptions.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultIndexIntervalBytes = 4096
	DefaultFsyncBytes         = 1 << 20
)

// File names inside a FileLog directory.
const (
	// LockFileName is the exclusive lock file (flock LOCK_EX|LOCK_NB).
	LockFileName = ".lock"
	// CheckpointFileName is Kafka's leader-epoch checkpoint file.
	CheckpointFileName = "leader-epoch-checkpoint"
	// StateFileName holds the host-owned leader epoch, the log start offset
	// and a pending truncation (see OpenFileLog).
	StateFileName = "kmirror-log-state"
	// RecoveryPointFileName records every rolled segment (base offset, size,
	// next offset) and the active segment's flush point (see OpenFileLog).
	RecoveryPointFileName = "kmirror-recovery-point"
)

// FileLogOptions configures a FileLog. The zero value is valid.
type FileLogOptions struct {
	// SegmentBytes is the size at which a segment is rolled (default 1 GiB,
	// at most math.MaxInt32).
	SegmentBytes int64
	// IndexIntervalBytes is the number of bytes between offset index
	// entries (default 4096), as Kafka's index.interval.bytes.
	IndexIntervalBytes int64
	// Fsync is the data fsync policy (default FsyncOnFlush).
	Fsync FsyncPolicy
	// FsyncBytes is the threshold of FsyncEveryNBytes (default 1 MiB).
	FsyncBytes int64
	// StartOffset is the log start offset of a log created by this open;
	// ignored when the directory already holds a log.
	StartOffset int64
	// RepairCorruption makes OpenFileLog cut a corrupt log at its first bad
	// offset instead of failing with a *CorruptSegmentError: the bad
	// segment keeps its valid prefix and every later segment file is
	// removed. What was removed is reported by (*FileLog).Discarded.
	RepairCorruption bool
}

// Validate checks the options and reports the first invalid field.
func (o FileLogOptions) Validate() error {
	switch {
	case o.SegmentBytes < 0 || o.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("fetcher: SegmentBytes %d out of [0, %d]", o.SegmentBytes, math.MaxInt32)
	case o.IndexIntervalBytes < 0:
		return fmt.Errorf("fetcher: negative IndexIntervalBytes %d", o.IndexIntervalBytes)
	case o.Fsync < FsyncOnFlush || o.Fsync > FsyncNever:
		return fmt.Errorf("fetcher: unknown fsync policy %d", o.Fsync)
	case o.FsyncBytes < 0:
		return fmt.Errorf("fetcher: negative FsyncBytes %d", o.FsyncBytes)
	case o.StartOffset < 0:
		return fmt.Errorf("fetcher: negative StartOffset %d", o.StartOffset)
	}
	return nil
}

func (o FileLogOptions) withDefaults() FileLogOptions {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.FsyncBytes == 0 {
		o.FsyncBytes = DefaultFsyncBytes
	}
	return o
}

// PartitionDir is the directory of one partition's FileLog under root:
// root/<topic>-<partition>, as Kafka names it.
func PartitionDir(root, topic string, partition int32) string {
	return filepath.Join(root, topic+"-"+strconv.FormatInt(int64(partition), 10))
}

// writebackBytes is how many appended, not yet fsynced bytes of a segment
// make a FileLog with FsyncOnFlush or FsyncEveryNBytes start their writeback
// (startWriteback), so the disk writes while the mirror fetches instead of
// all at the next fsync.
const writebackBytes = 1 << 20

// FileLog is the durable Log: one directory per partition in Kafka's own
// layout (<base>.log segments holding the raw batches, sparse <base>.index
// offset indexes, leader-epoch-checkpoint), plus the kmirror-log-state file
// (text: "0\n<leader epoch>\n<log start offset>\n<pending> <offset>\n", with
// pending "none", "truncate" or "full") and the kmirror-recovery-point file
// (text: "0\n<n>\n", then "<base> <size> <next offset>\n" for each of the n
// rolled segments and for the active segment's flush point). No .timeindex
// is written. Safe for concurrent use (one writer, many readers).
//
// The recovery point is written atomically when a segment is rolled, at
// Flush and Close when data was fsynced since (by Flush or by the fsync
// policy), and by truncations. It is Kafka's recovery point made exact:
// everything below it was fsynced, so OpenFileLog accepts no damage there.
type FileLog struct {
	dir  string
	opts FileLogOptions
	lock *os.File

	mu        sync.RWMutex
	st        logState
	segs      []*segment
	unflushed int64
	closed    bool
	ckpt      []byte       // last checkpoint written
	rpData    []byte       // last recovery point written
	wb        *writebacker // nil unless the policy fsyncs later (see maybeWritebackLocked)
	failed    error        // set when a truncation stopped half-way (ErrLogFailed)
	discarded []Discard    // what OpenFileLog removed
}

var _ Log = (*FileLog)(nil)

// OpenFileLog opens (creating if needed) the log in dir, takes its exclusive
// lock (an error Is(ErrLocked) when another FileLog holds it) and recovers
// it. Every segment is read and every batch CRC verified. Flushed data is
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
// Open cost is one read of the whole log; Truncate reads every batch header
// once.
func OpenFileLog(dir string, opts FileLogOptions) (*FileLog, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fetcher: create log dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, LockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fetcher: open lock file: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is used by another process or log", ErrLocked, dir)
		}
		return nil, fmt.Errorf("fetcher: lock %s: %w", dir, err)
	}
	l := &FileLog{dir: dir, opts: opts, lock: lock}
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if opts.Fsync == FsyncOnFlush || opts.Fsync == FsyncEveryNBytes {
		l.wb = startWritebacker()
	}
	return l, nil
}

// writebacker runs a FileLog's writeback hints (startWriteback) on a
// goroutine of its own: sync_file_range does the file system's block
// allocation and queues the I/O in the calling thread, which would otherwise
// be the append path.
type writebacker struct {
	ch   chan wbRange
	done chan struct{}
}

type wbRange struct {
	f      *os.File
	off, n int64
}

func startWritebacker() *writebacker {
	w := &writebacker{ch: make(chan wbRange, 16), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for r := range w.ch {
			startWriteback(r.f, r.off, r.n) // a file closed meanwhile makes it a no-op
		}
	}()
	return w
}

// hint queues a writeback hint; when the goroutine is behind, the hint is
// dropped (the next fsync writes those pages anyway).
func (w *writebacker) hint(r wbRange) {
	select {
	case w.ch <- r:
	default:
	}
}

// stop waits for the queued hints and the goroutine.
func (w *writebacker) stop() {
	close(w.ch)
	<-w.done
}

func (l *FileLog) writeCheckpointLocked() error {
	data := epoch.EncodeCheckpoint(l.st.epochs.Entries())
	if bytes.Equal(data, l.ckpt) {
		return nil
	}
	if err := writeFileAtomic(l.dir, CheckpointFileName, data); err != nil {
		return err
	}
	l.ckpt = data
	return nil
}

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
	if err := old.idx.Sync(); err != nil {
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
	if l.wb == nil {
		return
	}
	s.wbPos = min(s.wbPos, s.size) // the segment may have been cut since
	if s.size-s.wbPos >= writebackBytes {
		l.wb.hint(wbRange{s.log, s.wbPos, s.size - s.wbPos})
		s.wbPos = s.size
	}
}

func (l *FileLog) syncDataLocked() error {
	a := l.active()
	if err := a.log.Sync(); err != nil {
		return fmt.Errorf("fetcher: fsync: %w", err)
	}
	a.synced, a.syncedEnd = a.size, l.st.logEnd
	l.unflushed = 0
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	base := l.st.logEnd
	stamped, err := l.st.stampLeader(batch)
	if err != nil {
		return 0, err
	}
	infos, err := splitBatches(stamped, base)
	if err != nil {
		return 0, err
	}
	return base, l.appendLocked(stamped, infos)
}

// LogStartOffset implements Log.
func (l *FileLog) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.logStart
}

// LogEndOffset implements Log.
func (l *FileLog) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.logEnd
}

// HighWatermark implements Log.
func (l *FileLog) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.hw
}

// LastStableOffset implements Log.
func (l *FileLog) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.lastStable()
}

// OpenTransactions implements Log.
func (l *FileLog) OpenTransactions() []OpenTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.openTxns()
}

// Read implements Log. It uses the segment's sparse index to find the batch
// and returns whole batches of one segment.
func (l *FileLog) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.ReadBuffer(offset, maxBytes, nil)
}

// ReadBuffer is Read into buf when its capacity holds the read (else into a
// new slice): the result is a prefix of buf or new memory, and the caller
// owns buf again only once it no longer uses the result. A server reuses
// read buffers with it.
func (l *FileLog) ReadBuffer(offset int64, maxBytes int, buf []byte) ([]byte, error) {
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
		n := min(max(first, int64(maxBytes)), s.size-start)
		if first < records.HeaderSize || first > n {
			return nil, fmt.Errorf("fetcher: segment %d corrupt at %d: %w", s.base, start, records.ErrCorrupt)
		}
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

// Epochs implements Log.
func (l *FileLog) Epochs() *epoch.Cache {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.epochs.Clone()
}

// EndOffsetForEpoch implements Log.
func (l *FileLog) EndOffsetForEpoch(e int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.endOffsetForEpoch(e)
}

// LatestEpoch implements Log.
func (l *FileLog) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.epochs.LatestEpoch()
}

// LeaderEpoch implements Log.
func (l *FileLog) LeaderEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.leaderEpoch
}

// BumpLeaderEpoch implements Log; the new epoch is in the state file (written
// atomically) before it is returned.
func (l *FileLog) BumpLeaderEpoch(min int32) (int32, error) {
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
	if err := l.writeMeta(m); err != nil {
		return 0, err
	}
	l.st.leaderEpoch = e
	return e, nil
}

// Flush implements Log: it fsyncs the active segment (unless the policy is
// FsyncNever), then writes the recovery point (the new flush point) and the
// leader-epoch checkpoint if they changed.
func (l *FileLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	return l.flushLocked()
}

func (l *FileLog) flushLocked() error {
	if l.opts.Fsync != FsyncNever && l.unflushed > 0 {
		if err := l.syncDataLocked(); err != nil {
			return err
		}
	}
	if err := l.writeRecoveryPoint(l.recoveryPointLocked()); err != nil {
		return err
	}
	return l.writeCheckpointLocked()
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
	if l.wb != nil {
		l.wb.stop()
	}
	if l.failed != nil {
		l.closeFiles()
		return l.failed
	}
	err := l.flushLocked()
	if err == nil {
		err = l.active().idx.Sync()
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
}

// Dir returns the log's directory.
func (l *FileLog) Dir() string { return l.dir }
