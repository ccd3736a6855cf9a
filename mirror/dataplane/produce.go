package dataplane

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// produce serves Produce (acks 0, 1 and -1 are the same for a one-replica
// log: the high watermark moves on append). Each partition is validated
// whole before anything is appended; a refused partition appends nothing.
func (dp *DataPlane) produce(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	badAcks := r.Acks != 0 && r.Acks != 1 && r.Acks != -1
	for _, rt := range r.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		spec, ok := dp.dst.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = rp.Partition, -1, -1, -1
			var msg string
			switch {
			case badAcks:
				p.ErrorCode = codeInvalidRequiredAcks
			case !ok:
				p.ErrorCode = fetcher.CodeUnknownTopicOrPartition
			default:
				p.ErrorCode, msg = dp.produceOne(ctx, spec, r.TransactionID, rp, &p)
			}
			if msg != "" && r.Version >= 8 {
				p.ErrorMessage = &msg
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if r.Acks == 0 {
		return nil, admin.ErrNoResponse
	}
	return resp, nil
}

// validateBatches checks that recs is one or more whole, CRC-valid v2 data
// batches within the size limit, as a leader does before appending
// (LogValidator); it returns them, or a Kafka code and a message.
func (dp *DataPlane) validateBatches(recs []byte) ([]records.Batch, int16, string) {
	if len(recs) > dp.cfg.MaxMessageBytes {
		return nil, codeMessageTooLarge, "records exceed the message size limit"
	}
	if len(recs) == 0 {
		return nil, codeCorruptMessage, "no record batch"
	}
	var out []records.Batch
	for pos := 0; pos < len(recs); {
		b, err := records.ParseBatch(recs[pos:])
		switch {
		case err != nil && len(recs)-pos >= 17 && int8(recs[pos+16]) != 2:
			return nil, codeUnsupportedForMessageFmt, "only v2 record batches are accepted"
		case err != nil:
			return nil, codeCorruptMessage, err.Error()
		}
		if err := b.VerifyCRC(); err != nil {
			return nil, codeCorruptMessage, err.Error()
		}
		a := b.Attributes()
		switch {
		case a.IsControl():
			return nil, codeInvalidRecord, "clients may not write control batches"
		case b.LastOffsetDelta() < 0 || b.NumRecords() != b.LastOffsetDelta()+1:
			return nil, codeInvalidRecord, "record count does not match the last offset delta"
		case a.IsTransactional() && b.ProducerID() < 0:
			return nil, codeInvalidRecord, "transactional batch without a producer id"
		case b.ProducerID() >= 0 && b.BaseSequence() < 0:
			return nil, codeInvalidRecord, "idempotent batch without a sequence"
		}
		out = append(out, b)
		pos += len(b)
	}
	return out, fetcher.CodeNone, ""
}

// produceOne appends one partition's batches through the Writer after the
// validation, transaction (txn_produce.go) and sequence checks.
func (dp *DataPlane) produceOne(ctx context.Context, spec mirror.TopicSpec, txnID *string, rp kmsg.ProduceRequestTopicPartition, p *kmsg.ProduceResponseTopicPartition) (int16, string) {
	part, code := dp.resolve(spec, rp.Partition)
	if code != fetcher.CodeNone {
		return code, ""
	}
	batches, code, msg := dp.validateBatches(rp.Records)
	if code != fetcher.CodeNone {
		return code, msg
	}
	tp := mirror.TopicPartition{Topic: spec.Name, Partition: rp.Partition}
	pp := dp.producersOf(tp)
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if err := pp.load(part.log); err != nil {
		return codeKafkaStorageError, err.Error()
	}
	e, code, msg := dp.txnCheck(txnID, tp, batches)
	if code != fetcher.CodeNone {
		return code, msg
	}
	if e != nil {
		defer e.mu.Unlock() // held across the append: an EndTxn cannot prepare in between
	}
	inReq := map[int64]int32{} // producer -> last sequence of its earlier batch in this request
	for i, b := range batches {
		if b.ProducerID() < 0 {
			continue
		}
		if last, ok := inReq[b.ProducerID()]; ok {
			if b.BaseSequence() != seqAdd(last, 1) {
				return codeOutOfOrderSequence, "batches of one producer out of sequence within the request"
			}
			inReq[b.ProducerID()] = lastSeqOf(b)
			continue
		}
		inReq[b.ProducerID()] = lastSeqOf(b)
		dup, code := pp.check(b)
		if code != fetcher.CodeNone {
			return code, "sequence check failed"
		}
		if dup >= 0 {
			if len(batches) != 1 || i != 0 {
				return codeOutOfOrderSequence, "a retried batch among new ones"
			}
			p.BaseOffset, p.LogStartOffset = dup, part.log.LogStartOffset()
			return fetcher.CodeNone, ""
		}
	}
	end := part.log.LogEndOffset()
	base, err := dp.writer.Produce(ctx, spec.Name, rp.Partition, rp.Records)
	if e != nil {
		e.accepted(tp, end, part.log.LogEndOffset()) // the partitions EndTxn marks
	}
	if err != nil {
		pp.loadedEnd = -1 // the log may hold part of it: reload on the next produce
		return writeCode(err), err.Error()
	}
	next := base
	for _, b := range batches {
		if b.ProducerID() >= 0 {
			pp.record(b, next)
		}
		next += int64(b.LastOffsetDelta()) + 1
	}
	pp.loadedEnd = part.log.LogEndOffset()
	p.BaseOffset, p.LogStartOffset = base, part.log.LogStartOffset()
	dp.appended()
	return fetcher.CodeNone, ""
}

// writeCode maps a Writer error to a Kafka code: the code of an
// *admin.Error (READ_ONLY_TOPIC), CORRUPT_MESSAGE for a batch the log
// refused, KAFKA_STORAGE_ERROR otherwise.
func writeCode(err error) int16 {
	var ae *admin.Error
	switch {
	case errors.As(err, &ae):
		return int16(ae.Code)
	case errors.Is(err, fetcher.ErrInvalidBatch):
		return codeCorruptMessage
	}
	return codeKafkaStorageError
}
