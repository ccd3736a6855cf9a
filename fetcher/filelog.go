package fetcher

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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

type indexEntry struct {
	rel int32 // last offset of the batch at pos, relative to the segment base
	pos int32
}

type segment struct {
	base       int64
	log, idx   *os.File
	size       int64
	index      []indexEntry
	sinceIndex int64
	end        int64 // next offset after the last batch; base when empty
	wbPos      int64 // writeback was started for [0, wbPos) (see startWriteback)
}

// writebackBytes is how many appended, not yet fsynced bytes of a segment
// make a FileLog with FsyncOnFlush or FsyncEveryNBytes start their writeback
// (startWriteback), so the disk writes while the mirror fetches instead of
// all at the next fsync.
const writebackBytes = 1 << 20

func segName(base int64, ext string) string { return fmt.Sprintf("%020d%s", base, ext) }

// FileLog is the durable Log: one directory per partition in Kafka's own
// layout (<base>.log segments holding the raw batches, sparse <base>.index
// offset indexes, leader-epoch-checkpoint), plus the kmirror-log-state file
// (text: "0\n<leader epoch>\n<log start offset>\n<pending> <offset>\n", with
// pending "none", "truncate" or "full"). No .timeindex is written. Safe for
// concurrent use (one writer, many readers).
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
	wb        *writebacker // nil unless the policy fsyncs later (see maybeWritebackLocked)
}

var _ Log = (*FileLog)(nil)

// OpenFileLog opens (creating if needed) the log in dir, takes its exclusive
// lock (an error Is(ErrLocked) when another FileLog holds it) and recovers
// it: segments are scanned, the last one with full CRC verification (the
// others were fsynced when rolled and are checked structurally); a torn or
// corrupt tail is cut, later segments are removed, indexes are rebuilt, the
// epoch cache and producer state are rebuilt from the batch headers of every
// segment (the leader-epoch-checkpoint is rewritten when it differs: it is
// kept for Kafka's tools and may lag what survived a crash), and a truncation
// interrupted by a crash is redone. Open cost is one header read per batch
// of the whole log; Truncate rescans the headers the same way.
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

type logMeta struct {
	leaderEpoch int32
	logStart    int64
	pending     string // "none", "truncate", "full"
	pendingOff  int64
}

func encodeMeta(m logMeta) []byte {
	return fmt.Appendf(nil, "0\n%d\n%d\n%s %d\n", m.leaderEpoch, m.logStart, m.pending, m.pendingOff)
}

// ErrCorruptState is returned by OpenFileLog when the kmirror-log-state file
// cannot be parsed.
var ErrCorruptState = errors.New("fetcher: corrupt log state file")

func decodeMeta(data []byte) (logMeta, error) {
	lines := strings.Split(string(data), "\n")
	if len(lines) != 5 || lines[4] != "" || lines[0] != "0" {
		return logMeta{}, fmt.Errorf("%w: bad layout", ErrCorruptState)
	}
	var m logMeta
	e, err := strconv.ParseInt(lines[1], 10, 32)
	if err != nil || e < -1 {
		return logMeta{}, fmt.Errorf("%w: leader epoch %q", ErrCorruptState, lines[1])
	}
	m.leaderEpoch = int32(e)
	if m.logStart, err = strconv.ParseInt(lines[2], 10, 64); err != nil || m.logStart < 0 {
		return logMeta{}, fmt.Errorf("%w: log start %q", ErrCorruptState, lines[2])
	}
	p, off, ok := strings.Cut(lines[3], " ")
	if !ok || (p != "none" && p != "truncate" && p != "full") {
		return logMeta{}, fmt.Errorf("%w: pending %q", ErrCorruptState, lines[3])
	}
	m.pending = p
	if m.pendingOff, err = strconv.ParseInt(off, 10, 64); err != nil {
		return logMeta{}, fmt.Errorf("%w: pending offset %q", ErrCorruptState, off)
	}
	return m, nil
}

// writeFileAtomic writes name in dir via a temp file, fsync, rename and an
// fsync of the directory.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("fetcher: write %s: %w", name, err)
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("fetcher: write %s: %w", name, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (l *FileLog) path(name string) string { return filepath.Join(l.dir, name) }

func (l *FileLog) writeMeta(m logMeta) error {
	return writeFileAtomic(l.dir, StateFileName, encodeMeta(m))
}

func (l *FileLog) metaLocked() logMeta {
	return logMeta{leaderEpoch: l.st.leaderEpoch, logStart: l.st.logStart, pending: "none", pendingOff: -1}
}

// listSegments returns the base offsets of the <20 digits>.log files.
func (l *FileLog) listSegments() ([]int64, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("fetcher: list %s: %w", l.dir, err)
	}
	var bases []int64
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(l.path(name))
			continue
		}
		stem, ok := strings.CutSuffix(name, ".log")
		if !ok || len(stem) != 20 {
			continue
		}
		b, err := strconv.ParseInt(stem, 10, 64)
		if err != nil || b < 0 {
			continue
		}
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

func (l *FileLog) openSegment(base int64, create bool) (*segment, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_EXCL
	}
	lf, err := os.OpenFile(l.path(segName(base, ".log")), flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fetcher: open segment: %w", err)
	}
	xf, err := os.OpenFile(l.path(segName(base, ".index")), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("fetcher: open index: %w", err)
	}
	return &segment{base: base, log: lf, idx: xf, end: base}, nil
}

func (l *FileLog) newSegmentLocked(base int64) (*segment, error) {
	_ = os.Remove(l.path(segName(base, ".index")))
	s, err := l.openSegment(base, true)
	if err != nil {
		return nil, err
	}
	if err := syncDir(l.dir); err != nil {
		s.close()
		return nil, fmt.Errorf("fetcher: sync dir: %w", err)
	}
	l.segs = append(l.segs, s)
	return s, nil
}

func (s *segment) close() {
	s.log.Close()
	s.idx.Close()
}

func (l *FileLog) removeSegment(s *segment) error {
	s.close()
	if err := os.Remove(l.path(segName(s.base, ".log"))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("fetcher: remove segment: %w", err)
	}
	if err := os.Remove(l.path(segName(s.base, ".index"))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("fetcher: remove index: %w", err)
	}
	return nil
}

// addIndex applies Kafka's sparse index rule to a batch at pos: an entry when
// more than IndexIntervalBytes were appended since the last one.
func (s *segment) addIndex(info batchInfo, pos int64, interval int64) bool {
	added := false
	if s.sinceIndex > interval {
		s.index = append(s.index, indexEntry{rel: int32(info.last - s.base), pos: int32(pos)})
		s.sinceIndex = 0
		added = true
	}
	s.sinceIndex += int64(info.size)
	return added
}

func (s *segment) indexBytes() []byte {
	out := make([]byte, 8*len(s.index))
	for i, e := range s.index {
		binary.BigEndian.PutUint32(out[8*i:], uint32(e.rel))
		binary.BigEndian.PutUint32(out[8*i+4:], uint32(e.pos))
	}
	return out
}

// syncIndexFile makes the index file equal the in-memory index.
func (s *segment) syncIndexFile() error {
	want := s.indexBytes()
	have, err := io.ReadAll(io.NewSectionReader(s.idx, 0, math.MaxInt64))
	if err != nil {
		return fmt.Errorf("fetcher: read index: %w", err)
	}
	if bytes.Equal(have, want) {
		return nil
	}
	if err := s.idx.Truncate(0); err != nil {
		return fmt.Errorf("fetcher: rewrite index: %w", err)
	}
	if _, err := s.idx.WriteAt(want, 0); err != nil {
		return fmt.Errorf("fetcher: rewrite index: %w", err)
	}
	return nil
}

// scan reads the segment's batches from position 0, rebuilding its index and
// end offset and calling fn for each valid batch. Batches must start at or
// after lower. verify checks every CRC; otherwise only headers are read (and
// control batches whole). It returns cut=true when it stopped before the end
// of the file on a torn or invalid batch; s.size is then the valid prefix.
func (s *segment) scan(lower int64, verify bool, interval int64, fn func(batchInfo)) (cut bool, err error) {
	fi, err := s.log.Stat()
	if err != nil {
		return false, fmt.Errorf("fetcher: stat segment: %w", err)
	}
	total := fi.Size()
	s.index, s.sinceIndex, s.end = s.index[:0], 0, s.base
	lower = max(lower, s.base)
	hdr := make([]byte, records.HeaderSize)
	var buf []byte
	var pos int64
	defer func() { s.size, s.wbPos = pos, pos }()
	for pos < total {
		if total-pos < records.HeaderSize {
			return true, nil
		}
		if _, err := s.log.ReadAt(hdr, pos); err != nil {
			return false, fmt.Errorf("fetcher: read segment: %w", err)
		}
		info := headerInfo(hdr)
		if hdr[16] != 2 || info.size < records.HeaderSize || int64(info.size) > total-pos ||
			info.base < lower || info.last < info.base || info.last-s.base > math.MaxInt32 {
			return true, nil
		}
		if verify || info.control {
			if cap(buf) < info.size {
				buf = make([]byte, info.size)
			}
			buf = buf[:info.size]
			if _, err := s.log.ReadAt(buf, pos); err != nil {
				return false, fmt.Errorf("fetcher: read segment: %w", err)
			}
			full, err := checkBatch(buf)
			if err != nil {
				return true, nil
			}
			info = full
		}
		info.pos = int(pos)
		s.addIndex(info, pos, interval)
		fn(info)
		pos += int64(info.size)
		lower = info.next()
		s.end = info.next()
	}
	return false, nil
}

func (l *FileLog) recover() error {
	meta := logMeta{leaderEpoch: -1, logStart: -1, pending: "none", pendingOff: -1}
	data, err := os.ReadFile(l.path(StateFileName))
	haveMeta := err == nil
	switch {
	case err == nil:
		if meta, err = decodeMeta(data); err != nil {
			return err
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return fmt.Errorf("fetcher: read state: %w", err)
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	if meta.pending == "full" {
		for _, b := range bases {
			_ = os.Remove(l.path(segName(b, ".log")))
			_ = os.Remove(l.path(segName(b, ".index")))
		}
		bases = nil
		meta.logStart = meta.pendingOff
	}
	if meta.logStart < 0 {
		meta.logStart = l.opts.StartOffset
		if len(bases) > 0 {
			meta.logStart = bases[0]
		}
	}
	l.st = newLogState(meta.logStart)
	l.st.leaderEpoch = meta.leaderEpoch
	if len(bases) == 0 {
		if _, err := l.newSegmentLocked(meta.logStart); err != nil {
			return err
		}
	}
	for _, b := range bases {
		s, err := l.openSegment(b, false)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	if err := l.scanAllLocked(true); err != nil {
		return err
	}
	// The epoch cache is the one the batches give (scanAllLocked assigned
	// every batch's epoch, as Kafka does on append): the batches are the
	// truth, and the checkpoint, written for Kafka's tools, may be behind or
	// ahead of what survived a crash. It is rewritten below if it differs.
	l.st.hw = l.st.logEnd
	if meta.pending == "truncate" {
		if err := l.truncateLocked(meta.pendingOff); err != nil {
			return err
		}
	}
	if data, err := os.ReadFile(l.path(CheckpointFileName)); err == nil {
		l.ckpt = data
	}
	if err := l.writeCheckpointLocked(); err != nil {
		return err
	}
	want := l.metaLocked()
	if !haveMeta || meta != want {
		return l.writeMeta(want)
	}
	return nil
}

// scanAllLocked rescans every segment, rebuilding indexes, producer state,
// the batch-derived epoch cache and the log end. verifyLast verifies the CRCs
// of the last segment. The first invalid batch cuts the log there: the file is
// truncated and later segments are removed.
func (l *FileLog) scanAllLocked(verifyLast bool) error {
	start, le := l.st.logStart, l.st.leaderEpoch
	l.st = newLogState(start)
	l.st.leaderEpoch = le
	lower := int64(0)
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		cut, err := s.scan(lower, verifyLast && i == len(l.segs)-1, l.opts.IndexIntervalBytes, l.st.apply)
		if err != nil {
			return err
		}
		if !cut && i < len(l.segs)-1 && l.segs[i+1].base < s.end {
			cut = true // the next segment overlaps this one: keep this one
		}
		if cut {
			if err := s.log.Truncate(s.size); err != nil {
				return fmt.Errorf("fetcher: cut segment: %w", err)
			}
			if err := s.log.Sync(); err != nil {
				return fmt.Errorf("fetcher: sync segment: %w", err)
			}
			for _, later := range l.segs[i+1:] {
				if err := l.removeSegment(later); err != nil {
					return err
				}
			}
			l.segs = l.segs[:i+1]
		}
		if err := s.syncIndexFile(); err != nil {
			return err
		}
		lower = s.end
	}
	last := l.segs[len(l.segs)-1]
	l.st.logEnd = max(last.end, l.st.logStart)
	l.st.hw = l.st.logEnd
	return nil
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

// rollLocked fsyncs the active segment and starts a new one at base.
func (l *FileLog) rollLocked(base int64) error {
	old := l.active()
	if err := old.log.Sync(); err != nil {
		return fmt.Errorf("fetcher: sync segment: %w", err)
	}
	if err := old.idx.Sync(); err != nil {
		return fmt.Errorf("fetcher: sync index: %w", err)
	}
	l.unflushed = 0
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
	if err := l.active().log.Sync(); err != nil {
		return fmt.Errorf("fetcher: fsync: %w", err)
	}
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
	if l.closed {
		return ErrClosed
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
	if l.closed {
		return 0, ErrClosed
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

// Truncate implements Log. The truncation is recorded in the state file
// first, so a crash in the middle is completed by the next open.
func (l *FileLog) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := checkOffset(offset); err != nil {
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
// logEnd, or a no-op). It does not touch the state file.
func (l *FileLog) truncateLocked(offset int64) error {
	if offset >= l.st.logEnd || offset <= l.st.logStart {
		return nil
	}
	for len(l.segs) > 1 && l.active().base >= offset {
		if err := l.removeSegment(l.active()); err != nil {
			return err
		}
		l.segs = l.segs[:len(l.segs)-1]
	}
	s := l.active()
	cutPos, err := l.firstPosAtOrAfter(s, offset)
	if err != nil {
		return err
	}
	if cutPos < s.size {
		if err := s.log.Truncate(cutPos); err != nil {
			return fmt.Errorf("fetcher: truncate segment: %w", err)
		}
		if err := s.log.Sync(); err != nil {
			return fmt.Errorf("fetcher: sync segment: %w", err)
		}
	}
	epochs, hw := l.st.epochs, l.st.hw
	if err := l.scanAllLocked(false); err != nil {
		return err
	}
	newEnd := max(offset, l.st.logEnd)
	if newEnd > l.active().end {
		if _, err := l.newSegmentLocked(newEnd); err != nil {
			return err
		}
		l.active().end = newEnd
	}
	l.st.logEnd = newEnd
	epochs.TruncateFromEnd(newEnd)
	l.st.epochs = epochs
	l.st.hw = min(hw, newEnd)
	return nil
}

// firstPosAtOrAfter returns the position of the first batch of s with base >=
// offset (s.size when none).
func (l *FileLog) firstPosAtOrAfter(s *segment, offset int64) (int64, error) {
	pos, _, err := l.locate(s, offset-1, func(b batchInfo) bool { return b.base >= offset })
	return pos, err
}

// locate starts at the index entry for target and scans headers until stop
// returns true for a batch; it returns that batch's position (s.size when no
// batch matches) and header.
func (l *FileLog) locate(s *segment, target int64, stop func(batchInfo) bool) (int64, batchInfo, error) {
	var pos int64
	i := sort.Search(len(s.index), func(i int) bool { return s.base+int64(s.index[i].rel) > target })
	if i > 0 {
		pos = int64(s.index[i-1].pos)
	}
	hdr := make([]byte, records.HeaderSize)
	for pos+records.HeaderSize <= s.size {
		if _, err := s.log.ReadAt(hdr, pos); err != nil {
			return 0, batchInfo{}, fmt.Errorf("fetcher: read segment: %w", err)
		}
		b := headerInfo(hdr)
		if b.size < records.HeaderSize {
			return 0, batchInfo{}, fmt.Errorf("fetcher: segment %d corrupt at %d: %w", s.base, pos, records.ErrCorrupt)
		}
		if stop(b) {
			return pos, b, nil
		}
		pos += int64(b.size)
	}
	return s.size, batchInfo{}, nil
}

// TruncateFullyAndStartAt implements Log.
func (l *FileLog) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := checkOffset(offset); err != nil {
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
	for _, s := range l.segs {
		if err := l.removeSegment(s); err != nil {
			return err
		}
	}
	l.segs = nil
	l.unflushed = 0
	l.st.resetTo(offset)
	if _, err := l.newSegmentLocked(offset); err != nil {
		return err
	}
	if err := l.writeCheckpointLocked(); err != nil {
		return err
	}
	return l.writeMeta(l.metaLocked())
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
		out := make([]byte, n)
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
	if l.closed {
		return 0, ErrClosed
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
// FsyncNever) and writes the leader-epoch checkpoint if it changed.
func (l *FileLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.flushLocked()
}

func (l *FileLog) flushLocked() error {
	if l.opts.Fsync != FsyncNever && l.unflushed > 0 {
		if err := l.syncDataLocked(); err != nil {
			return err
		}
	}
	return l.writeCheckpointLocked()
}

// Close implements Log: it flushes (as Flush), closes the files and releases
// the lock.
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
