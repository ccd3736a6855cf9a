package fetcher

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// batchInfo is what the logs keep from one batch header: enough to maintain
// offsets, the epoch cache and the producer (transaction) state.
type batchInfo struct {
	base          int64
	last          int64
	epoch         int32
	producerID    int64
	producerEpoch int16
	baseSeq       int32
	maxTimestamp  int64
	transactional bool
	control       bool
	controlType   records.ControlType // valid when control
	pos           int                 // position of the batch in the scanned buffer/segment
	size          int                 // whole batch size in bytes
}

func (b batchInfo) next() int64 { return b.last + 1 }

// headerInfo decodes the fixed v2 header fields of one batch from at least
// records.HeaderSize bytes. It does not verify the CRC or the magic byte.
func headerInfo(h []byte) batchInfo {
	_ = h[records.HeaderSize-1]
	attrs := records.Attributes(int16(binary.BigEndian.Uint16(h[21:23])))
	return batchInfo{
		base:          int64(binary.BigEndian.Uint64(h[0:8])),
		last:          int64(binary.BigEndian.Uint64(h[0:8])) + int64(int32(binary.BigEndian.Uint32(h[23:27]))),
		epoch:         int32(binary.BigEndian.Uint32(h[12:16])),
		producerID:    int64(binary.BigEndian.Uint64(h[43:51])),
		producerEpoch: int16(binary.BigEndian.Uint16(h[51:53])),
		baseSeq:       int32(binary.BigEndian.Uint32(h[53:57])),
		maxTimestamp:  int64(binary.BigEndian.Uint64(h[35:43])),
		transactional: attrs.IsTransactional(),
		control:       attrs.IsControl(),
		size:          12 + int(int32(binary.BigEndian.Uint32(h[8:12]))),
	}
}

// checkBatch fully validates one whole batch (structure, magic, CRC, sane
// offsets, control type) and returns its info.
func checkBatch(buf []byte) (batchInfo, error) { return checkBatchCRC(buf, true) }

// checkBatchCRC is checkBatch; verifyCRC false skips only the CRC, for bytes
// whose CRC the caller has just verified (the fetch loop).
func checkBatchCRC(buf []byte, verifyCRC bool) (batchInfo, error) {
	b, err := records.ParseBatch(buf)
	if err != nil {
		return batchInfo{}, err
	}
	if verifyCRC {
		if err := b.VerifyCRC(); err != nil {
			return batchInfo{}, err
		}
	}
	info := headerInfo(b)
	info.size = len(b)
	if info.base < 0 || b.LastOffsetDelta() < 0 || info.base > math.MaxInt64-int64(b.LastOffsetDelta())-1 {
		return batchInfo{}, &records.CorruptError{BaseOffset: info.base, Reason: fmt.Sprintf("invalid offsets: base %d, last offset delta %d", info.base, b.LastOffsetDelta())}
	}
	if info.control {
		ct, err := b.ControlType()
		if err != nil {
			return batchInfo{}, err
		}
		info.controlType = ct
	}
	return info, nil
}

// splitBatches validates that buf is a sequence of whole, CRC-valid v2
// batches with strictly increasing, non-overlapping offsets, the first at or
// after logEnd. Nothing is retained.
func splitBatches(buf []byte, logEnd int64) ([]batchInfo, error) {
	return splitBatchesCRC(buf, logEnd, true)
}

// splitBatchesCRC is splitBatches; verifyCRC false skips only the CRC check
// (see checkBatchCRC).
func splitBatchesCRC(buf []byte, logEnd int64, verifyCRC bool) ([]batchInfo, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: empty input", ErrInvalidBatch)
	}
	var out []batchInfo
	next := logEnd
	for pos := 0; pos < len(buf); {
		info, err := checkBatchCRC(buf[pos:], verifyCRC)
		if err != nil {
			return nil, fmt.Errorf("%w at position %d: %w", ErrInvalidBatch, pos, err)
		}
		if info.base < next {
			return nil, &RegressionError{BaseOffset: info.base, Expected: next}
		}
		info.pos = pos
		pos += info.size
		next = info.next()
		out = append(out, info)
	}
	return out, nil
}

// RegressionError reports an append whose batch starts below the log end (or
// below the end of the previous batch of the same call). It is
// Is(ErrOffsetRegression).
type RegressionError struct {
	BaseOffset int64 // base offset of the refused batch
	Expected   int64 // the smallest acceptable base offset
}

// Error describes the refused batch and the expected offset.
func (e *RegressionError) Error() string {
	return fmt.Sprintf("fetcher: offset regression: batch base offset %d below %d", e.BaseOffset, e.Expected)
}

// Is reports ErrOffsetRegression.
func (e *RegressionError) Is(target error) bool { return target == ErrOffsetRegression }

// OutOfRangeError reports an offset outside [LogStart, LogEnd]. It is
// Is(ErrOffsetOutOfRange).
type OutOfRangeError struct {
	Offset, LogStart, LogEnd int64
}

// Error describes the offset and the valid range.
func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("fetcher: offset out of range: %d not in [%d, %d]", e.Offset, e.LogStart, e.LogEnd)
}

// Is reports ErrOffsetOutOfRange.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// logState is the part of a log that both implementations share: offsets,
// the leader-epoch cache and the producer (open transaction) state. Not safe
// for concurrent use; the owning log guards it.
type logState struct {
	logStart, logEnd, hw int64
	leaderEpoch          int32
	epochs               *epoch.Cache
	open                 map[int64]OpenTxn // producer ID -> open transaction
	producers            ProducerStates    // idempotence state (producers.go)
	readOnly             bool              // client writes refused (see readonly.go)
}

func newLogState(start int64) logState {
	c, _ := epoch.NewCache()
	return logState{logStart: start, logEnd: start, hw: start, leaderEpoch: -1, epochs: c, open: map[int64]OpenTxn{}}
}

// apply records the effects of one appended batch, as Kafka does on append:
// epoch assignment, producer state, log end.
func (s *logState) apply(b batchInfo) {
	if b.epoch >= 0 {
		s.epochs.Assign(b.epoch, b.base)
	}
	s.producers.apply(b.producerID, b.producerEpoch, b.baseSeq, int32(b.last-b.base), b.base, b.maxTimestamp,
		b.transactional, b.control, b.controlType)
	switch {
	case b.control:
		switch b.controlType {
		case records.ControlAbort, records.ControlCommit:
			delete(s.open, b.producerID)
		case records.ControlMirrorPIDReset:
			// The barrier expires every producer entry written before it.
			clear(s.open)
		}
	case b.transactional && b.producerID >= 0:
		if t, ok := s.open[b.producerID]; ok {
			t.ProducerEpoch = b.producerEpoch
			s.open[b.producerID] = t
		} else {
			s.open[b.producerID] = OpenTxn{ProducerID: b.producerID, ProducerEpoch: b.producerEpoch, FirstOffset: b.base}
		}
	}
	if n := b.next(); n > s.logEnd {
		s.logEnd = n
	}
}

// resetTo empties the state at offset (keeping the leader epoch).
func (s *logState) resetTo(offset int64) {
	s.logStart, s.logEnd, s.hw = offset, offset, offset
	c, _ := epoch.NewCache()
	s.epochs = c
	clear(s.open)
	s.producers.reset()
}

func (s *logState) lastStable() int64 {
	lso := s.hw
	for _, t := range s.open {
		if t.FirstOffset < lso {
			lso = t.FirstOffset
		}
	}
	return lso
}

func (s *logState) openTxns() []OpenTxn {
	out := make([]OpenTxn, 0, len(s.open))
	for _, t := range s.open {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out
}

func (s *logState) endOffsetForEpoch(e int32) (int32, int64) {
	return s.epochs.EndOffsetFor(e, s.logEnd)
}

func bumpEpoch(cur, min int32) (int32, error) {
	if cur == math.MaxInt32 || min == math.MaxInt32 {
		return 0, errors.New("fetcher: leader epoch overflow")
	}
	return max(cur+1, min+1), nil
}

// stampLeader validates one control/data batch for AppendAsLeader at the log
// end and returns a copy stamped with the log end and the leader epoch. A data
// batch is refused while the log is read-only, and so is a control batch when
// onlyWritable is set (AppendAsLeaderIfWritable).
func (s *logState) stampLeader(batch []byte, onlyWritable bool) ([]byte, error) {
	base, leaderEpoch := s.logEnd, s.leaderEpoch
	b, err := records.ParseBatch(batch)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	if len(b) != len(batch) {
		return nil, fmt.Errorf("%w: AppendAsLeader takes exactly one batch (%d trailing bytes)", ErrInvalidBatch, len(batch)-len(b))
	}
	if s.readOnly && (onlyWritable || !b.Attributes().IsControl()) {
		return nil, ErrReadOnly
	}
	cp := records.Batch(append([]byte(nil), batch...))
	cp.SetBaseOffset(base)
	cp.SetPartitionLeaderEpoch(leaderEpoch)
	return cp, nil
}

func checkOffset(o int64) error {
	if o < 0 {
		return &OutOfRangeError{Offset: o, LogStart: 0, LogEnd: math.MaxInt64}
	}
	return nil
}
