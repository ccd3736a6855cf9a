package records

// CommittedBatches returns the data batches of bs (in log order) that a read_committed
// consumer receives when it reads up to the last stable offset lso: control batches are
// dropped, so is every batch at or after lso, and so is every transactional batch whose
// transaction ended with an ABORT marker of its producer. A transactional batch belongs to
// the transaction its producer's next marker (COMMIT or ABORT) ends; one with no marker
// after it in bs is open, and lies at or after lso in a consistent log. It is what a
// broker's AbortedTransactions list lets a consumer compute, applied to whole batches.
// A control batch whose record cannot be decoded counts as ending nothing.
func CommittedBatches(bs []Batch, lso int64) []Batch {
	aborted := make(map[int]bool)
	pending := make(map[int64][]int) // producer id -> indexes of its open transactional batches
	for i, b := range bs {
		a := b.Attributes()
		switch {
		case a.IsControl() && a.IsTransactional():
			typ, err := b.ControlType()
			if err != nil || (typ != ControlAbort && typ != ControlCommit) {
				continue
			}
			for _, j := range pending[b.ProducerID()] {
				aborted[j] = typ == ControlAbort
			}
			delete(pending, b.ProducerID())
		case a.IsTransactional():
			pending[b.ProducerID()] = append(pending[b.ProducerID()], i)
		}
	}
	var out []Batch
	for i, b := range bs {
		if b.Attributes().IsControl() || aborted[i] || b.BaseOffset() >= lso {
			continue
		}
		out = append(out, b)
	}
	return out
}
