package mirrorsim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// batchView is one batch of a log.
type batchView struct {
	base, next int64
	epoch      int32
	pidReset   bool
	control    bool
	raw        []byte
}

// readLog returns every batch of l and their concatenated bytes, read as one snapshot
// (a watchedLog is held exclusively: a Read may stop at a segment end, and the log must
// not change between the Reads). It also checks that the batches parse.
func readLog(l fetcher.Log) ([]batchView, []byte, error) {
	if w, ok := l.(*watchedLog); ok {
		var bs []batchView
		var raw []byte
		err := w.exclusive(func(in fetcher.Log) error {
			var err error
			bs, raw, err = readWhole(in)
			return err
		})
		return bs, raw, err
	}
	return readWhole(l)
}

// readWhole reads every batch of l (which nothing changes meanwhile).
func readWhole(l fetcher.Log) ([]batchView, []byte, error) {
	start, end := l.LogStartOffset(), l.LogEndOffset()
	var out []batchView
	var all []byte
	// A Read may stop early (at a segment end): read on from the end of the last batch.
	for off := start; off < end; {
		buf, err := l.Read(off, math.MaxInt32)
		if err != nil {
			return nil, nil, fmt.Errorf("mirrorsim: read log at %d: %w", off, err)
		}
		if len(buf) == 0 {
			break
		}
		it := records.NewIterator(buf)
		n := len(out)
		for it.Next() {
			out = append(out, viewOf(it.Batch()))
		}
		if it.Err() != nil || it.Partial() || len(out) == n {
			return nil, nil, violation("log-well-formed", "unreadable log at %d: err %v, partial %v", off, it.Err(), it.Partial())
		}
		all = append(all, buf...)
		off = out[len(out)-1].next
	}
	return out, all, nil
}

func viewOf(b records.Batch) batchView {
	v := batchView{base: b.BaseOffset(), next: b.NextOffset(), epoch: b.PartitionLeaderEpoch(), raw: b}
	if b.Attributes().IsControl() {
		v.control = true
		if rs, err := b.Records(); err == nil && len(rs) == 1 && len(rs[0].Key) >= 4 &&
			records.ControlType(binary.BigEndian.Uint16(rs[0].Key[2:])) == records.ControlMirrorPIDReset {
			v.pidReset = true
		}
	}
	return v
}

// checkWellFormed checks a log's batches: no overlap, non-decreasing epochs, the last
// batch ends at LogEndOffset.
func checkWellFormed(name string, l fetcher.Log) error {
	bs, _, err := readLog(l)
	if err != nil {
		return err
	}
	next, ep := l.LogStartOffset(), int32(-1)
	for _, b := range bs {
		if b.base < next {
			return violation("log-well-formed", "%s: batch at %d overlaps the previous one ending at %d", name, b.base, next)
		}
		if b.epoch < ep {
			return violation("log-well-formed", "%s: batch at %d has leader epoch %d below the previous %d", name, b.base, b.epoch, ep)
		}
		next, ep = b.next, b.epoch
	}
	if len(bs) > 0 && next != l.LogEndOffset() {
		return violation("log-well-formed", "%s: last batch ends at %d but log end offset is %d", name, next, l.LogEndOffset())
	}
	return nil
}

// waitUntil waits until cond holds, woken by every log mutation and state change, for
// at most the wait timeout. On timeout it returns the last description cond gave.
func (r *run) waitUntil(cond func() (bool, error)) error {
	timer := time.NewTimer(r.opts.WaitTimeout)
	defer timer.Stop()
	for {
		ch := r.n.changed()
		ok, err := cond()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return err
		}
	}
}

// settled reports whether mirror d of site s is quiescent for partition p: its log
// starts where s's does, is a byte prefix of s's log, and reaches at least the end of
// the last batch of s below the (s, d) gate.
func (r *run) settled(d, s *site, p int32) (bool, error) {
	dl, err := d.dest.log(topic, p)
	if err != nil {
		return false, err
	}
	sl, err := s.dest.log(topic, p)
	if err != nil {
		return false, err
	}
	sbs, sraw, err := readLog(sl)
	if err != nil {
		return false, err
	}
	_, draw, err := readLog(dl)
	if err != nil {
		return false, err
	}
	g := r.gate(s.idx, d.idx, p)
	eff := sl.LogStartOffset()
	for _, b := range sbs {
		if b.base < g {
			eff = b.next
		}
	}
	if len(draw) > 0 && dl.LogStartOffset() != sl.LogStartOffset() {
		return false, fmt.Errorf("%w: %s %s-%d starts at %d, its source %s at %d", ErrStuck, d.name, topic, p, dl.LogStartOffset(), s.name, sl.LogStartOffset())
	}
	if !bytes.HasPrefix(sraw, draw) {
		return false, violation("convergence", "%s %s-%d (log end %d) is not a prefix of its source %s (log end %d); first difference at byte %d; %s",
			d.name, topic, p, dl.LogEndOffset(), s.name, sl.LogEndOffset(), firstDiff(sraw, draw), r.describe(d))
	}
	if dl.LogEndOffset() < eff {
		return false, fmt.Errorf("%w: %s %s-%d at log end %d, waiting for %d from %s (log end %d); %s",
			ErrStuck, d.name, topic, p, dl.LogEndOffset(), eff, s.name, sl.LogEndOffset(), r.describe(d))
	}
	return true, nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// describe summarises the actual states of a site's mirror partitions (for failure
// messages).
func (r *run) describe(s *site) string {
	m := s.mirror()
	if m == nil {
		return s.name + " is down"
	}
	ctx, cancel := r.ctx()
	defer cancel()
	desc, err := m.DescribeClusterMirrors(ctx, nil, mirror.DescribeOptions{IncludeStates: true, IncludeLags: true})
	if err != nil {
		return fmt.Sprintf("%s: describe failed: %v", s.name, err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s states:", s.name)
	for _, md := range desc {
		for _, td := range md.Topics {
			for _, pd := range td.Partitions {
				fmt.Fprintf(&b, " %s/%d=%s(lme %d, src %d, dst %d%s)", md.Name, pd.Partition, pd.State, pd.LastMirrorEpoch,
					pd.SourceOffset, pd.DestinationOffset, reason(pd.ErrorMessage))
			}
		}
	}
	return b.String()
}

func reason(msg string) string {
	if msg == "" {
		return ""
	}
	return ", " + msg
}

// settle waits until every up mirror is MIRRORING and caught up to its gate.
func (r *run) settle() error {
	prim := r.sites[r.primary]
	for _, d := range r.upMirrors() {
		m := d.mirror()
		name := mirrorName(r.sites[r.src[d.idx]])
		ctx, cancel := r.ctx()
		err := m.WaitForStates(ctx, name, []string{topic}, statemachine.Mirroring)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: %s: %w; %s", ErrStuck, d.name, err, r.describe(d))
		}
		for p := range r.parts {
			if err := r.waitUntil(func() (bool, error) { return r.settled(d, prim, p) }); err != nil {
				return err
			}
		}
		ctx, cancel = r.ctx()
		err = m.WaitForStates(ctx, name, []string{topic}, statemachine.Mirroring)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: %s: %w; %s", ErrStuck, d.name, err, r.describe(d))
		}
	}
	return nil
}

// checkLME checks the LME invariant (spec §6.2) on d right after PREPARING of its
// mirror from s: d's log ends at or below cut (the end of epoch lme in d's log before
// the start), holds no batch of an epoch above lme, and its log and s's batches
// of epochs <= lme are prefixes of one another (each epoch's data belongs to one
// cluster). The (s, d) gate is closed, so nothing was fetched yet.
func (r *run) checkLME(d, s *site, p int32, lme int32, cut int64) error {
	dl, err := d.dest.log(topic, p)
	if err != nil {
		return err
	}
	if end := dl.LogEndOffset(); end > cut {
		return violation("lme", "%s %s-%d after PREPARING from %s ends at %d, above the end %d of the LME epoch %d",
			d.name, topic, p, s.name, end, cut, lme)
	}
	sl, err := s.dest.log(topic, p)
	if err != nil {
		return err
	}
	dbs, draw, err := readLog(dl)
	if err != nil {
		return err
	}
	for _, b := range dbs {
		if b.epoch > lme {
			return violation("lme", "%s %s-%d after PREPARING from %s keeps the batch at offset %d of leader epoch %d above the LME %d (log end %d)",
				d.name, topic, p, s.name, b.base, b.epoch, lme, dl.LogEndOffset())
		}
	}
	sbs, _, err := readLog(sl)
	if err != nil {
		return err
	}
	var sraw []byte
	for _, b := range sbs {
		if b.epoch > lme {
			break
		}
		sraw = append(sraw, b.raw...)
	}
	if !bytes.HasPrefix(sraw, draw) && !bytes.HasPrefix(draw, sraw) {
		return violation("lme", "%s %s-%d after PREPARING from %s: the data of epochs <= LME %d differs (local %d bytes, source %d bytes, first difference at byte %d)",
			d.name, topic, p, s.name, lme, len(draw), len(sraw), firstDiff(sraw, draw))
	}
	return nil
}

// checkEqual checks that d's log is byte-identical to s's.
func (r *run) checkEqual(d, s *site, name string) error {
	for p := range r.parts {
		dl, err := d.dest.log(topic, p)
		if err != nil {
			return err
		}
		sl, err := s.dest.log(topic, p)
		if err != nil {
			return err
		}
		_, draw, err := readLog(dl)
		if err != nil {
			return err
		}
		_, sraw, err := readLog(sl)
		if err != nil {
			return err
		}
		if !bytes.Equal(draw, sraw) {
			return violation(name, "%s %s-%d (log end %d) differs from %s (log end %d) after a full catch-up; first difference at byte %d",
				d.name, topic, p, dl.LogEndOffset(), s.name, sl.LogEndOffset(), firstDiff(sraw, draw))
		}
	}
	return nil
}

// checkConverged checks that every site holds the primary's log.
func (r *run) checkConverged() error {
	prim := r.sites[r.primary]
	for _, d := range r.upMirrors() {
		if err := r.checkEqual(d, prim, "convergence"); err != nil {
			return err
		}
	}
	r.tracef("end: every site holds the primary %s's log %v", prim.name, r.leos(prim))
	return nil
}

// leos returns the log end offsets of a site's partitions.
func (r *run) leos(s *site) []int64 {
	out := make([]int64, r.parts)
	for p := range r.parts {
		if l, err := s.dest.log(topic, p); err == nil {
			out[p] = l.LogEndOffset()
		}
	}
	return out
}

// stateKey names one coordinator key of one site.
type stateKey struct {
	site   int
	mirror string
	p      int32
}

type stateSeen struct {
	stateEpoch, leaderEpoch int32
}

// checkAll runs the invariants checked after every step: well-formed logs, no batch
// above the local leader epoch, the primary writable and the mirrors read-only, and
// coordinator epochs that never go down.
func (r *run) checkAll() error {
	for _, s := range r.sites {
		for p := range r.parts {
			l, err := s.dest.log(topic, p)
			if err != nil {
				return err
			}
			if err := checkWellFormed(fmt.Sprintf("%s %s-%d", s.name, topic, p), l); err != nil {
				return err
			}
			// Spec §7.3 rule 1: a batch whose epoch is above the local leader epoch is
			// never appended (EPOCH_FENCING bumps the epoch first).
			le, latest := l.LeaderEpoch(), l.LatestEpoch()
			if latest > le {
				return violation("epoch-fencing", "%s %s-%d holds a batch of leader epoch %d above its leader epoch %d", s.name, topic, p, latest, le)
			}
			k := [2]int{s.idx, int(p)}
			if prev, ok := r.le[k]; ok && le < prev {
				return violation("leader-epoch-durable", "%s %s-%d: leader epoch went down from %d to %d", s.name, topic, p, prev, le)
			}
			r.le[k] = le
			up := s.mirror() != nil
			switch {
			case s.idx == r.primary && s.dest.ReadOnly(topic, p):
				return violation("primary-writable", "primary %s %s-%d is read-only", s.name, topic, p)
			case s.idx != r.primary && up && !s.dest.ReadOnly(topic, p):
				return violation("mirror-read-only", "mirror %s %s-%d is writable", s.name, topic, p)
			}
		}
		if err := r.checkStateEpochs(s); err != nil {
			return err
		}
	}
	return r.checkModel()
}

// checkStateEpochs reads every partition state of every mirror of s and checks that
// StateEpoch and the highest-seen LeaderEpoch never went down.
func (r *run) checkStateEpochs(s *site) error {
	m := s.mirror()
	if m == nil {
		return nil
	}
	ctx, cancel := r.ctx()
	defer cancel()
	for _, mi := range m.Controller().Mirrors() {
		req := coordinator.ReadRequest{MirrorName: mi.Name}
		for p := range r.parts {
			req.Partitions = append(req.Partitions, coordinator.ReadPartition{TopicID: r.topicID, Partition: p, LeaderEpoch: -1})
		}
		resp, err := m.Coordinator().ReadMirrorStates(ctx, req)
		if err != nil {
			return err
		}
		for _, rp := range resp.Partitions {
			if rp.ErrorCode != admin.CodeNone {
				continue
			}
			k := stateKey{s.idx, mi.Name, rp.Partition}
			prev, ok := r.seen[k]
			if ok && (rp.StateEpoch < prev.stateEpoch || rp.LeaderEpoch < prev.leaderEpoch) {
				return violation("state-epoch-monotonic", "%s %s/%d: state epoch %d -> %d, leader epoch %d -> %d",
					s.name, mi.Name, rp.Partition, prev.stateEpoch, rp.StateEpoch, prev.leaderEpoch, rp.LeaderEpoch)
			}
			r.seen[k] = stateSeen{rp.StateEpoch, rp.LeaderEpoch}
		}
	}
	return nil
}

// summary prints batches as [base-last eEPOCH], marking control batches.
func summary(bs []batchView) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range bs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d-%d e%d", v.base, v.next-1, v.epoch)
		if v.pidReset {
			b.WriteString(" PID_RESET")
		} else if v.control {
			b.WriteString(" CTRL")
		}
	}
	b.WriteByte(']')
	return b.String()
}
