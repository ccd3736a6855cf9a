package fetcher

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/records"
)

// Errors of WriteTxnMarker.
var (
	// ErrUnknownProducer is returned (inside a *MarkerError) for a COMMIT or
	// ABORT marker of a producer that has no open transaction in the log:
	// nothing is written, so a marker never closes a transaction it does not
	// belong to.
	ErrUnknownProducer = errors.New("fetcher: no open transaction for the marker's producer")
	// ErrProducerFenced is returned (inside a *MarkerError) for a marker whose
	// producer epoch is below the epoch of the open transaction, as Kafka's
	// leader refuses such a marker (ProducerStateManager): nothing is written.
	ErrProducerFenced = errors.New("fetcher: marker producer epoch below the open transaction's")
)

// MarkerError describes a refused transaction marker.
type MarkerError struct {
	ProducerID    int64
	ProducerEpoch int16
	// Open is the producer's open transaction, nil when it has none.
	Open *OpenTxn
	Err  error // ErrUnknownProducer or ErrProducerFenced
}

// Error implements error.
func (e *MarkerError) Error() string {
	if e.Open == nil {
		return fmt.Sprintf("%v: producer %d epoch %d", e.Err, e.ProducerID, e.ProducerEpoch)
	}
	return fmt.Sprintf("%v: producer %d epoch %d, open transaction at offset %d with epoch %d",
		e.Err, e.ProducerID, e.ProducerEpoch, e.Open.FirstOffset, e.Open.ProducerEpoch)
}

// Unwrap returns ErrUnknownProducer or ErrProducerFenced.
func (e *MarkerError) Unwrap() error { return e.Err }

// TxnMarker is one transaction marker to write as leader.
type TxnMarker struct {
	ProducerID    int64
	ProducerEpoch int16
	// Commit selects COMMIT; false writes ABORT.
	Commit bool
	// CoordinatorEpoch is written in the marker's value (the transaction
	// coordinator's epoch; 0 for markers kmirror writes itself).
	CoordinatorEpoch int32
	// Timestamp is the marker's timestamp in milliseconds.
	Timestamp int64
	// OnlyIfWritable refuses the marker with an error Is(ErrReadOnly) while the log
	// is read-only (a mirror partition that is not STOPPED), nothing appended: set
	// for the markers of a transaction of a client of this site, never for the
	// library's own (STOPPING's ABORT markers). The check is atomic with the append
	// on a log implementing WritableAppender (MemoryLog, FileLog); on another Log it
	// is made just before the append.
	OnlyIfWritable bool
}

// WriteTxnMarker appends, as leader (at the log's LeaderEpoch), the COMMIT or
// ABORT marker that ends the open transaction of m.ProducerID, the way Kafka's
// leader appends a marker sent by a transaction coordinator (WriteTxnMarkers):
// a transactional control batch of that producer and epoch with one control
// record. A producer with no open transaction, or a marker epoch below the
// transaction's, is refused with a *MarkerError and nothing is appended; so is a
// marker with OnlyIfWritable into a read-only log, with an error Is(ErrReadOnly).
func WriteTxnMarker(log Log, m TxnMarker) (int64, error) {
	open, ok := openTxnOf(log, m.ProducerID)
	if !ok {
		return -1, &MarkerError{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Err: ErrUnknownProducer}
	}
	if m.ProducerEpoch < open.ProducerEpoch {
		return -1, &MarkerError{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Open: &open, Err: ErrProducerFenced}
	}
	typ := records.ControlAbort
	if m.Commit {
		typ = records.ControlCommit
	}
	batch := records.BuildControlBatch(records.ControlBatchSpec{Type: typ, ProducerID: m.ProducerID,
		ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch, Timestamp: m.Timestamp})
	if !m.OnlyIfWritable {
		return log.AppendAsLeader(batch)
	}
	if wa, ok := log.(WritableAppender); ok {
		return wa.AppendAsLeaderIfWritable(batch)
	}
	if log.ReadOnly() {
		return -1, ErrReadOnly
	}
	return log.AppendAsLeader(batch)
}

// openTxnOf returns the open transaction of producer id.
func openTxnOf(log Log, id int64) (OpenTxn, bool) {
	for _, t := range log.OpenTransactions() {
		if t.ProducerID == id {
			return t, true
		}
	}
	return OpenTxn{}, false
}

// AbortOpenTransactions appends an ABORT marker for every transaction open in
// log, oldest first, each with the transaction's own producer id and epoch,
// and returns the transactions it closed. Afterwards the log's LSO equals its
// high watermark and no mirrored record is lost: a read_committed reader skips
// the aborted records through the markers. It is idempotent: a transaction
// closed by an earlier call is no longer open. On an error the transactions
// aborted so far are returned with it.
func AbortOpenTransactions(log Log, timestamp int64) ([]OpenTxn, error) {
	var done []OpenTxn
	for _, t := range log.OpenTransactions() {
		if _, err := WriteTxnMarker(log, TxnMarker{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch, Timestamp: timestamp}); err != nil {
			return done, fmt.Errorf("fetcher: abort the transaction of producer %d at offset %d: %w", t.ProducerID, t.FirstOffset, err)
		}
		done = append(done, t)
	}
	return done, nil
}
