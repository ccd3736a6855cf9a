package statelog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/records"
)

// DefaultCompactMinRecords is the default of Options.CompactMinRecords.
const DefaultCompactMinRecords = 10_000

// Options configures a Log. The zero value is valid.
type Options struct {
	// CompactMinRecords is the segment size, in records, below which the log never
	// compacts (default DefaultCompactMinRecords).
	CompactMinRecords int64
}

// KV is one record to append: Value nil is a tombstone.
type KV struct {
	Key, Value []byte
}

// Stats describes a Log (for tests and monitoring).
type Stats struct {
	Records     int64 // records in the segment
	Live        int64 // records the last compaction kept (or found at open)
	Bytes       int64 // segment size
	NextOffset  int64
	Compactions int
	// CompactErr is the error of the last failed compaction (nil when the last one
	// succeeded); a failed compaction loses nothing and is retried later.
	CompactErr error
	// CutBytes is the size of the torn tail the open cut (0 when none).
	CutBytes int64
}

// Log is one compacted state log (see the package documentation). It is safe for
// concurrent use; calls are serialized. The caller locks the directory against other
// processes.
type Log struct {
	dir  string
	opts Options

	mu      sync.Mutex
	f       *os.File
	segPath string     // path of the segment f (f.Name() may be the compaction's temp name)
	ck      checkpoint // last checkpoint written
	size    int64
	next    int64
	total   int64 // records in the segment
	broken  error
	closed  bool
	stats   Stats
	// compactAt is the record count at which the next compaction is tried.
	compactAt int64
}

// Open opens the log in dir, creating it when missing, and recovers it (see the package
// documentation): a torn tail is cut; corruption is a *CorruptError and a newer format
// a *VersionError.
func Open(dir string, opts Options) (*Log, error) {
	if opts.CompactMinRecords <= 0 {
		opts.CompactMinRecords = DefaultCompactMinRecords
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("statelog: create %s: %w", dir, err)
	}
	ck, ok, err := readCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts}
	if !ok {
		err = l.create()
	} else {
		err = l.settle(ck)
	}
	if err != nil {
		return nil, err
	}
	if err := l.recover(); err != nil {
		l.f.Close()
		return nil, err
	}
	return l, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// create starts an empty log: checkpoint first, so that a segment never exists
// without one.
func (l *Log) create() error {
	if names, err := l.files(); err != nil {
		return err
	} else if len(names) > 0 {
		return &CorruptError{Path: l.dir, Position: -1, Reason: fmt.Sprintf("segment files %v without %s", names, CheckpointFile)}
	}
	if err := writeCheckpoint(l.dir, checkpoint{}); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path(segName(0, segmentExt)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("statelog: create segment: %w", err)
	}
	l.f, l.segPath = f, l.path(segName(0, segmentExt))
	return syncDir(l.dir)
}

// files lists the segment and cleaned files of the directory.
func (l *Log) files() ([]string, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("statelog: list %s: %w", l.dir, err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, segmentExt) || strings.HasSuffix(n, cleanedExt) {
			out = append(out, n)
		}
	}
	return out, nil
}

// settle finishes or undoes an interrupted compaction, so that exactly the segment the
// checkpoint names is left, and opens it.
func (l *Log) settle(ck checkpoint) error {
	cleaned := segName(ck.base, cleanedExt)
	seg := segName(ck.base, segmentExt)
	if ck.swap {
		if _, err := os.Stat(l.path(cleaned)); err == nil {
			if err := os.Rename(l.path(cleaned), l.path(seg)); err != nil {
				return fmt.Errorf("statelog: finish compaction: %w", err)
			}
		}
	}
	names, err := l.files()
	if err != nil {
		return err
	}
	for _, n := range names {
		_, isSeg := parseSegName(n, segmentExt)
		switch {
		case n == seg:
		case strings.HasSuffix(n, cleanedExt) || (ck.swap && isSeg):
			// an unfinished compaction's output, or the segment a finished one replaced
			if err := os.Remove(l.path(n)); err != nil {
				return fmt.Errorf("statelog: remove %s: %w", n, err)
			}
		default:
			return &CorruptError{Path: l.path(n), Position: -1, Reason: fmt.Sprintf("unexpected segment next to %s", seg)}
		}
	}
	f, err := os.OpenFile(l.path(seg), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return &CorruptError{Path: l.path(seg), Position: -1, Reason: "the segment the checkpoint names is missing"}
	}
	if err != nil {
		return fmt.Errorf("statelog: open segment: %w", err)
	}
	l.f, l.segPath = f, l.path(seg)
	if ck.swap {
		ck.swap = false
		if err := syncDir(l.dir); err != nil {
			return err
		}
		if err := writeCheckpoint(l.dir, ck); err != nil {
			return err
		}
	}
	l.ck = ck
	return nil
}

// recover scans the segment, cuts a torn tail and sets the log's counters.
func (l *Log) recover() error {
	fi, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("statelog: stat segment: %w", err)
	}
	size := fi.Size()
	if size < l.ck.clean {
		return &CorruptError{Path: l.segPath, Position: size,
			Reason: fmt.Sprintf("segment is shorter than its checkpointed %d whole bytes", l.ck.clean)}
	}
	br := newBatchReader(l.f, size, l.ck.base)
	var total int64
	for {
		b, bad, err := br.next()
		if err != nil {
			return err
		}
		if bad != nil {
			if err := l.cutTail(br, size, bad); err != nil {
				return err
			}
			size = br.pos
			break
		}
		if b == nil {
			break
		}
		total += int64(b.NumRecords())
	}
	l.size, l.total = size, total
	l.next = max(br.prevNext, l.ck.next)
	l.stats.Live = l.ck.live
	l.compactAt = max(2*l.ck.live, l.opts.CompactMinRecords)
	return nil
}

// cutTail cuts the segment at the invalid batch br stopped at when it is a torn tail,
// and returns a *CorruptError otherwise.
func (l *Log) cutTail(br *batchReader, size int64, bad *badBatch) error {
	if br.pos < l.ck.clean {
		return &CorruptError{Path: l.segPath, Position: br.pos, Reason: bad.reason + " inside the checkpointed whole prefix"}
	}
	more, err := validBatchAfter(l.f, br.pos, size, br.prevNext)
	if err != nil {
		return err
	}
	if more {
		return &CorruptError{Path: l.segPath, Position: br.pos, Reason: bad.reason + ", followed by more data (not a torn tail)"}
	}
	if err := l.f.Truncate(br.pos); err != nil {
		return fmt.Errorf("statelog: cut torn tail: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("statelog: cut torn tail: %w", err)
	}
	l.stats.CutBytes = size - br.pos
	return nil
}

// Append writes recs as one batch at the next offsets and fsyncs it before it returns
// the first offset. On an error nothing of recs is in the log.
func (l *Log) Append(recs []KV) (int64, error) {
	if len(recs) == 0 {
		return 0, errors.New("statelog: append of no records")
	}
	rs := make([]records.Record, len(recs))
	for i, r := range recs {
		rs[i] = records.Record{Key: r.Key, Value: r.Value}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if l.broken != nil {
		return 0, fmt.Errorf("%w: %w", ErrBroken, l.broken)
	}
	first := l.next
	batch, err := records.BuildBatch(records.BatchSpec{BaseOffset: first, ProducerID: -1, ProducerEpoch: -1,
		BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()}, rs)
	if err != nil {
		return 0, fmt.Errorf("statelog: build batch: %w", err)
	}
	if err := l.write(batch); err != nil {
		return 0, err
	}
	l.size += int64(len(batch))
	l.next += int64(len(recs))
	l.total += int64(len(recs))
	if l.total >= l.compactAt {
		l.compactLocked()
	}
	return first, nil
}

// write appends batch at the end of the segment and fsyncs it; on a failure it cuts
// the segment back and returns the error (or marks the log broken when even that
// fails).
func (l *Log) write(batch []byte) error {
	_, err := l.f.WriteAt(batch, l.size)
	if err == nil {
		if err = l.f.Sync(); err == nil {
			return nil
		}
		err = fmt.Errorf("statelog: fsync %s: %w", l.segPath, err)
	} else {
		err = fmt.Errorf("statelog: write %s: %w", l.segPath, err)
	}
	if terr := l.f.Truncate(l.size); terr != nil {
		l.broken = errors.Join(err, terr)
	} else if serr := l.f.Sync(); serr != nil {
		l.broken = errors.Join(err, serr)
	}
	return err
}

// Replay calls fn with every record of the segment in offset order (superseded values
// included until a compaction drops them). key and value alias a buffer reused for the
// next batch; fn must copy what it keeps and must not call the Log.
func (l *Log) Replay(ctx context.Context, fn func(offset int64, key, value []byte) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return replaySegment(ctx, l.f, l.segPath, l.size, l.ck.base, fn)
}

func replaySegment(ctx context.Context, f *os.File, path string, size, base int64, fn func(int64, []byte, []byte) error) error {
	br := newBatchReader(f, size, base)
	for n := 0; ; n++ {
		if n&255 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		pos := br.pos
		b, bad, err := br.next()
		if err != nil {
			return err
		}
		if bad != nil {
			return &CorruptError{Path: path, Position: pos, Reason: bad.reason + " (changed since open)"}
		}
		if b == nil {
			return nil
		}
		recs, err := b.Records()
		if err != nil {
			return &CorruptError{Path: path, Position: pos, Reason: err.Error()}
		}
		for _, r := range recs {
			if err := fn(b.BaseOffset()+int64(r.OffsetDelta), r.Key, r.Value); err != nil {
				return err
			}
		}
	}
}

// NextOffset is the offset the next appended record gets.
func (l *Log) NextOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Records, s.Bytes, s.NextOffset = l.total, l.size, l.next
	return s
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Close records the whole segment as clean in the checkpoint (when the log is not
// broken) and closes the file. A second Close returns ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	var err error
	if l.broken == nil && (l.ck.clean != l.size || l.ck.next != l.next) {
		ck := l.ck
		ck.clean, ck.next = l.size, l.next
		err = writeCheckpoint(l.dir, ck)
	}
	return errors.Join(err, l.f.Close())
}
