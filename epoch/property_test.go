package epoch

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// refCache is a deliberately naive leader-epoch history used as an oracle. It is written
// from a description of what the history means, not from Kafka's code: a set of
// (epoch, start) facts, where "epoch E covers the offsets from its start up to the next
// fact's start". Every query is answered with full scans and set minima/maxima.
type refCache struct {
	facts []Entry // kept in insertion-independent, sorted form
}

// assign: a repeated announcement of the newest epoch that does not move its start down is
// ignored; otherwise every fact that is not strictly older and strictly earlier than the new
// one is forgotten, and the new fact is added.
func (r *refCache) assign(e int32, o int64) bool {
	if e < 0 || o < 0 {
		return false
	}
	if len(r.facts) > 0 {
		newest := r.facts[0]
		for _, f := range r.facts {
			if f.Epoch > newest.Epoch {
				newest = f
			}
		}
		if newest.Epoch == e && o >= newest.StartOffset {
			return false
		}
	}
	kept := r.facts[:0]
	for _, f := range r.facts {
		if f.Epoch < e && f.StartOffset < o {
			kept = append(kept, f)
		}
	}
	r.facts = append(kept, Entry{e, o})
	return true
}

// endOffsetFor: "where does epoch q end" = the smallest start among facts with a larger
// epoch. If q is the newest epoch, it ends at the log end. If nothing is newer than q, the
// answer is unknown. The epoch reported is the largest known epoch not above q, or q itself
// if every known epoch is above q.
func (r *refCache) endOffsetFor(q int32, leo int64) (int32, int64) {
	if q == UndefinedEpoch {
		return UndefinedEpoch, UndefinedOffset
	}
	newest := int32(-1 << 31)
	for _, f := range r.facts {
		newest = max(newest, f.Epoch)
	}
	if len(r.facts) > 0 && newest == q {
		return q, leo
	}
	end, found := int64(0), false
	for _, f := range r.facts {
		if f.Epoch > q && (!found || f.StartOffset < end) {
			end, found = f.StartOffset, true
		}
	}
	if !found {
		return UndefinedEpoch, UndefinedOffset
	}
	ep, any := int32(0), false
	for _, f := range r.facts {
		if f.Epoch <= q && (!any || f.Epoch > ep) {
			ep, any = f.Epoch, true
		}
	}
	if !any {
		ep = q
	}
	return ep, end
}

// truncateFromEnd: forget facts about epochs that started at or after the new log end.
func (r *refCache) truncateFromEnd(o int64) {
	if o < 0 {
		return
	}
	kept := r.facts[:0]
	for _, f := range r.facts {
		if f.StartOffset < o {
			kept = append(kept, f)
		}
	}
	r.facts = kept
}

// truncateFromStart: the epoch covering the new log start now starts there; facts about
// epochs wholly before it are forgotten.
func (r *refCache) truncateFromStart(o int64) {
	covering, ok := r.epochForOffset(o)
	if !ok {
		return
	}
	var later []Entry
	for _, f := range r.facts {
		if f.StartOffset > o {
			later = append(later, f)
		}
	}
	r.facts = append(append(r.facts[:0], Entry{covering, o}), later...)
}

// epochForOffset: the epoch with the latest start not after o.
func (r *refCache) epochForOffset(o int64) (int32, bool) {
	best, ok := Entry{}, false
	for _, f := range r.facts {
		if f.StartOffset <= o && (!ok || f.StartOffset > best.StartOffset) {
			best, ok = f, true
		}
	}
	if !ok {
		return UndefinedEpoch, false
	}
	return best.Epoch, true
}

// sort orders the facts by epoch (insertion sort; the lists are tiny).
func (r *refCache) sort() {
	for i := 1; i < len(r.facts); i++ {
		for j := i; j > 0 && r.facts[j].Epoch < r.facts[j-1].Epoch; j-- {
			r.facts[j], r.facts[j-1] = r.facts[j-1], r.facts[j]
		}
	}
}

// propertySequences is the number of random operation sequences TestCacheMatchesReference
// runs (the task bar: at least 100,000 in the default run).
const propertySequences = 100_000

// TestCacheMatchesReference runs random interleavings of assign, truncate-from-end,
// truncate-from-start and queries against Cache and refCache and requires identical answers
// and the Cache invariant after every step.
func TestCacheMatchesReference(t *testing.T) {
	seqs := propertySequences
	if testing.Short() {
		seqs = 10_000
	}
	rng := rand.New(rand.NewPCG(1279, 42))
	ops := 0
	var st seqState
	for s := 0; s < seqs; s++ {
		ops += runSequence(t, rng, s, &st)
	}
	t.Logf("%d sequences, %d operations", seqs, ops)
}

// op is one recorded step of a random sequence, formatted only when a check fails.
type op struct {
	kind byte // 'a' assign, 'e' truncate from end, 's' truncate from start
	e    int32
	o    int64
}

func (p op) String() string {
	switch p.kind {
	case 'a':
		return fmt.Sprintf("assign(%d,%d)", p.e, p.o)
	case 'e':
		return fmt.Sprintf("truncEnd(%d)", p.o)
	default:
		return fmt.Sprintf("truncStart(%d)", p.o)
	}
}

// seqState is one random sequence under test; fail reports a mismatch with the trace.
type seqState struct {
	t     *testing.T
	seq   int
	c     Cache
	ref   refCache
	leo   int64
	trace []op
}

func (s *seqState) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("sequence %d, cache %v, leo %d, after %v: %s", s.seq, &s.c, s.leo, s.trace, fmt.Sprintf(format, args...))
}

func runSequence(t *testing.T, rng *rand.Rand, seq int, s *seqState) int {
	*s = seqState{t: t, seq: seq, c: Cache{entries: s.c.entries[:0]}, ref: refCache{facts: s.ref.facts[:0]}, trace: s.trace[:0]}
	// Small ranges so that collisions (equal epochs, equal offsets) are frequent.
	maxEpoch := int32(2 + rng.IntN(12))
	maxOffset := int64(2 + rng.IntN(40))
	n := 1 + rng.IntN(16)
	for i := 0; i < n; i++ {
		switch k := rng.IntN(10); {
		case k < 6:
			e := rng.Int32N(maxEpoch+2) - 1 // -1 .. maxEpoch
			o := rng.Int64N(maxOffset+2) - 1
			if rng.IntN(3) == 0 && s.c.Len() > 0 { // bias towards the newest entry's neighbourhood
				l, _ := s.c.Latest()
				e = l.Epoch + rng.Int32N(3) - 1
				o = l.StartOffset + rng.Int64N(3) - 1
			}
			s.trace = append(s.trace, op{'a', e, o})
			if got, want := s.c.Assign(e, o), s.ref.assign(e, o); got != want {
				s.fail("Assign returned %v, reference %v", got, want)
			}
			s.leo = max(s.leo, o+1)
		case k < 8:
			o := rng.Int64N(maxOffset+2) - 1
			s.trace = append(s.trace, op{'e', 0, o})
			s.c.TruncateFromEnd(o)
			s.ref.truncateFromEnd(o)
			if o >= 0 {
				s.leo = min(s.leo, o)
			}
		default:
			o := rng.Int64N(maxOffset+2) - 1
			s.trace = append(s.trace, op{'s', 0, o})
			s.c.TruncateFromStart(o)
			s.ref.truncateFromStart(o)
			s.leo = max(s.leo, o) // a log start never passes the log end
		}
		s.ref.sort()
		if !equalEntries(s.ref.facts, s.c.entries) {
			s.fail("entries differ from the reference %v", s.ref.facts)
		}
		if err := validate(s.c.entries); err != nil {
			s.fail("invariant broken: %v", err)
		}
		s.checkQueries(rng, maxEpoch, maxOffset)
	}
	return n
}

func equalEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *seqState) checkQueries(rng *rand.Rand, maxEpoch int32, maxOffset int64) {
	c, ref, leo := &s.c, &s.ref, s.leo
	for range 4 {
		q := rng.Int32N(maxEpoch+4) - 2 // -2 .. maxEpoch+1
		ge, gend := c.EndOffsetFor(q, leo)
		we, wend := ref.endOffsetFor(q, leo)
		if ge != we || gend != wend {
			s.fail("EndOffsetFor(%d) = (%d, %d), reference (%d, %d)", q, ge, gend, we, wend)
		}
	}
	o := rng.Int64N(maxOffset+3) - 1
	ge, gok := c.EpochForOffset(o)
	we, wok := ref.epochForOffset(o)
	if ge != we || gok != wok {
		s.fail("EpochForOffset(%d) = (%d, %v), reference (%d, %v)", o, ge, gok, we, wok)
	}

	l, lok := c.Latest()
	f, fok := c.Earliest()
	switch {
	case lok != (len(ref.facts) > 0) || fok != lok:
		s.fail("Latest/Earliest presence wrong")
	case lok && (l != ref.facts[len(ref.facts)-1] || f != ref.facts[0] || c.LatestEpoch() != l.Epoch):
		s.fail("Latest %v / Earliest %v / LatestEpoch %d wrong", l, f, c.LatestEpoch())
	case !lok && c.LatestEpoch() != UndefinedEpoch:
		s.fail("LatestEpoch of an empty cache = %d", c.LatestEpoch())
	}

	// Divergence helpers: cross-check against their definitions on the reference.
	lfe := rng.Int32N(maxEpoch+2) - 1
	fo := rng.Int64N(leo + 2)
	d, div := LeaderDivergence(c, leo, lfe, fo)
	if lfe >= 0 {
		re, rend := ref.endOffsetFor(lfe, leo)
		wantDiv := re == UndefinedEpoch || re < lfe || rend < fo
		if div != wantDiv || (div && re != UndefinedEpoch && d != (Divergence{re, rend})) {
			s.fail("LeaderDivergence(%d, %d) = %v %v, reference end (%d, %d)", lfe, fo, d, div, re, rend)
		}
	} else if div {
		s.fail("LeaderDivergence with an undefined last fetched epoch diverged")
	}
	dv := Divergence{Epoch: rng.Int32N(maxEpoch+2) - 1, EndOffset: rng.Int64N(maxOffset+2) - 1}
	if off := FollowerTruncationOffset(c, leo, dv); off > leo {
		s.fail("FollowerTruncationOffset(%v) = %d above the log end", dv, off)
	}
	lme := rng.Int32N(maxEpoch+2) - 1
	lo, full := LMETruncationOffset(c, 0, leo, lme)
	if lo > leo {
		s.fail("LMETruncationOffset(%d) = %d above the log end", lme, lo)
	}
	if !full {
		// Nothing of an epoch ≤ lme is removed, nothing of a higher epoch is kept.
		if lo > 0 {
			if e, ok := ref.epochForOffset(lo - 1); ok && e > lme {
				s.fail("LME %d keeps offset %d of epoch %d", lme, lo-1, e)
			}
		}
		if lo < leo {
			if e, ok := ref.epochForOffset(lo); !ok || e <= lme {
				s.fail("LME %d removes offset %d of epoch %d (%v)", lme, lo, e, ok)
			}
		}
	}
}
