package fetcher

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/internal/atomicfile"
)

// segPlan is one segment as recovery expects to find it.
type segPlan struct {
	base     int64
	onDisk   bool
	expected bool    // listed by the recovery point (every segment of a log without one)
	known    bool    // mark is the recovery point's record
	rolled   bool    // rolled: every byte of it must be valid
	mark     segMark // for the active segment, size is its flush point
}

// recovery is what OpenFileLog decided while validating, applied only once
// every segment passed: a torn tail to cut, segment files to remove, a
// missing empty active segment to create.
type recovery struct {
	cut      *segment // cut at cutPos, nil for none
	cutPos   int64
	remove   []int64  // base offsets of segment files to remove
	create   int64    // base of an active segment to create, -1 for none
	activeAt int64    // the recovery point's log end of the active segment, -1 when it was not kept whole
	rpTime   fileTime // when the recovery point was written; zero when unknown
	discards []Discard
}

func (l *FileLog) readMeta() (logMeta, bool, error) {
	meta := logMeta{leaderEpoch: -1, logStart: -1, pending: "none", pendingOff: -1}
	data, err := os.ReadFile(l.path(StateFileName))
	switch {
	case err == nil:
		m, seq, slot, err := decodeStateFile(data)
		l.metaSeq, l.metaSlot = seq, slot
		return m, true, err
	case errors.Is(err, os.ErrNotExist):
		return meta, false, nil
	default:
		return meta, false, fmt.Errorf("fetcher: read state: %w", err)
	}
}

func (l *FileLog) recover() error {
	meta, haveMeta, err := l.readMeta()
	if err != nil {
		return err
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	var rp *recoveryPoint
	if meta.pending == "full" {
		// A full truncation was under way: its segments go, and the
		// recovery point written before it is void.
		for _, b := range bases {
			if err := l.removeSegmentFiles(b); err != nil {
				return err
			}
		}
		bases = nil
		meta.logStart = meta.pendingOff
	} else if rp, err = l.readRecoveryPoint(); err != nil {
		return err
	}
	if meta.logStart < 0 {
		meta.logStart = l.opts.StartOffset
		if len(bases) > 0 {
			meta.logStart = bases[0]
		}
	}
	l.st = newLogState(meta.logStart)
	l.st.leaderEpoch = meta.leaderEpoch
	trunc := int64(-1)
	if meta.pending == "truncate" {
		trunc = meta.pendingOff
	}
	var rpTime fileTime
	if rp != nil {
		rpTime, _ = modTime(l.path(RecoveryPointFileName))
	}
	if err := l.loadSegments(planSegments(bases, rp), trunc, rpTime); err != nil {
		return err
	}
	// The epoch cache is the one the batches give (the scan assigned every
	// batch's epoch, as Kafka does on append): the batches are the truth,
	// and the checkpoint, written for Kafka's tools, may be behind or ahead
	// of what survived a crash. It is rewritten below if it differs.
	l.st.hw = l.st.logEnd
	if trunc >= 0 {
		if err := l.truncateLocked(trunc); err != nil {
			return err
		}
	}
	// A log with a leader epoch holds no batch above it: the fetch loop
	// fences a batch of a higher epoch (EpochFencingError), the log's own
	// batches are written at it, and it only rises. A bump made durable with
	// the batches appended after it (BumpLeaderEpochUnsynced) can be lost by
	// a crash that kept some of those batches: the leader epoch comes back to
	// the epoch of the last batch then (and is written below), never below
	// it. (A log without one, written by Append alone, is left as it is.)
	if latest := l.st.epochs.LatestEpoch(); l.st.leaderEpoch >= 0 && latest > l.st.leaderEpoch {
		l.st.leaderEpoch = latest
	}
	// A new, empty log writes no recovery point, and a log that never had a
	// leader epoch nor a log start past its first segment's base no state
	// file: their absence opens it the same way (its one segment recovered
	// from 0; no epoch, the log start at that base), and a start of thousands
	// of partitions then costs no fsync for either. The first flush of data
	// writes the recovery point, a bump of the leader epoch the state file.
	empty := rp == nil && len(l.segs) == 1 && l.active().size == 0 && l.st.logStart == l.active().base
	if empty {
		l.rpData = encodeRecoveryPoint(l.recoveryPointLocked())
	}
	if err := l.writeRecoveryPoint(l.recoveryPointLocked()); err != nil {
		return err
	}
	if data, err := os.ReadFile(l.path(CheckpointFileName)); err == nil {
		l.ckpt = data
	} else if errors.Is(err, os.ErrNotExist) {
		l.ckpt = epoch.EncodeCheckpoint(nil) // no file: no epoch to record yet
	}
	if err := l.writeCheckpointLocked(); err != nil {
		return err
	}
	l.rpAt = time.Now()
	want := l.metaLocked()
	if !haveMeta && want.leaderEpoch == -1 && want.logStart == l.segs[0].base {
		return nil // what the absence of the file gives
	}
	if !haveMeta || meta != want {
		return l.writeMeta(want)
	}
	return nil
}

// planSegments merges the segment files found with the recovery point. A
// log without one (new, or written before recovery points existed) has every
// file but the last rolled, of unknown size, and the last one active with its
// flush point at 0: it is recovered whole, as before.
func planSegments(bases []int64, rp *recoveryPoint) []segPlan {
	if rp == nil {
		plans := make([]segPlan, len(bases))
		for i, b := range bases {
			plans[i] = segPlan{base: b, onDisk: true, expected: true, rolled: i < len(bases)-1, mark: segMark{b, 0, b}}
		}
		return plans
	}
	byBase := map[int64]*segPlan{}
	for i, m := range append(rp.rolled, rp.active) {
		byBase[m.base] = &segPlan{base: m.base, expected: true, known: true, rolled: i < len(rp.rolled), mark: m}
	}
	for _, b := range bases {
		if p := byBase[b]; p != nil {
			p.onDisk = true
		} else {
			byBase[b] = &segPlan{base: b, onDisk: true}
		}
	}
	plans := make([]segPlan, 0, len(byBase))
	for _, p := range byBase {
		plans = append(plans, *p)
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].base < plans[j].base })
	return plans
}

// loadSegments opens and validates the planned segments in order (the CRCs
// verified as verifyFrom says), rebuilding the state; trunc >= 0 is a pending truncation, whose
// segment files not in the recovery point are removed. Nothing is modified
// until every segment passed, so a corruption error leaves the directory
// as it was.
func (l *FileLog) loadSegments(plans []segPlan, trunc int64, rpTime fileTime) error {
	rec := recovery{create: -1, activeAt: -1, rpTime: rpTime}
	lower := int64(0)
	for i, p := range plans {
		if !p.expected && p.onDisk && trunc >= 0 && p.base >= trunc {
			rec.remove = append(rec.remove, p.base)
			continue
		}
		bad, err := l.loadSegment(p, lower, &rec)
		if err != nil {
			return err
		}
		opened := len(l.segs) > 0 && l.active().base == p.base
		if bad != nil && opened && !p.rolled && p.expected && bad.pos >= p.mark.size {
			// A torn tail past the flush point: cut, as Kafka recovers past
			// its recovery point.
			s := l.active()
			rec.cut, rec.cutPos = s, bad.pos
			rec.discards = append(rec.discards, Discard{File: l.path(segName(s.base, ".log")), Position: bad.pos, FromOffset: s.end,
				ToOffset: -1, Bytes: l.fileSize(s.base) - bad.pos, Reason: bad.reason})
			bad = nil
		}
		if bad != nil {
			if !l.opts.RepairCorruption {
				return &CorruptSegmentError{File: l.path(segName(p.base, ".log")), Offset: bad.offset, Position: bad.pos, Reason: bad.reason}
			}
			l.planRepair(plans, i, opened, bad, &rec)
			break
		}
		if len(l.segs) > 0 {
			lower = l.active().end
		}
	}
	return l.applyRecovery(rec)
}

// loadSegment opens and scans one planned segment, appending it to l.segs
// when it exists. It returns where it is bad, nil when it is good.
func (l *FileLog) loadSegment(p segPlan, lower int64, rec *recovery) (*badSpot, error) {
	switch {
	case !p.expected:
		return &badSpot{0, p.base, ErrSegmentUnexpected}, nil
	case !p.onDisk && !p.rolled && p.mark.size == 0:
		rec.create, rec.activeAt = p.base, p.mark.next // nothing flushed was in it
		return nil, nil
	case !p.onDisk:
		return &badSpot{0, lower, ErrSegmentMissing}, nil
	case p.base < lower:
		return &badSpot{0, lower, fmt.Errorf("%w: base %d, end of the segment before %d", ErrSegmentOverlap, p.base, lower)}, nil
	}
	s, err := l.openSegment(p.base)
	if err != nil {
		return nil, err
	}
	l.segs = append(l.segs, s)
	stop := int64(math.MaxInt64)
	if p.rolled && p.known {
		stop = p.mark.size
	}
	bad, err := s.scan(lower, p.mark.size, stop, l.verifyFrom(p, rec.rpTime), l.opts.IndexIntervalBytes, l.st.apply)
	if err != nil || bad != nil {
		return bad, err
	}
	size := l.fileSize(p.base)
	switch {
	case p.rolled && p.known && (size != p.mark.size || s.end != p.mark.next):
		return &badSpot{s.size, s.end, fmt.Errorf("%w: %d bytes ending at offset %d, recorded %d bytes ending at offset %d",
			ErrSegmentMismatch, size, s.end, p.mark.size, p.mark.next)}, nil
	case !p.rolled && size < p.mark.size:
		return &badSpot{size, s.end, fmt.Errorf("%w: %d bytes, %d were flushed", ErrSegmentMismatch, size, p.mark.size)}, nil
	case !p.rolled:
		rec.activeAt = p.mark.next
	}
	return nil, nil
}

// verifyFrom is the position from which loadSegment checks the CRC of p's
// batches. A segment file that has not changed since the recovery point was
// written (its change time is before the recovery point's modification time,
// both on the file system's clock) holds, up to its recorded size, data that
// was fsynced and CRC-checked when it was appended or opened: only its batch
// headers are read, as Kafka does not recover below its recovery point. A
// file changed since, or any file of a log without a recovery point, is
// checked whole; past the flush point every batch is checked.
func (l *FileLog) verifyFrom(p segPlan, rpTime fileTime) int64 {
	if !p.known || rpTime.zero() {
		return 0
	}
	ct, ok := changeTime(l.path(segName(p.base, ".log")))
	if !ok || !ct.before(rpTime) {
		return 0
	}
	return p.mark.size
}

// fileSize is the size of base's segment file, 0 when it cannot be read.
func (l *FileLog) fileSize(base int64) int64 {
	fi, err := os.Stat(l.path(segName(base, ".log")))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// planRepair cuts the log at bad in plans[i] (RepairCorruption): the segment
// keeps its valid prefix when it exists, and every later segment file goes.
func (l *FileLog) planRepair(plans []segPlan, i int, opened bool, bad *badSpot, rec *recovery) {
	d := Discard{File: l.path(segName(plans[i].base, ".log")), Position: bad.pos, FromOffset: bad.offset, ToOffset: -1, Repaired: true,
		Reason: &CorruptSegmentError{File: l.path(segName(plans[i].base, ".log")), Offset: bad.offset, Position: bad.pos, Reason: bad.reason}}
	if opened {
		s := l.active()
		rec.cut, rec.cutPos = s, bad.pos
		d.FromOffset = s.end
		d.Bytes = l.fileSize(s.base) - bad.pos
	}
	for _, p := range plans[i:] {
		if p.known {
			d.ToOffset = max(d.ToOffset, p.mark.next)
		}
		if p.onDisk && !(opened && p.base == plans[i].base) {
			rec.remove = append(rec.remove, p.base)
			d.Files = append(d.Files, l.path(segName(p.base, ".log")))
			d.Bytes += l.fileSize(p.base)
		}
	}
	rec.discards = append(rec.discards, d)
}

// applyRecovery carries out what loadSegments decided, makes the segments
// durable (the recovered active segment is fsynced: it is the new flush
// point) and sets the log end.
func (l *FileLog) applyRecovery(rec recovery) error {
	for _, b := range rec.remove {
		if err := l.removeSegmentFiles(b); err != nil {
			return err
		}
	}
	if s := rec.cut; s != nil {
		if err := s.log.Truncate(rec.cutPos); err != nil {
			return fmt.Errorf("fetcher: cut segment: %w", err)
		}
		s.size, s.wbPos = rec.cutPos, rec.cutPos
	}
	l.discarded = append(l.discarded, rec.discards...)
	if n := len(rec.discards); n > 0 && rec.discards[n-1].Repaired {
		// The state was built from batches that are gone: build it again.
		if err := l.rebuildStateLocked(); err != nil {
			return err
		}
	}
	if len(l.segs) == 0 && rec.create < 0 {
		rec.create = l.st.logStart
	}
	if rec.create >= 0 {
		if _, err := l.newSegmentLocked(rec.create); err != nil {
			return err
		}
	} else if len(rec.remove) > 0 {
		if err := withFileSlot(func() error { return atomicfile.SyncDir(l.dir) }); err != nil {
			return fmt.Errorf("fetcher: sync dir: %w", err)
		}
	}
	for _, s := range l.segs {
		if err := l.openIndex(s); err != nil {
			return err
		}
		if err := s.syncIndexFile(); err != nil {
			return err
		}
		s.synced, s.syncedEnd = s.size, s.end
	}
	a := l.active()
	if a.size > 0 || rec.cut != nil { // a new, empty segment has nothing to make durable
		if err := a.log.Sync(); err != nil {
			return fmt.Errorf("fetcher: sync segment: %w", err)
		}
	}
	l.st.logEnd = max(a.end, l.st.logStart, rec.activeAt)
	a.syncedEnd = l.st.logEnd
	return nil
}

// rebuildStateLocked rebuilds the producer state, the batch-derived epoch
// cache, the indexes and the log end from the segments' batch headers,
// keeping the log start, the leader epoch and the read-only flag. It
// modifies no file; a segment that does not read back whole (changed under
// the log) is a *CorruptSegmentError.
func (l *FileLog) rebuildStateLocked() error {
	start, le, ro := l.st.logStart, l.st.leaderEpoch, l.st.readOnly
	l.st = newLogState(start)
	l.st.leaderEpoch, l.st.readOnly = le, ro
	lower := int64(0)
	for _, s := range l.segs {
		size := s.size
		bad, err := s.scan(lower, 0, size, math.MaxInt64, l.opts.IndexIntervalBytes, l.st.apply)
		if err != nil {
			return err
		}
		if bad == nil && s.size != size {
			bad = &badSpot{s.size, s.end, fmt.Errorf("%w: %d bytes read back, %d expected", ErrSegmentMismatch, s.size, size)}
		}
		if bad != nil {
			return &CorruptSegmentError{File: l.path(segName(s.base, ".log")), Offset: bad.offset, Position: bad.pos, Reason: bad.reason}
		}
		lower = s.end
	}
	l.st.logEnd = max(l.active().end, start)
	l.st.hw = l.st.logEnd
	return nil
}

// Discarded returns what OpenFileLog removed from the log: a torn tail past
// the active segment's flush point, or the cut made by
// FileLogOptions.RepairCorruption. Empty when nothing was removed.
func (l *FileLog) Discarded() []Discard {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]Discard(nil), l.discarded...)
}
