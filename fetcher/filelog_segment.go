package fetcher

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/records"
)

type indexEntry struct {
	rel int32 // last offset of the batch at pos, relative to the segment base
	pos int32
}

type segment struct {
	base       int64
	log, idx   *cachedFile // opened on demand through the FileLog's FileCache
	size       int64
	index      []indexEntry
	sinceIndex int64
	end        int64 // next offset after the last batch; base when empty
	wbPos      int64 // writeback was started for [0, wbPos) (see startWriteback)
	// synced is the size of the prefix known durable (fsynced), and
	// syncedEnd the log end when it was synced: the active segment's flush
	// point in the recovery point.
	synced, syncedEnd int64
	crcChecked        int // batches whose CRC the last scan checked
}

func segName(base int64, ext string) string { return fmt.Sprintf("%020d%s", base, ext) }

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

// openSegment opens base's existing segment. A missing index is not created
// (s.idx is nil) until openIndex: recovery modifies nothing before it has
// validated everything.
func (l *FileLog) openSegment(base int64) (*segment, error) {
	lf, err := l.files.openFile(l.path(segName(base, ".log")), os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("fetcher: open segment: %w", err)
	}
	s := &segment{base: base, log: lf, end: base, syncedEnd: base}
	xf, err := l.files.openFile(l.path(segName(base, ".index")), os.O_RDWR)
	switch {
	case err == nil:
		s.idx = xf
	case !errors.Is(err, os.ErrNotExist):
		err = l.openIndex(s)
	default:
		err = nil
	}
	if err != nil {
		_ = lf.close()
		return nil, err
	}
	return s, nil
}

// openIndex gives s its index file when it has none: a lazyFile, created by
// its first use (an empty index that is missing stays missing).
func (l *FileLog) openIndex(s *segment) error {
	if s.idx != nil {
		return nil
	}
	s.idx = l.files.lazyFile(l.path(segName(s.base, ".index")))
	return nil
}

// newSegmentLocked creates base's segment file; its index file is created
// with its first entry (FileCache.lazyFile), so an empty log holds one file.
func (l *FileLog) newSegmentLocked(base int64) (*segment, error) {
	_ = os.Remove(l.path(segName(base, ".index")))
	lf, err := l.files.openFile(l.path(segName(base, ".log")), os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, fmt.Errorf("fetcher: open segment: %w", err)
	}
	s := &segment{base: base, log: lf, end: base, syncedEnd: base, idx: l.files.lazyFile(l.path(segName(base, ".index")))}
	l.dirUnsynced = true // synced with the first data (syncDataLocked)
	l.segs = append(l.segs, s)
	return s, nil
}

func (s *segment) close() {
	_ = s.log.close()
	_ = s.idx.close()
}

func (l *FileLog) removeSegment(s *segment) error {
	s.close()
	return l.removeSegmentFiles(s.base)
}

// removeSegmentFiles removes the .log and .index files of base.
func (l *FileLog) removeSegmentFiles(base int64) error {
	if err := os.Remove(l.path(segName(base, ".log"))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("fetcher: remove segment: %w", err)
	}
	if err := os.Remove(l.path(segName(base, ".index"))); err != nil && !errors.Is(err, os.ErrNotExist) {
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
	if len(want) == 0 && s.idx.create {
		// An empty index not created yet (lazyFile): its absence is equal.
		if _, err := os.Stat(s.idx.path); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	have, err := s.idx.readAll()
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

// badSpot is where a segment scan met data it could not accept.
type badSpot struct {
	pos    int64 // byte position of the bad batch (or of the missing data)
	offset int64 // the base offset of the bad batch when readable, else the end of the data before it
	reason error
}

// scan reads the segment's batches from position 0 to the end of the file
// (or to stop, when that comes first),
// rebuilding its index, end offset and size (the valid prefix) and calling fn
// for each valid batch. Batches must start at or after lower; the CRC of
// every batch at or past position verifyFrom is checked, below it only
// headers are read (and control batches whole, CRC included). A
// batch that starts below flushed must end at or below it (the flush point
// is a batch boundary). It returns the first bad batch, nil when the whole
// file is valid; the file is never modified.
func (s *segment) scan(lower, flushed, stop, verifyFrom int64, interval int64, fn func(batchInfo)) (*badSpot, error) {
	fi, err := s.log.Stat()
	if err != nil {
		return nil, fmt.Errorf("fetcher: stat segment: %w", err)
	}
	total := min(fi.Size(), stop)
	s.index, s.sinceIndex, s.end, s.crcChecked = s.index[:0], 0, s.base, 0
	lower = max(lower, s.base)
	hdr := make([]byte, records.HeaderSize)
	var buf []byte
	var pos int64
	defer func() { s.size, s.wbPos = pos, pos }()
	for pos < total {
		if total-pos < records.HeaderSize {
			return &badSpot{pos, lower, fmt.Errorf("%w: %d bytes left, less than a batch header", records.ErrCorrupt, total-pos)}, nil
		}
		if _, err := s.log.ReadAt(hdr, pos); err != nil {
			return nil, fmt.Errorf("fetcher: read segment: %w", err)
		}
		info := headerInfo(hdr)
		if reason := headerProblem(hdr, info, total-pos, lower, s.base); reason != nil {
			return &badSpot{pos, lower, reason}, nil
		}
		if pos < flushed && pos+int64(info.size) > flushed {
			return &badSpot{pos, info.base, fmt.Errorf("%w: batch of %d bytes crosses the flush point %d", ErrSegmentMismatch, info.size, flushed)}, nil
		}
		if pos >= verifyFrom || info.control {
			if cap(buf) < info.size {
				buf = make([]byte, info.size)
			}
			buf = buf[:info.size]
			if _, err := s.log.ReadAt(buf, pos); err != nil {
				return nil, fmt.Errorf("fetcher: read segment: %w", err)
			}
			full, err := checkBatch(buf)
			if err != nil {
				return &badSpot{pos, info.base, err}, nil
			}
			s.crcChecked++
			info = full
		}
		info.pos = int(pos)
		s.addIndex(info, pos, interval)
		fn(info)
		pos += int64(info.size)
		lower = info.next()
		s.end = info.next()
	}
	return nil, nil
}

// headerProblem checks what a batch header alone can tell: the magic byte, a
// size that fits in the left bytes of the file, offsets at or after lower and
// within the segment's int32 range. It returns nil when they are fine.
func headerProblem(hdr []byte, info batchInfo, left, lower, base int64) error {
	switch {
	case hdr[16] != 2:
		return fmt.Errorf("%w: magic byte %d", records.ErrCorrupt, hdr[16])
	case info.size < records.HeaderSize || int64(info.size) > left:
		return fmt.Errorf("%w: batch size %d with %d bytes left in the file", records.ErrCorrupt, info.size, left)
	case info.base < lower:
		return fmt.Errorf("%w: batch base offset %d below %d", records.ErrCorrupt, info.base, lower)
	case info.last < info.base || info.last-base > math.MaxInt32:
		return fmt.Errorf("%w: batch offsets %d..%d", records.ErrCorrupt, info.base, info.last)
	}
	return nil
}
