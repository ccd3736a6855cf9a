package mirrorsim

import (
	"bytes"
	"fmt"

	"github.com/kmirror/kmirror/records"
)

// The reference model: what the simulated producer wrote to the primary and what it
// committed, kept by the simulation from its own writes (never read back from the log
// under test). A failover carries the records the new primary held over to its model;
// an unclean election on the primary cuts it.

// modelRec is one data record of the primary.
type modelRec struct {
	off        int64
	key, value []byte
	txn        bool
	pid        int64
	// decided is the offset where the record became committed or aborted: its own
	// offset for a non-transactional record, its transaction's marker for a
	// transactional one; -1 while the transaction is open.
	decided int64
	aborted bool
}

// committedBy reports whether the record is committed within the first end offsets of
// the partition (its commit is below end).
func (m modelRec) committedBy(end int64) bool {
	return m.decided >= 0 && m.decided < end && !m.aborted
}

// partModel is the model of one partition: its data records by increasing offset.
type partModel struct{ recs []modelRec }

// add records the data records of a batch the primary accepted at base.
func (m *partModel) add(base int64, recs []records.Record, txn bool, pid int64) {
	for _, rec := range recs {
		off := base + int64(rec.OffsetDelta)
		r := modelRec{off: off, key: bytes.Clone(rec.Key), value: bytes.Clone(rec.Value), txn: txn, pid: pid, decided: off}
		if txn {
			r.decided = -1
		}
		m.recs = append(m.recs, r)
	}
}

// decide records a COMMIT or ABORT marker of producer pid at offset off.
func (m *partModel) decide(pid, off int64, abort bool) {
	for i := range m.recs {
		if r := &m.recs[i]; r.txn && r.pid == pid && r.decided < 0 {
			r.decided, r.aborted = off, abort
		}
	}
}

// cut forgets every record at or above off; a transaction whose marker was cut is
// open again.
func (m *partModel) cut(off int64) {
	n := 0
	for _, r := range m.recs {
		if r.off >= off {
			break
		}
		if r.decided >= off {
			r.decided, r.aborted = -1, false
		}
		m.recs[n] = r
		n++
	}
	m.recs = m.recs[:n]
}

// openTxn reports whether producer pid has an open transaction.
func (m *partModel) openTxn(pid int64) bool {
	for _, r := range m.recs {
		if r.txn && r.pid == pid && r.decided < 0 {
			return true
		}
	}
	return false
}

// firstOpen returns the first offset of the oldest transaction still open in the
// first end offsets (its marker, if any, at or above end), or end when there is none:
// the last stable offset a correct log of that prefix has.
func (m *partModel) firstOpen(end int64) int64 {
	for _, r := range m.recs {
		if r.off >= end {
			break
		}
		if r.txn && (r.decided < 0 || r.decided >= end) {
			return r.off
		}
	}
	return end
}

// committed returns the records committed within the first end offsets.
func (m *partModel) committed(end int64) []modelRec {
	var out []modelRec
	for _, r := range m.recs {
		if r.off < end && r.committedBy(end) {
			out = append(out, r)
		}
	}
	return out
}

// failover returns the model of a mirror that held the first end offsets of this
// partition and kept, after STOPPING, its data records below keep: transactions
// undecided there were aborted by the stop (markers at or above end).
func (m *partModel) failover(end, keep int64) partModel {
	var out partModel
	for _, r := range m.recs {
		if r.off >= min(end, keep) {
			break
		}
		if r.txn && (r.decided < 0 || r.decided >= end) {
			r.decided, r.aborted = end, true
		}
		out.recs = append(out.recs, r)
	}
	return out
}

// byOffset returns the record of the model at off.
func (m *partModel) byOffset(off int64) (modelRec, bool) {
	lo, hi := 0, len(m.recs)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.recs[mid].off < off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(m.recs) && m.recs[lo].off == off {
		return m.recs[lo], true
	}
	return modelRec{}, false
}

// logRec is one data record as a log holds it.
type logRec struct {
	off        int64
	key, value []byte
	txn        bool
	pid        int64
	aborted    bool // an ABORT marker of its producer follows before any COMMIT
}

// logRecords decodes the data records of a log's batches, marking those a
// read_committed consumer filters out as aborted (the first end-transaction marker of
// their producer after them is an ABORT, as the aborted-transactions index of a fetch
// says).
func logRecords(bs []batchView) ([]logRec, error) {
	next := map[int64]records.ControlType{} // producer -> type of the next marker seen (scanning backwards)
	abortedAt := make([]bool, len(bs))
	for i := len(bs) - 1; i >= 0; i-- {
		b := records.Batch(bs[i].raw)
		if !b.Attributes().IsTransactional() {
			continue
		}
		if b.Attributes().IsControl() {
			t, err := b.ControlType()
			if err != nil {
				return nil, violation("log-well-formed", "control batch at %d: %v", bs[i].base, err)
			}
			if t == records.ControlAbort || t == records.ControlCommit {
				next[b.ProducerID()] = t
			}
			continue
		}
		t, ok := next[b.ProducerID()]
		abortedAt[i] = ok && t == records.ControlAbort
	}
	var out []logRec
	for i, v := range bs {
		b := records.Batch(v.raw)
		if b.Attributes().IsControl() {
			continue
		}
		recs, err := b.Records()
		if err != nil {
			return nil, violation("log-well-formed", "batch at %d: %v", v.base, err)
		}
		for _, rec := range recs {
			out = append(out, logRec{off: v.base + int64(rec.OffsetDelta), key: rec.Key, value: rec.Value,
				txn: b.Attributes().IsTransactional(), pid: b.ProducerID(), aborted: abortedAt[i]})
		}
	}
	return out, nil
}

// same reports whether the log holds the model's record.
func (lr logRec) same(m modelRec) bool {
	return bytes.Equal(lr.key, m.key) && bytes.Equal(lr.value, m.value) && lr.txn == m.txn && (!m.txn || lr.pid == m.pid)
}

func (m modelRec) String() string {
	kind := "plain"
	switch {
	case m.txn && m.decided < 0:
		kind = fmt.Sprintf("txn pid=%d open", m.pid)
	case m.txn && m.aborted:
		kind = fmt.Sprintf("txn pid=%d aborted at %d", m.pid, m.decided)
	case m.txn:
		kind = fmt.Sprintf("txn pid=%d committed at %d", m.pid, m.decided)
	}
	return fmt.Sprintf("%d %q (%s)", m.off, m.value, kind)
}

// recordIndex indexes a log's records by offset.
func recordIndex(recs []logRec) map[int64]logRec {
	out := make(map[int64]logRec, len(recs))
	for _, lr := range recs {
		out[lr.off] = lr
	}
	return out
}
