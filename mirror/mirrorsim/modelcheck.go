package mirrorsim

import (
	"fmt"

	"github.com/kmirror/kmirror/fetcher"
)

// checkModel checks the logs of the up sites against the reference model: the primary
// holds every record of the model at its offset ("committed-not-lost" for a committed
// record, "acked-not-lost" for one of a transaction that is open or aborted), and a
// read_committed view of every up site (its data records below its last stable offset,
// without aborted transactions) shows only records the source committed within that
// log's prefix ("read-committed").
func (r *run) checkModel() error {
	for _, s := range r.sites {
		if s.mirror() == nil {
			continue
		}
		for p := range r.parts {
			l, err := s.dest.log(topic, p)
			if err != nil {
				return err
			}
			bs, _, err := readLog(l)
			if err != nil {
				return err
			}
			recs, err := logRecords(bs)
			if err != nil {
				return err
			}
			name := fmt.Sprintf("%s %s-%d", s.name, topic, p)
			if s.idx == r.primary {
				if err := r.checkHolds(name, &r.model[p], recordIndex(recs), l.LogEndOffset(), bs); err != nil {
					return err
				}
			}
			if err := checkReadCommitted(name, &r.model[p], recs, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkHolds checks that a log holds every record of the model.
func (r *run) checkHolds(name string, m *partModel, idx map[int64]logRec, end int64, bs []batchView) error {
	for _, mr := range m.recs {
		if lr, ok := idx[mr.off]; ok && lr.same(mr) {
			continue
		}
		inv := "acked-not-lost"
		if mr.committedBy(end) {
			inv = "committed-not-lost"
		}
		return violation(inv, "%s does not hold the record %v the producer wrote there (log %s)", name, mr, summary(bs))
	}
	return nil
}

// checkReadCommitted checks that a read_committed consumer of l sees only records the
// source committed within l's prefix.
func checkReadCommitted(name string, m *partModel, recs []logRec, l fetcher.Log) error {
	lso, end := l.LastStableOffset(), l.LogEndOffset()
	for _, lr := range recs {
		if lr.off >= lso || lr.aborted {
			continue
		}
		mr, ok := m.byOffset(lr.off)
		switch {
		case !ok || !lr.same(mr):
			return violation("read-committed", "%s: read_committed sees at offset %d (below its last stable offset %d) a record %q the source never wrote there", name, lr.off, lso, lr.value)
		case !mr.committedBy(end):
			return violation("read-committed", "%s: read_committed sees the record %v below its last stable offset %d, but it is not committed within the log's %d offsets", name, mr, lso, end)
		}
	}
	return nil
}
