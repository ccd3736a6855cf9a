package fetcher

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/kmirror/kmirror/records"
)

// ErrFidelityMismatch is the sentinel of every *FidelityMismatchError.
var ErrFidelityMismatch = errors.New("fetcher: destination differs from source")

// FidelityMismatchError reports a mirrored batch that is not the source's batch at the
// same offset: the v2 batch headers differ (base offset, last offset delta, length,
// partition leader epoch or CRC-32C, which covers every byte from the attributes on).
// A byte-for-byte mirror never produces one; it means the destination log was changed
// behind the mirror's back or the source rewrote history it had already served. It is
// Is(ErrFidelityMismatch).
type FidelityMismatchError struct {
	TopicPartition
	// Offset is the base offset of the first differing destination batch.
	Offset int64
	// SourceCRC is the source batch's CRC-32C field; DestinationCRC is the CRC-32C
	// computed over the destination batch's bytes (its field when they are intact).
	SourceCRC, DestinationCRC uint32
	// SourceLastOffset and DestinationLastOffset are the batches' last offsets.
	SourceLastOffset, DestinationLastOffset int64
	// SourceEpoch and DestinationEpoch are the partition leader epochs of the batches.
	SourceEpoch, DestinationEpoch int32
}

func (e *FidelityMismatchError) Error() string {
	return fmt.Sprintf("fetcher: fidelity mismatch: %s at offset %d: source batch crc %08x (last offset %d, epoch %d), destination batch crc %08x (last offset %d, epoch %d)",
		e.TopicPartition, e.Offset, e.SourceCRC, e.SourceLastOffset, e.SourceEpoch,
		e.DestinationCRC, e.DestinationLastOffset, e.DestinationEpoch)
}

// Is matches ErrFidelityMismatch.
func (e *FidelityMismatchError) Is(target error) bool { return target == ErrFidelityMismatch }

// DefaultVerifyMaxBytes is the default VerifyConfig.MaxBytes: how much of each
// partition one check re-reads from the source.
const DefaultVerifyMaxBytes int32 = 64 << 10

// VerifyTarget is one partition to check: its destination Log, compared from From
// (the first offset not yet verified; below the log start it starts at the log start).
type VerifyTarget struct {
	Topic     string
	TopicID   records.UUID // needed by Kafka sources for Fetch v13+; zero when unknown
	Partition int32
	Log       Log
	From      int64
}

// TP returns the target's TopicPartition.
func (t VerifyTarget) TP() TopicPartition { return TopicPartition{t.Topic, t.Partition} }

// VerifyResult is the outcome of one check of one partition.
type VerifyResult struct {
	TopicPartition
	// VerifiedUpTo is the offset the next check starts from: every batch below it,
	// from the target's From, that the source still holds was compared and is
	// identical. Offsets the source no longer holds (below its log start, or removed
	// by its log cleaner) cannot be compared and are passed over. Equal to From when
	// nothing was compared.
	VerifiedUpTo int64
	// Compared is the number of batches found identical in this check.
	Compared int
	// SourceHighWatermark and SourceLogStart are the source's answer, -1 when the
	// source was not reached.
	SourceHighWatermark, SourceLogStart int64
	// SourceBytes is how many record bytes the source returned.
	SourceBytes int
	// Mismatch is set when a mirrored batch differs from the source's (confirmed by a
	// second read of both sides); VerifiedUpTo is then its offset.
	Mismatch *FidelityMismatchError
	// Err is set when the partition could not be checked this time (source or log
	// error); nothing else is then meaningful but From in VerifiedUpTo.
	Err error
}

// Verifier compares mirrored batches with the source's, a small range per partition
// per Check: the source is asked for at most MaxBytes of every partition, from offsets
// already mirrored, with one Fetch per source leader. Only batch headers are compared
// (the CRC-32C covers the rest), so the destination is read, not decoded. A Verifier
// is safe for concurrent use; Requests and Bytes count what it asked of the source.
type Verifier struct {
	src      Source
	maxBytes int32

	stats verifyStats
}

type verifyStats struct {
	requests, bytes atomic.Int64
}

// NewVerifier returns a Verifier reading from src at most maxBytes per partition per
// check (DefaultVerifyMaxBytes when 0 or less).
func NewVerifier(src Source, maxBytes int32) *Verifier {
	if maxBytes <= 0 {
		maxBytes = DefaultVerifyMaxBytes
	}
	return &Verifier{src: src, maxBytes: maxBytes}
}

// SourceLoad returns the Fetch requests sent and the record bytes read from the source
// so far.
func (v *Verifier) SourceLoad() (requests, bytes int64) {
	return v.stats.requests.Load(), v.stats.bytes.Load()
}

// Check runs one check of every target and returns one result per target, in order.
// It honours ctx: a cancelled check returns results with Err set.
func (v *Verifier) Check(ctx context.Context, targets []VerifyTarget) []VerifyResult {
	out := make([]VerifyResult, len(targets))
	byLeader := map[int32][]int{}
	var leaders []int32
	for i, t := range targets {
		out[i] = VerifyResult{TopicPartition: t.TP(), VerifiedUpTo: t.From, SourceHighWatermark: -1, SourceLogStart: -1}
		if ls := t.Log.LogStartOffset(); out[i].VerifiedUpTo < ls {
			out[i].VerifiedUpTo = ls
		}
		info, err := v.src.PartitionInfo(ctx, t.Topic, t.Partition, false)
		if err != nil {
			out[i].Err = err
			continue
		}
		if _, ok := byLeader[info.Leader]; !ok {
			leaders = append(leaders, info.Leader)
		}
		byLeader[info.Leader] = append(byLeader[info.Leader], i)
	}
	for _, l := range leaders {
		idx := byLeader[l]
		reqs := make([]FetchPartition, len(idx))
		for j, i := range idx {
			reqs[j] = v.request(targets[i], out[i].VerifiedUpTo)
		}
		res, err := v.fetch(ctx, reqs)
		for j, i := range idx {
			if err != nil {
				out[i].Err = err
				continue
			}
			v.compare(ctx, targets[i], reqs[j], res[j], &out[i])
		}
	}
	return out
}

func (v *Verifier) request(t VerifyTarget, from int64) FetchPartition {
	return FetchPartition{Topic: t.Topic, TopicID: t.TopicID, Partition: t.Partition, FetchOffset: from,
		LastFetchedEpoch: -1, CurrentLeaderEpoch: -1, MaxBytes: v.maxBytes}
}

// fetch sends one Fetch and checks the answer's shape.
func (v *Verifier) fetch(ctx context.Context, reqs []FetchPartition) ([]FetchResult, error) {
	v.stats.requests.Add(1)
	res, err := v.src.Fetch(ctx, reqs)
	if err != nil {
		return nil, err
	}
	if len(res) != len(reqs) {
		return nil, fmt.Errorf("%w: verify fetch of %d partitions answered %d", ErrProtocol, len(reqs), len(res))
	}
	for i := range res {
		v.stats.bytes.Add(int64(len(res[i].Records)))
		if res[i].TP() != reqs[i].TP() {
			return nil, fmt.Errorf("%w: verify fetch answered %s for %s", ErrProtocol, res[i].TP(), reqs[i].TP())
		}
	}
	return res, nil
}

// compare fills r from the source's answer res for target t.
func (v *Verifier) compare(ctx context.Context, t VerifyTarget, req FetchPartition, res FetchResult, r *VerifyResult) {
	r.SourceHighWatermark, r.SourceLogStart, r.SourceBytes = res.HighWatermark, res.LogStartOffset, len(res.Records)
	switch {
	case res.ErrorCode == CodeOffsetOutOfRange:
		r.SourceHighWatermark, r.SourceLogStart = -1, -1
		// Below the source's log start: those offsets are gone on the source and
		// cannot be compared; the next check starts at the source's log start.
		start, err := v.sourceLogStart(ctx, t)
		if err != nil {
			r.Err = err
			return
		}
		r.SourceLogStart = start
		if start > r.VerifiedUpTo {
			r.VerifiedUpTo = min(start, t.Log.LogEndOffset())
		}
		return
	case res.ErrorCode != CodeNone:
		r.Err = &SourceError{TopicPartition: t.TP(), Op: "Fetch (verify)", Code: res.ErrorCode}
		return
	}
	upTo, n, mm, err := compareBatches(t.Log, req.FetchOffset, res.Records)
	if err != nil {
		r.Err = err
		return
	}
	r.VerifiedUpTo, r.Compared = max(upTo, r.VerifiedUpTo), n
	if mm == nil {
		return
	}
	// Confirm: the fetcher may have truncated and re-appended the destination (a
	// divergence) between the two reads; read both sides again at the offset.
	again, err := v.fetch(ctx, []FetchPartition{v.request(t, mm.Offset)})
	if err != nil {
		r.Err = err
		return
	}
	if again[0].ErrorCode != CodeNone {
		r.Err = &SourceError{TopicPartition: t.TP(), Op: "Fetch (verify)", Code: again[0].ErrorCode}
		return
	}
	_, _, mm2, err := compareBatches(t.Log, mm.Offset, again[0].Records)
	if err != nil {
		r.Err = err
		return
	}
	if mm2 != nil && mm2.Offset == mm.Offset {
		mm2.TopicPartition = t.TP()
		r.Mismatch = mm2
		r.VerifiedUpTo = mm.Offset
	}
}

func (v *Verifier) sourceLogStart(ctx context.Context, t VerifyTarget) (int64, error) {
	rs, err := v.src.ListOffsets(ctx, []OffsetQuery{{Topic: t.Topic, Partition: t.Partition, CurrentLeaderEpoch: -1, Timestamp: EarliestTimestamp}})
	if err != nil {
		return -1, err
	}
	if len(rs) != 1 {
		return -1, fmt.Errorf("%w: ListOffsets answered %d partitions", ErrProtocol, len(rs))
	}
	if rs[0].ErrorCode != CodeNone {
		return -1, &SourceError{TopicPartition: t.TP(), Op: "ListOffsets (verify)", Code: rs[0].ErrorCode}
	}
	return rs[0].Offset, nil
}

// compareBatches compares the complete source batches src (fetched from offset from)
// with the destination log's batches at the same offsets, up to the log's end. It
// returns the offset after the last batch compared or passed over, the number found
// identical, and the first mismatch.
func compareBatches(log Log, from int64, src []byte) (int64, int, *FidelityMismatchError, error) {
	upTo, n := from, 0
	limit := log.LogEndOffset()
	if from >= limit || len(src) == 0 {
		return upTo, 0, nil, nil
	}
	dst, err := log.Read(max(from, log.LogStartOffset()), len(src)+int(records.HeaderSize))
	if err != nil {
		var oor *OutOfRangeError
		if errors.As(err, &oor) {
			return upTo, 0, nil, nil // truncated meanwhile; compared at the next check
		}
		return upTo, 0, nil, err
	}
	si, di := records.NewIterator(src), records.NewIterator(dst)
	okS, okD := si.Next(), di.Next()
	for okS {
		s := si.Batch()
		if s.NextOffset() > limit {
			break // not mirrored yet
		}
		if s.LastOffset() < from {
			okS = si.Next()
			continue
		}
		if !okD {
			break // the read stopped at its byte budget
		}
		d := di.Batch()
		switch {
		case d.LastOffset() < s.BaseOffset():
			// The source no longer holds d's offsets (its cleaner removed them).
			upTo = max(upTo, d.NextOffset())
			okD = di.Next()
			continue
		case s.LastOffset() < d.BaseOffset():
			// The destination no longer holds s's offsets (its log start moved).
			upTo = max(upTo, s.NextOffset())
			okS = si.Next()
			continue
		}
		// The destination's bytes are checked against its own CRC too: a batch
		// changed under an intact header differs from the source as well.
		if dcrc := d.ComputeCRC(); !sameHeader(s, d) || dcrc != d.CRC() {
			return upTo, n, &FidelityMismatchError{Offset: d.BaseOffset(),
				SourceCRC: s.CRC(), DestinationCRC: dcrc,
				SourceLastOffset: s.LastOffset(), DestinationLastOffset: d.LastOffset(),
				SourceEpoch: s.PartitionLeaderEpoch(), DestinationEpoch: d.PartitionLeaderEpoch()}, nil
		}
		n++
		upTo = max(upTo, s.NextOffset())
		okS, okD = si.Next(), di.Next()
	}
	if err := si.Err(); err != nil {
		return upTo, n, nil, fmt.Errorf("fetcher: verify: source batches: %w", err)
	}
	if err := di.Err(); err != nil {
		return upTo, n, nil, fmt.Errorf("fetcher: verify: destination batches: %w", err)
	}
	return upTo, n, nil, nil
}

// sameHeader reports whether two v2 batches have the same header: base offset, length,
// partition leader epoch, last offset delta and CRC-32C (which covers the attributes,
// producer fields, timestamps and every record).
func sameHeader(a, b records.Batch) bool {
	return a.BaseOffset() == b.BaseOffset() && a.BatchLength() == b.BatchLength() &&
		a.PartitionLeaderEpoch() == b.PartitionLeaderEpoch() && a.LastOffsetDelta() == b.LastOffsetDelta() &&
		a.CRC() == b.CRC()
}
