package reconcile

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/statemachine"
)

// partitionFidelity is what the continuous fidelity check (Runtime.fidelityLoop) and
// the fetcher learned of a partition's source: how far the mirrored log was found
// identical to the source, and the last source end offset read, with when.
type partitionFidelity struct {
	verified   atomic.Int64 // every mirrored batch below it matched the source; -1 = none
	verifiedAt atomic.Int64 // Unix nanoseconds of the last check that reached the source; 0 = none
	gen        atomic.Int64 // raised by every truncation of the log: older check results are dropped
	sweep      atomic.Int64 // next offset of the re-check of verified offsets; -1 = from the log start
	srcEnd     atomic.Pointer[sourceEnd]
}

// sourceEnd is a source high watermark and when it was read.
type sourceEnd struct {
	hw int64
	at time.Time
}

func (f *partitionFidelity) init() { f.verified.Store(-1); f.sweep.Store(-1) }

// noteSourceEnd records a source high watermark read at at.
func (f *partitionFidelity) noteSourceEnd(hw int64, at time.Time) {
	if hw >= 0 {
		f.srcEnd.Store(&sourceEnd{hw: hw, at: at})
	}
}

// truncated forgets what a truncation of the log to end made unverified, and
// lowers the destination's group offsets above the new end (groupsTruncated).
func (r *Partition) fidelityTruncated() {
	if !r.logReady.Load() {
		return
	}
	r.groupsTruncated()
	r.fid.gen.Add(1)
	end := r.log.LogEndOffset()
	for v := r.fid.verified.Load(); v > end; v = r.fid.verified.Load() {
		if r.fid.verified.CompareAndSwap(v, end) {
			break
		}
	}
}

// Fidelity returns the offset below which every mirrored batch the source still holds
// was found identical to the source's (-1 before the first check), and when the
// source last answered a check (zero when never).
func (r *Partition) Fidelity() (verifiedUpTo int64, at time.Time) {
	v := r.fid.verified.Load()
	if v >= 0 && r.logReady.Load() {
		v = min(v, r.log.LogEndOffset())
	}
	if ns := r.fid.verifiedAt.Load(); ns > 0 {
		at = time.Unix(0, ns)
	}
	return v, at
}

// SourceEnd returns the last source high watermark read for the partition (by its
// fetcher or by the fidelity check, which also runs while PAUSED) and when it was
// read; -1 and zero when none.
func (r *Partition) SourceEnd() (int64, time.Time) {
	if e := r.fid.srcEnd.Load(); e != nil {
		at := e.at
		// The fetcher's later answers that moved nothing (fetcher.FetchResult.Unchanged)
		// confirm the same end without reporting it again.
		if last := r.health.lastFetch.Load(); last > 0 && e.hw == r.srcHW.Load() {
			if t := time.Unix(0, last); t.After(at) {
				at = t
			}
		}
		return e.hw, at
	}
	return -1, time.Time{}
}

// fidelityLoop runs the fidelity check of the mirror every fidelity.check.interval.ms
// (re-read every cycle, so an altered config applies at the next one) until the engine
// closes or the mirror is dropped. With the check off it looks again every
// fidelityOffRecheck.
func (mr *Runtime) fidelityLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var v *fetcher.Verifier
	var vMax int32
	for {
		cfg, err := mr.config()
		d := cfg.FidelityCheckInterval
		if err != nil || d <= 0 {
			d = fidelityOffRecheck
		}
		t.Reset(d)
		select {
		case <-mr.e.ctx.Done():
			return
		case <-mr.stop:
			return
		case <-t.C:
		}
		if mr.isClosed() {
			return
		}
		if err != nil || cfg.FidelityCheckInterval <= 0 {
			continue
		}
		src, _, err := mr.Sources()
		if err != nil {
			continue
		}
		if v == nil || vMax != cfg.FidelityCheckMaxBytes {
			v, vMax = fetcher.NewVerifier(src, cfg.FidelityCheckMaxBytes), cfg.FidelityCheckMaxBytes
		}
		timeout := cfg.SocketTimeout
		if timeout <= 0 {
			timeout = d
		}
		ctx, cancel := context.WithTimeout(mr.e.ctx, timeout)
		mr.fidelityOnce(ctx, v)
		cancel()
	}
}

// fidelityOffRecheck is how often a mirror with the fidelity check off looks at its
// config again.
const fidelityOffRecheck = 5 * time.Second

// checked is one partition of a fidelity check, the log generation it read, and
// whether it re-checked verified offsets (sweep) rather than new ones.
type checked struct {
	r     *Partition
	gen   int64
	sweep bool
}

// fidelityOnce checks every MIRRORING or PAUSED partition of the mirror once: one
// Fetch per source leader, a small range each (fetcher.Verifier). The range of a
// partition is the next unverified one; once every mirrored offset is verified, the
// check sweeps the verified offsets again from the log start, a range per check, and
// wraps around, so that a destination batch changed after it was verified is found
// too (within one sweep of the log).
func (mr *Runtime) fidelityOnce(ctx context.Context, v *fetcher.Verifier) {
	var targets []fetcher.VerifyTarget
	var parts []checked
	for _, r := range mr.e.partitionsOf(mr) {
		if st, _ := r.Current(); (st != statemachine.Mirroring && st != statemachine.Paused) || !r.logReady.Load() || r.compacted() {
			continue
		}
		verified, _ := r.Fidelity()
		c := checked{r: r, gen: r.fid.gen.Load()}
		from := max(verified, 0)
		if from >= r.log.LogEndOffset() {
			c.sweep = true
			if from = r.fid.sweep.Load(); from < r.log.LogStartOffset() || from >= verified {
				from = r.log.LogStartOffset()
			}
		}
		parts = append(parts, c)
		targets = append(targets, fetcher.VerifyTarget{Topic: r.topic, TopicID: r.topicID, Partition: r.partition,
			Log: r.log, From: from})
	}
	if len(targets) == 0 {
		return
	}
	res := v.Check(ctx, targets)
	for i, c := range parts {
		c.r.observeFidelity(res[i], c.gen, c.sweep)
	}
}

// observeFidelity records one check result of the partition, read at log generation
// gen; sweep says it re-checked verified offsets.
func (r *Partition) observeFidelity(res fetcher.VerifyResult, gen int64, sweep bool) {
	if res.Err != nil {
		if r.e.ctx.Err() == nil {
			r.e.log.Debug("mirror: fidelity check could not reach the source", "mirror", r.mirror,
				"partition", res.TopicPartition.String(), "err", res.Err)
		}
		return
	}
	now := r.e.clock()
	r.fid.verifiedAt.Store(now.UnixNano())
	if prev, _ := r.SourceEnd(); prev != res.SourceHighWatermark && res.SourceHighWatermark >= 0 {
		defer r.e.notifyChange() // wakes waiters on the lag of a PAUSED partition
	}
	r.fid.noteSourceEnd(res.SourceHighWatermark, now)
	if st, _ := r.Current(); st != statemachine.Mirroring {
		r.health.problem.Store(nil) // the source answers; a PAUSED partition fetches nothing else
	}
	if r.fid.gen.Load() != gen {
		return // truncated during the check: what it compared may be gone
	}
	if res.Mismatch != nil {
		mm := res.Mismatch
		for v := r.fid.verified.Load(); v > mm.Offset; v = r.fid.verified.Load() {
			if r.fid.verified.CompareAndSwap(v, mm.Offset) {
				break
			}
		}
		r.e.log.Error("mirror: fidelity mismatch: the destination differs from the source", "mirror", r.mirror,
			"partition", res.TopicPartition.String(), "offset", mm.Offset,
			"sourceCRC", mm.SourceCRC, "destinationCRC", mm.DestinationCRC)
		r.metrics().FidelityMismatch(r.ref(), mm.Offset)
		r.push(statemachine.Error{Reason: mm.Error(), Cause: mm})
		r.e.notifyChange()
		return
	}
	if sweep {
		r.fid.sweep.Store(res.VerifiedUpTo) // wraps to the log start once it reaches verified
		return
	}
	old := r.fid.verified.Swap(res.VerifiedUpTo)
	r.metrics().FidelityVerified(r.ref(), res.VerifiedUpTo)
	if old != res.VerifiedUpTo {
		r.e.notifyChange()
	}
}

// compacted reports whether the partition's topic is compacted (cleanup.policy, synced
// from the source, contains compact): the source's log cleaner rewrites batches after
// they were mirrored, so a header comparison would report a mismatch that is not one.
// The fidelity check passes such topics over.
func (r *Partition) compacted() bool {
	spec, ok := r.e.dest.Topic(r.topic)
	if !ok {
		return false
	}
	return strings.Contains(strings.ToLower(spec.Configs["cleanup.policy"]), "compact")
}

// groupsTruncated lowers the destination's committed group offsets of this
// partition that a truncation left above the log end to the end
// (dest.GroupOffsetLowerer): the records mirrored next take those offsets and are
// new to the groups. Each lowered offset is logged with the group and both offsets;
// a failure to store it is logged too (the offsets are then unchanged).
func (r *Partition) groupsTruncated() {
	g, ok := r.e.dest.(dest.GroupOffsetLowerer)
	if !ok {
		return
	}
	end := r.log.LogEndOffset()
	lowered, err := g.LowerGroupOffsets(dest.TopicPartition{Topic: r.topic, Partition: r.partition}, end)
	if err != nil {
		r.e.log.Error("mirror: cannot lower the group offsets a truncation left beyond the log end; a group resuming there would skip the records mirrored next",
			"mirror", r.mirror, "topic", r.topic, "partition", r.partition, "end", end, "err", err)
		return
	}
	for _, l := range lowered {
		r.e.log.Warn("mirror: a truncation lowered a group's committed offset to the new log end (the records above it are gone; the group reads what is mirrored next)",
			"mirror", r.mirror, "topic", r.topic, "partition", r.partition, "group", l.Group, "from", l.From, "to", l.To)
	}
}
