package mirrorsim

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
)

// errClientWrite wraps the failures of an accepted client write.
var errClientWrite = errors.New("mirrorsim: client write failed")

// clientWrite is the simulation's only client write: it sends batch to partition p of
// site s through the site Destination's Produce (what a broker's Produce handler
// calls) and checks the invariant "read-only-refused": a client write is accepted on a
// partition that is not a mirror partition or whose mirror is STOPPED (the primary:
// writable says so), and refused with READ_ONLY_TOPIC otherwise, without landing in the
// log. The expectation comes from the simulation's own record of the roles, never from
// the destination's read-only flag.
func (r *run) clientWrite(s *site, p int32, batch []byte, writable bool) (int64, error) {
	ctx, cancel := r.ctx()
	defer cancel()
	off, err := s.dest.Produce(ctx, topic, p, batch)
	refused := admin.CodeOf(err) == admin.CodeReadOnlyTopic
	switch {
	case writable && refused:
		return -1, violation("primary-writable", "primary %s %s-%d refused a client write: %v", s.name, topic, p, err)
	case writable && err != nil:
		return -1, fmt.Errorf("%w: %s %s-%d: %w", errClientWrite, s.name, topic, p, err)
	case writable:
		return off, nil
	case err == nil:
		return -1, violation("read-only-refused", "%s %s-%d, a read-only mirror partition (%s), accepted a client write at offset %d",
			s.name, topic, p, r.role(s), off)
	case !refused:
		return -1, violation("read-only-refused", "%s %s-%d refused a client write with %v, not READ_ONLY_TOPIC", s.name, topic, p, err)
	}
	l, lerr := s.dest.log(topic, p)
	if lerr != nil {
		return -1, lerr
	}
	_, raw, lerr := readLog(l)
	if lerr != nil {
		return -1, lerr
	}
	if v := records.Batch(batch); len(batch) >= records.HeaderSize {
		if rs, derr := v.Records(); derr == nil && len(rs) > 0 && bytes.Contains(raw, rs[0].Value) {
			return -1, violation("read-only-refused", "%s %s-%d refused a client write (%v) but the write landed in the log", s.name, topic, p, err)
		}
	}
	return -1, err
}

// strayWrite sends a client write to a partition of a mirror: it must be refused.
func (r *run) strayWrite(d *site) error {
	p := r.rng.Int32N(r.parts)
	r.prod.counter++
	batch, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: simEpoch.UnixMilli() + int64(r.prod.counter)},
		[]records.Record{{Key: []byte("stray"), Value: fmt.Appendf(nil, "seed %d stray write %d to %s", r.seed, r.prod.counter, d.name)}})
	if err != nil {
		return err
	}
	_, err = r.clientWrite(d, p, batch, false)
	if admin.CodeOf(err) != admin.CodeReadOnlyTopic {
		return err
	}
	r.tracef("client write to mirror %s %s-%d: refused (%v)", d.name, topic, p, admin.CodeOf(err))
	return nil
}
