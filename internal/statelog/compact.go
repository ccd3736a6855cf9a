package statelog

import (
	"context"
	"fmt"
	"math"
	"os"

	"github.com/kmirror/kmirror/records"
)

// compactBatchRecords bounds the records of one batch of a compacted segment.
const compactBatchRecords = 4096

// compactLocked compacts the segment (see the package documentation). A failure before
// the checkpoint switches to the new segment loses nothing: the old segment stays in
// force and the attempt is retried once the log has grown by CompactMinRecords. A
// failure after the switch marks the log broken (Open finishes the switch).
func (l *Log) compactLocked() {
	err := l.compact()
	l.stats.CompactErr = err
	if err != nil {
		l.compactAt = l.total + l.opts.CompactMinRecords
		return
	}
	l.stats.Compactions++
	l.stats.Live = l.total
	l.compactAt = max(2*l.total, l.opts.CompactMinRecords)
}

func (l *Log) compact() error {
	latest := make(map[string]int64)
	ctx := context.Background()
	err := replaySegment(ctx, l.f, l.segPath, l.size, l.ck.base, func(off int64, key, value []byte) error {
		if value == nil {
			latest[string(key)] = -1 - off // a tombstone: dropped, but it supersedes
		} else {
			latest[string(key)] = off
		}
		return nil
	})
	if err != nil {
		return err
	}
	var live []records.Record
	var offsets []int64
	err = replaySegment(ctx, l.f, l.segPath, l.size, l.ck.base, func(off int64, key, value []byte) error {
		if latest[string(key)] == off {
			live = append(live, records.Record{Key: append([]byte(nil), key...), Value: append([]byte(nil), value...)})
			offsets = append(offsets, off)
		}
		return nil
	})
	if err != nil {
		return err
	}
	base := l.next
	if len(offsets) > 0 {
		base = offsets[0]
	}
	data, err := buildCompacted(live, offsets)
	if err != nil {
		return err
	}
	return l.swapIn(base, data, int64(len(live)))
}

// buildCompacted packs the live records, with their offsets, into batches.
func buildCompacted(live []records.Record, offsets []int64) ([]byte, error) {
	var out []byte
	for i := 0; i < len(live); {
		j := i
		for j < len(live) && j-i < compactBatchRecords && offsets[j]-offsets[i] <= math.MaxInt32 {
			live[j].OffsetDelta = int32(offsets[j] - offsets[i])
			j++
		}
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: offsets[i], ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, live[i:j])
		if err != nil {
			return nil, fmt.Errorf("statelog: compact: %w", err)
		}
		out = append(out, b...)
		i = j
	}
	return out, nil
}

// swapIn writes data as the segment "<base>.log" replacing the current one.
func (l *Log) swapIn(base int64, data []byte, live int64) error {
	cleaned := l.path(segName(base, cleanedExt))
	f, err := os.OpenFile(cleaned, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("statelog: compact: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		os.Remove(cleaned)
		return fmt.Errorf("statelog: compact: %w", err)
	}
	ck := checkpoint{base: base, clean: int64(len(data)), next: l.next, live: live, swap: true}
	if err := writeCheckpoint(l.dir, ck); err != nil {
		f.Close()
		os.Remove(cleaned)
		// The old checkpoint may or may not have been replaced: only a reopen knows.
		l.broken = err
		return err
	}
	old, oldPath := l.f, l.segPath
	seg := l.path(segName(base, segmentExt))
	l.f, l.segPath, l.ck, l.size, l.total = f, seg, ck, int64(len(data)), live
	err = os.Rename(cleaned, seg)
	if err == nil && oldPath != seg {
		err = os.Remove(oldPath)
	}
	if err == nil {
		err = syncDir(l.dir)
	}
	if err == nil {
		ck.swap = false
		err = writeCheckpoint(l.dir, ck)
	}
	old.Close()
	if err != nil {
		l.broken = fmt.Errorf("statelog: compact: %w", err)
		return l.broken
	}
	l.ck = ck
	return nil
}
