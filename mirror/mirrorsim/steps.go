package mirrorsim

import (
	"fmt"
	"math"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// producer is the simulated client of the primary.
type producer struct {
	nextPID int64
	counter int
	idem    map[int32]*pidSeq // idempotent producer per partition
	txn     map[int32]*pidSeq // open transaction per partition
}

type pidSeq struct {
	pid   int64
	epoch int16
	seq   int32
}

func (p *producer) newPID() *pidSeq {
	p.nextPID++
	return &pidSeq{pid: p.nextPID}
}

// resync forgets idempotent sessions (the producer re-initialises after a failover or
// an unclean election) and keeps only the transactions the model of the primary still
// has open.
func (r *run) resyncProducer() {
	r.prod.idem = map[int32]*pidSeq{}
	for p := range r.parts {
		if ps := r.prod.txn[p]; ps != nil && !r.model[p].openTxn(ps.pid) {
			delete(r.prod.txn, p)
		}
	}
}

// produce writes one batch to partition p of the primary and records it in the model:
// plain, idempotent or transactional data through the client write path, or a
// COMMIT/ABORT marker the way a transaction coordinator writes it (WriteTxnMarkers:
// clients never write control batches).
func (r *run) produce(p int32) error {
	prim := r.sites[r.primary]
	r.prod.counter++
	ts := simEpoch.UnixMilli() + int64(r.prod.counter)
	var batch []byte
	var kind string
	var recs []records.Record
	var open *pidSeq
	marker, abort, txn, pid := false, false, false, int64(-1)
	if open = r.prod.txn[p]; open != nil && r.rng.IntN(5) < 2 {
		typ, name := records.ControlCommit, "commit"
		if r.rng.IntN(10) < 3 {
			typ, name, abort = records.ControlAbort, "abort", true
		}
		batch = records.BuildControlBatch(records.ControlBatchSpec{ProducerID: open.pid, ProducerEpoch: open.epoch,
			Timestamp: ts, Type: typ})
		kind, marker, pid = fmt.Sprintf("%s pid=%d", name, open.pid), true, open.pid
		delete(r.prod.txn, p)
	} else {
		var err error
		if batch, recs, kind, txn, pid, err = r.dataBatch(p, ts); err != nil {
			return err
		}
	}
	var off int64
	var err error
	if marker {
		off, err = r.coordinatorMarker(prim, p, pid, batch)
	} else {
		off, err = r.clientWrite(prim, p, batch, true)
	}
	if err != nil {
		return err
	}
	if marker {
		r.model[p].decide(pid, off, abort)
	} else {
		r.model[p].add(off, recs, txn, pid)
	}
	l, err := prim.dest.log(topic, p)
	if err != nil {
		return err
	}
	r.tracef("produce %s %s-%d %s at offset %d leader epoch %d", prim.name, topic, p, kind, off, l.LeaderEpoch())
	return nil
}

// coordinatorMarker appends the COMMIT/ABORT marker batch of producer pid to partition p
// of the primary with fetcher.WriteTxnMarker, as a transaction coordinator does, and
// flushes it.
func (r *run) coordinatorMarker(prim *site, p int32, pid int64, batch []byte) (int64, error) {
	l, err := prim.dest.log(topic, p)
	if err != nil {
		return -1, err
	}
	b := records.Batch(batch)
	typ, err := b.ControlType()
	if err != nil {
		return -1, err
	}
	off, err := fetcher.WriteTxnMarker(l, fetcher.TxnMarker{ProducerID: pid, ProducerEpoch: b.ProducerEpoch(),
		Commit: typ == records.ControlCommit, Timestamp: b.BaseTimestamp()})
	if err != nil {
		return -1, fmt.Errorf("%w: marker of producer %d on %s %s-%d: %w", errClientWrite, pid, prim.name, topic, p, err)
	}
	return off, l.Flush()
}

// dataBatch builds the next data batch of the producer for partition p: plain,
// idempotent, or part of the partition's transaction (opened when there is none).
func (r *run) dataBatch(p int32, ts int64) (batch []byte, recs []records.Record, kind string, txn bool, pid int64, err error) {
	n := 1 + r.rng.IntN(3)
	recs = make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{TimestampDelta: int64(i), OffsetDelta: int32(i),
			Key:   fmt.Appendf(nil, "k%d", r.rng.IntN(10)),
			Value: fmt.Appendf(nil, "seed %d value %d.%d", r.seed, r.prod.counter, i)}
	}
	spec := records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: ts}
	var ps *pidSeq
	switch k := r.rng.IntN(3); {
	case k == 0:
		kind = "plain"
	case k == 1 && r.prod.txn[p] == nil:
		ps = r.prod.idem[p]
		if ps == nil {
			ps = r.prod.newPID()
			r.prod.idem[p] = ps
		}
		kind = fmt.Sprintf("idempotent pid=%d seq=%d", ps.pid, ps.seq)
	default:
		ps = r.prod.txn[p]
		if ps == nil {
			ps = r.prod.newPID()
			r.prod.txn[p] = ps
		}
		spec.Transactional = true
		kind = fmt.Sprintf("txn pid=%d seq=%d", ps.pid, ps.seq)
	}
	pid = -1
	if ps != nil {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = ps.pid, ps.epoch, ps.seq
		ps.seq += int32(n)
		pid = ps.pid
	}
	if batch, err = records.BuildBatch(spec, recs); err != nil {
		return nil, nil, "", false, 0, err
	}
	return batch, recs, kind + fmt.Sprintf(" records=%d", n), spec.Transactional, pid, nil
}

// uncleanElection models an unclean leader election on the primary: a lagging replica
// becomes leader, so the partition loses its tail and gets a higher leader epoch.
func (r *run) uncleanElection() error {
	prim := r.sites[r.primary]
	p := r.rng.Int32N(r.parts)
	l, err := prim.dest.log(topic, p)
	if err != nil {
		return err
	}
	bs, _, err := readLog(l)
	if err != nil {
		return err
	}
	// Usually one election (a bump of 1 to 3); sometimes a run of leader changes raises
	// the epoch by up to 26, into the range the mirrors keep their epochs ahead by
	// (spec §7.5: +10), so the old primary's epochs collide with a mirror's stop epoch
	// as in spec §6.4 examples A and C.
	bump := r.rng.Int32N(3)
	if r.rng.IntN(4) == 0 {
		bump += r.rng.Int32N(24)
	}
	cut := l.LogEndOffset()
	if len(bs) > 0 {
		k := 1 + r.rng.IntN(min(4, len(bs)))
		cut = bs[len(bs)-k].base
	}
	if err := l.Truncate(cut); err != nil {
		return err
	}
	e, err := l.BumpLeaderEpoch(l.LeaderEpoch() + bump)
	if err != nil {
		return err
	}
	r.model[p].cut(cut)
	r.tracef("unclean election on primary %s %s-%d: truncated to %d, leader epoch now %d", prim.name, topic, p, cut, e)
	r.resyncProducer()
	return nil
}

// crashRestart crashes a site (logs, coordinator store) and starts a new Mirror on it.
func (r *run) crashRestart(s *site) error {
	if s.mirror() == nil {
		r.tracef("crash-restart %s: site is down, nothing to do", s.name)
		return nil
	}
	r.tracef("crash-restart %s (role %s)", s.name, r.role(s))
	if err := r.closeSite(s); err != nil {
		return err
	}
	if err := r.crashSite(s); err != nil {
		return err
	}
	if err := r.openSite(s); err != nil {
		return err
	}
	if s.idx == r.primary {
		r.resyncProducer()
	}
	return nil
}

// crashSite crashes the logs and the coordinator store of a site that is down, and
// checks that every log kept its leader epoch (BumpLeaderEpoch is durable).
func (r *run) crashSite(s *site) error {
	before := make([]int32, r.parts)
	for p := range r.parts {
		l, err := s.dest.log(topic, p)
		if err != nil {
			return err
		}
		before[p] = l.LeaderEpoch()
	}
	if err := s.dest.crashLogs(); err != nil {
		return err
	}
	s.store.Crash()
	for p := range r.parts {
		l, err := s.dest.log(topic, p)
		if err != nil {
			return err
		}
		if le := l.LeaderEpoch(); le < before[p] {
			return violation("leader-epoch-durable", "%s %s-%d: leader epoch %d before the crash, %d after the reopen", s.name, topic, p, before[p], le)
		}
	}
	return nil
}

func (r *run) role(s *site) string {
	switch {
	case s.idx == r.primary:
		return "primary"
	case s.mirror() == nil:
		return "down"
	}
	return "mirror of " + r.sites[r.src[s.idx]].name
}

// ownershipChange moves one __mirror_state partition of a site to a new owner epoch
// (Unload, then Load with a higher epoch), as a coordinator failover would.
func (r *run) ownershipChange() error {
	s := r.sites[r.rng.IntN(len(r.sites))]
	q := r.rng.IntN(statePartitions)
	m := s.mirror()
	if m == nil {
		r.tracef("ownership change on %s: site is down, nothing to do", s.name)
		return nil
	}
	rt := m.Coordinator()
	rt.Unload(int32(q), s.owner[q])
	s.owner[q]++
	if err := rt.Load(int32(q), s.owner[q]); err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	defer cancel()
	if err := rt.WaitLoaded(ctx, int32(q)); err != nil {
		return fmt.Errorf("mirrorsim: %s reload state partition %d: %w", s.name, q, err)
	}
	r.tracef("ownership change on %s: __mirror_state partition %d now owned with epoch %d", s.name, q, s.owner[q])
	return nil
}

// staleWrite sends a WriteMirrorStates with an older LeaderEpoch or StateEpoch than the
// coordinator holds for a partition and checks that it is refused.
func (r *run) staleWrite() error {
	s := r.sites[r.rng.IntN(len(r.sites))]
	p := r.rng.Int32N(r.parts)
	useLeader := r.rng.IntN(2) == 0
	viaRPC := r.rng.IntN(2) == 0
	m := s.mirror()
	if m == nil {
		r.tracef("stale write on %s: site is down", s.name)
		return nil
	}
	ts, ok := m.Controller().Topic(topic)
	if !ok || ts.Mirror == "" {
		r.tracef("stale write on %s: %s is not a mirror topic there", s.name, topic)
		return nil
	}
	ctx, cancel := r.ctx()
	defer cancel()
	rd, err := m.Coordinator().ReadMirrorStates(ctx, coordinator.ReadRequest{MirrorName: ts.Mirror,
		Partitions: []coordinator.ReadPartition{{TopicID: r.topicID, Partition: p, LeaderEpoch: -1}}})
	if err != nil {
		return err
	}
	cur := rd.Partitions[0]
	if cur.ErrorCode != admin.CodeNone {
		return fmt.Errorf("%w: %s read state of %s/%d: %v", ErrStuck, s.name, ts.Mirror, p, cur.ErrorCode)
	}
	w := coordinator.WritePartition{TopicID: r.topicID, Partition: p, State: cur.State, LeaderEpoch: -1, StateEpoch: -1,
		LastMirrorEpoch: -1, LastMirrorOffset: -1}
	want := admin.CodeFencedStateEpoch
	switch {
	case useLeader && cur.LeaderEpoch >= 1 || cur.StateEpoch < 1 && cur.LeaderEpoch >= 1:
		w.LeaderEpoch, want = cur.LeaderEpoch-1, admin.CodeFencedLeaderEpoch
	case cur.StateEpoch >= 1:
		w.StateEpoch = cur.StateEpoch - 1
	default:
		r.tracef("stale write on %s %s/%d: nothing older than leader epoch %d, state epoch %d", s.name, ts.Mirror, p, cur.LeaderEpoch, cur.StateEpoch)
		return nil
	}
	var got admin.Code
	via := "coordinator"
	if viaRPC {
		// Through the facade's WriteMirrorStates RPC handler (admin wire types).
		via = "rpc"
		req := admin.NewPtrWriteMirrorStatesRequest()
		req.MirrorName = ts.Mirror
		rt := admin.NewWriteMirrorStatesRequestTopic()
		rt.TopicName = topic
		rp := admin.NewWriteMirrorStatesRequestTopicPartition()
		rp.PartitionIndex, rp.State, rp.LeaderEpoch, rp.StateEpoch = p, int8(w.State), w.LeaderEpoch, w.StateEpoch
		rp.LastMirrorEpoch, rp.LastMirrorOffset = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := m.WriteMirrorStates(ctx, req)
		if err != nil {
			return err
		}
		got = admin.Code(resp.Topics[0].Partitions[0].ErrorCode)
	} else {
		wr, err := m.Coordinator().WriteMirrorStates(ctx, coordinator.WriteRequest{MirrorName: ts.Mirror, Partitions: []coordinator.WritePartition{w}})
		if err != nil {
			return err
		}
		got = wr.Partitions[0].ErrorCode
	}
	// The trace names what was made stale, not the stored epochs: a reconciler may
	// raise a partition's stored leader epoch to its log's at any time (a read of the
	// actual state), so those numbers differ between two replays of one seed. The
	// violation below carries them.
	stale := "state epoch"
	if want == admin.CodeFencedLeaderEpoch {
		stale = "leader epoch"
	}
	r.tracef("stale write (%s) on %s %s/%d state %s, %s one below the stored: %v",
		via, s.name, ts.Mirror, p, cur.State, stale, got)
	if got != want {
		return violation("stale-write-refused", "%s %s/%d: stale write (leader epoch %d vs stored %d, state epoch %d vs stored %d) answered %v, want %v",
			s.name, ts.Mirror, p, w.LeaderEpoch, cur.LeaderEpoch, w.StateEpoch, cur.StateEpoch, got, want)
	}
	return nil
}

// catchUp opens the gate from the primary to d: fully, or to the end of a random batch
// beyond the current gate. settle then waits until d has fetched up to it.
func (r *run) catchUp(d *site, full bool) error {
	prim := r.sites[r.primary]
	for p := range r.parts {
		if full {
			r.setGate(prim.idx, d.idx, p, math.MaxInt64)
			continue
		}
		l, err := prim.dest.log(topic, p)
		if err != nil {
			return err
		}
		bs, _, err := readLog(l)
		if err != nil {
			return err
		}
		g := r.gate(prim.idx, d.idx, p)
		var ahead []batchView
		for _, b := range bs {
			if b.base >= g {
				ahead = append(ahead, b)
			}
		}
		if len(ahead) > 0 {
			r.setGate(prim.idx, d.idx, p, ahead[r.rng.IntN(len(ahead))].next)
		}
	}
	gs := make([]int64, r.parts)
	for p := range r.parts {
		gs[p] = r.gate(prim.idx, d.idx, p)
	}
	r.tracef("catch-up %s from %s (full=%v): gates %v", d.name, prim.name, full, gates(gs))
	if err := r.settle(); err != nil {
		return err
	}
	if full {
		return r.checkEqual(d, prim, "convergence")
	}
	return nil
}

func gates(gs []int64) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		if g == math.MaxInt64 {
			out[i] = "open"
		} else {
			out[i] = fmt.Sprint(g)
		}
	}
	return out
}

// startMirror makes d mirror topic from s (a new mirror, a failback, or a switch of
// source), with the (s, d) gate closed, waits for MIRRORING and checks the LME
// invariant on what PREPARING left in d's log.
func (r *run) startMirror(d, s *site) error {
	m := d.mirror()
	name := mirrorName(s)
	ctx, cancel := r.ctx()
	defer cancel()
	if _, ok := m.Controller().Mirror(name); !ok {
		cfg := map[string]string{mirror.KeyBootstrapServers: s.name + ".sim:9092"}
		if r.ule {
			cfg[mirror.KeyUncleanLeaderElection] = "true"
		}
		if err := m.CreateClusterMirror(ctx, name, cfg); err != nil {
			return fmt.Errorf("mirrorsim: create mirror %s on %s: %w", name, d.name, err)
		}
	}
	for p := range r.parts {
		r.setGate(s.idx, d.idx, p, 0)
	}
	// The LME s stored when it stopped mirroring from d, and where §6.3 step 6 says
	// d must truncate: at the first batch of an epoch above it (everything for -1).
	before := r.leos(d)
	lmes := make([]int32, r.parts)
	cuts := make([]int64, r.parts)
	for p := range r.parts {
		lme, err := r.trueLME(s, d, p)
		if err != nil {
			return err
		}
		lmes[p] = lme
		if _, ok := d.dest.Topic(topic); !ok {
			continue // created by the start: empty
		}
		l, err := d.dest.log(topic, p)
		if err != nil {
			return err
		}
		bs, _, err := readLog(l)
		if err != nil {
			return err
		}
		cuts[p] = l.LogEndOffset()
		if lme < 0 {
			cuts[p] = l.LogStartOffset()
		}
		for _, b := range bs {
			if b.epoch > lme {
				cuts[p] = b.base
				break
			}
		}
	}
	res, err := m.StartMirrorTopics(ctx, name, []string{topic}, mirror.StartOptions{AllowTruncation: true}) // the model predicts every cut (cuts above)
	if err != nil {
		return fmt.Errorf("mirrorsim: start %s on %s: %w", name, d.name, err)
	}
	for _, tr := range res {
		if tr.Err != nil {
			return fmt.Errorf("mirrorsim: start %s on %s: topic %s: %w", name, d.name, tr.Topic, tr.Err)
		}
	}
	r.src[d.idx] = s.idx
	if err := m.WaitForStates(ctx, name, []string{topic}, statemachine.Mirroring); err != nil {
		return fmt.Errorf("%w: %s start %s: %w", ErrStuck, d.name, name, err)
	}
	for p := range r.parts {
		if r.opts.noLMECheck {
			continue
		}
		if err := r.checkLME(d, s, p, lmes[p], cuts[p]); err != nil {
			return err
		}
	}
	r.tracef("start mirror %s on %s: MIRRORING, LME per partition %v, log ends %v before, LME truncation to %v", name, d.name, lmes, before, cuts)
	return nil
}

// trueLME reads, on site s, the LME stored for partition p by the mirror of s that
// mirrored from d (the value PREPARING on d must use), -1 when there is none.
func (r *run) trueLME(s, d *site, p int32) (int32, error) {
	m := s.mirror()
	name := mirrorName(d)
	if _, ok := m.Controller().Mirror(name); !ok {
		return -1, nil
	}
	ctx, cancel := r.ctx()
	defer cancel()
	desc, err := m.DescribeClusterMirrors(ctx, []string{name}, mirror.DescribeOptions{
		TopicPartitions: map[string][]int32{topic: {p}}, IncludeStates: true})
	if err != nil {
		return -1, err
	}
	lme := int32(-1)
	for _, md := range desc {
		for _, td := range md.Topics {
			for _, pd := range td.Partitions {
				if pd.Partition == p && pd.LastMirrorEpoch > lme {
					lme = pd.LastMirrorEpoch
				}
			}
		}
	}
	return lme, nil
}

// stopMirror stops d's mirror (failover) and checks what a STOPPED partition must
// hold against mdl, the model of the source d mirrored: every record the source
// committed within what d held before the stop is still there at its offset and seen
// by read_committed ("committed-not-lost"; without Options.strictStop only those below
// the first open transaction), no open transaction, LSO = HW, a MIRROR_PID_RESET
// barrier, a leader epoch above every copied epoch, writable. It returns, per
// partition, the log end before the stop and the offset below which the stop kept d's
// data records (the model of d as the new primary is mdl.failover(end, keep)).
func (r *run) stopMirror(d *site, mdl []partModel) (ends, keeps []int64, err error) {
	m := d.mirror()
	name := mirrorName(r.sites[r.src[d.idx]])
	type before struct {
		latest  int32
		end     int64
		batches []batchView
	}
	bf := make([]before, r.parts)
	for p := range r.parts {
		l, err := d.dest.log(topic, p)
		if err != nil {
			return nil, nil, err
		}
		bs, _, err := readLog(l)
		if err != nil {
			return nil, nil, err
		}
		bf[p] = before{latest: l.LatestEpoch(), end: l.LogEndOffset(), batches: bs}
	}
	ctx, cancel := r.ctx()
	defer cancel()
	res, err := m.StopMirrorTopics(ctx, name, []string{topic}, mirror.StopOptions{Wait: true})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: stop %s on %s: %w", ErrStuck, name, d.name, err)
	}
	if err := firstErr(res); err != nil {
		return nil, nil, fmt.Errorf("mirrorsim: stop %s on %s: %w", name, d.name, err)
	}
	ends, keeps = make([]int64, r.parts), make([]int64, r.parts)
	for p := range r.parts {
		ends[p] = bf[p].end
		keeps[p], err = r.checkStopped(d, p, &mdl[p], bf[p].end, bf[p].latest, bf[p].batches)
		if err != nil {
			return nil, nil, err
		}
	}
	r.tracef("stop %s on %s: STOPPED, logs %v", name, d.name, r.leos(d))
	return ends, keeps, nil
}

// checkStopped checks partition p of d after its stop (see stopMirror); end and latest
// are its log end and latest epoch before the stop. It returns the offset below which
// the stop kept the data records.
func (r *run) checkStopped(d *site, p int32, m *partModel, end int64, latest int32, before []batchView) (int64, error) {
	l, err := d.dest.log(topic, p)
	if err != nil {
		return 0, err
	}
	bs, _, err := readLog(l)
	if err != nil {
		return 0, err
	}
	recs, err := logRecords(bs)
	if err != nil {
		return 0, err
	}
	idx := recordIndex(recs)
	open := m.firstOpen(end)
	lso := l.LastStableOffset()
	name := fmt.Sprintf("%s %s-%d", d.name, topic, p)
	for _, mr := range m.committed(end) {
		if !r.opts.strictStop && mr.off >= open {
			break
		}
		lr, ok := idx[mr.off]
		if !ok || !lr.same(mr) {
			return 0, violation("committed-not-lost", "%s: the record %v, committed and mirrored before the stop (log end %d, first open transaction at %d), is gone after it: before %s, after %s",
				name, mr, end, open, summary(before), summary(bs))
		}
		if lr.aborted || mr.off >= lso {
			return 0, violation("committed-not-lost", "%s: the committed record %v is hidden from read_committed after the stop (aborted %v, last stable offset %d): after %s",
				name, mr, lr.aborted, lso, summary(bs))
		}
	}
	if open := l.OpenTransactions(); len(open) > 0 {
		return 0, violation("stopped-no-open-txn", "%s: STOPPED with open transactions %+v", name, open)
	}
	if lso != l.HighWatermark() {
		return 0, violation("stopped-no-open-txn", "%s: STOPPED with last stable offset %d below the high watermark %d", name, lso, l.HighWatermark())
	}
	// The facade publishes STOPPED before it runs STOPPED's ClearReadOnly, so
	// StopMirrorTopics(Wait) may return a moment before the partition is writable:
	// wait for it (bounded).
	if err := r.waitUntil(func() (bool, error) {
		return !d.dest.ReadOnly(topic, p), violation("stopped-writable", "%s: STOPPED but still read-only", name)
	}); err != nil {
		return 0, err
	}
	if le := l.LeaderEpoch(); le <= latest {
		return 0, violation("stop-bumps-epoch", "%s: leader epoch %d after stop, not above the latest copied epoch %d", name, le, latest)
	}
	keep := open
	if _, ok := idx[open]; ok && open < end {
		keep = end // the stop kept the open transaction's records (ABORT markers)
	}
	if !hasPIDReset(bs, min(keep, l.LogEndOffset())) {
		return 0, violation("stop-pid-reset", "%s: no MIRROR_PID_RESET after the mirrored data (kept below %d): %s", name, keep, summary(bs))
	}
	return keep, nil
}

// hasPIDReset reports whether a MIRROR_PID_RESET control batch starts at or after
// offset from.
func hasPIDReset(bs []batchView, from int64) bool {
	for _, b := range bs {
		if b.base >= from && b.pidReset {
			return true
		}
	}
	return false
}

// failover makes d (a mirror) the primary. A clean failover first lets d catch up
// fully half of the time; a crash failover takes the primary down first, so its
// un-mirrored tail becomes divergent. The old primary (when up) fails back: it
// mirrors from d, with LME truncation; every other mirror switches its source to d.
func (r *run) failover(d *site, crash bool) error {
	old := r.sites[r.primary]
	if !crash && r.rng.IntN(2) == 0 {
		if err := r.catchUp(d, true); err != nil {
			return err
		}
	}
	if crash {
		if err := r.closeSite(old); err != nil {
			return err
		}
		if err := r.crashSite(old); err != nil {
			return err
		}
		r.tracef("primary %s crashed (down)", old.name)
	}
	r.tracef("failover from %s to %s (crash=%v)", old.name, d.name, crash)
	ends, keeps, err := r.stopMirror(d, r.model)
	if err != nil {
		return err
	}
	// The other mirrors of the old primary stop before it fails back: its PREPARING
	// truncates its log, which they would otherwise mirror.
	var others []*site
	for _, s := range r.sites {
		if s.idx != d.idx && s.idx != old.idx && s.mirror() != nil {
			if _, _, err := r.stopMirror(s, r.model); err != nil {
				return err
			}
			others = append(others, s)
		}
	}
	next := make([]partModel, r.parts)
	for p := range r.parts {
		next[p] = r.model[p].failover(ends[p], keeps[p])
	}
	r.model = next
	r.primary = d.idx
	r.src[d.idx] = -1
	r.prod.txn = map[int32]*pidSeq{}
	r.resyncProducer()
	if old.mirror() != nil {
		if err := r.startMirror(old, d); err != nil {
			return err
		}
	}
	for _, s := range others {
		if err := r.startMirror(s, d); err != nil {
			return err
		}
	}
	return nil
}

// recover restarts a site that is down and makes it mirror from the primary.
func (r *run) recover(s *site) error {
	r.tracef("recover %s", s.name)
	if err := r.openSite(s); err != nil {
		return err
	}
	return r.startMirror(s, r.sites[r.primary])
}

// pauseResume pauses d's mirror, then resumes it.
func (r *run) pauseResume(d *site) error {
	m := d.mirror()
	name := mirrorName(r.sites[r.src[d.idx]])
	ctx, cancel := r.ctx()
	defer cancel()
	// A partition may pass through a transient state (ULE_LOG_TRUNCATION after a
	// divergence its fetcher found just now) where pause is refused: wait for
	// MIRRORING and ask again, as an operator would.
	var err error
	for range 20 {
		if err = r.waitStored(d, name, statemachine.Mirroring); err != nil {
			break
		}
		var res []mirror.TopicResult
		res, err = m.PauseMirrorTopics(ctx, name, []string{topic}, mirror.LifecycleOptions{Wait: true})
		if err == nil {
			err = firstErr(res)
		}
		if admin.CodeOf(err) != admin.CodeInvalidClusterMirrorStates {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: pause %s on %s: %w", ErrStuck, name, d.name, err)
	}
	for p := range r.parts {
		if !d.dest.ReadOnly(topic, p) {
			return violation("paused-read-only", "%s %s-%d: PAUSED but writable", d.name, topic, p)
		}
	}
	res, err := m.ResumeMirrorTopics(ctx, name, []string{topic}, mirror.LifecycleOptions{Wait: true})
	if err == nil {
		err = firstErr(res)
	}
	if err != nil {
		return fmt.Errorf("%w: resume %s on %s: %w", ErrStuck, name, d.name, err)
	}
	r.tracef("pause and resume %s on %s", name, d.name)
	return nil
}

func firstErr(res []mirror.TopicResult) error {
	for _, tr := range res {
		if tr.Err != nil {
			return fmt.Errorf("topic %s: %w", tr.Topic, tr.Err)
		}
	}
	return nil
}

// waitStored waits until the coordinator of d stores state want for every partition of
// the topic in mirror name (what lifecycle operations validate against).
func (r *run) waitStored(d *site, name string, want statemachine.State) error {
	return r.waitUntil(func() (bool, error) {
		m := d.mirror()
		ctx, cancel := r.ctx()
		defer cancel()
		desc, err := m.DescribeClusterMirrors(ctx, []string{name}, mirror.DescribeOptions{IncludeStates: true})
		if err != nil {
			return false, err
		}
		for _, md := range desc {
			for _, td := range md.Topics {
				for _, pd := range td.Partitions {
					if pd.State != want {
						return false, fmt.Errorf("%w: %s %s/%d is %s, waiting for %s", ErrStuck, d.name, name, pd.Partition, pd.State, want)
					}
				}
			}
		}
		return true, nil
	})
}
