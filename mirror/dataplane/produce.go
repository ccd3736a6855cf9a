package dataplane

import (
	"context"
	"errors"
	"fmt"

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
				p.ErrorCode, msg = dp.produceOne(ctx, spec, r.Version, r.TransactionID, rp, &p)
			}
			p.ErrorCode, msg = forClient(kmsg.Produce, r.Version, p.ErrorCode, msg)
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

// validateBatches checks a client's records for one partition the way a
// Kafka partition leader does before appending (ProduceRequest's record
// checks, the log's append analysis and LogValidator for a client origin;
// validate.go has the topic's rules and the codes): exactly one whole v2
// batch within the size limit that records.ValidateClientBatch accepts,
// zstd only from Produce v7 on. It returns the batch and the bytes to
// append, which are recs itself unless the leader stamped the header (the
// max timestamp, LogAppendTime), then a stamped copy: the request's bytes
// are never written. A refusal returns a Kafka code and a message and
// appends nothing. Only client Produce calls it: mirrored batches never
// pass here and stay byte-exact. appendTime is the time the leader stamped
// under LogAppendTime (the response's LogAppendTime), else -1.
func (dp *DataPlane) validateBatches(spec mirror.TopicSpec, version int16, recs []byte) (_ []records.Batch, _ []byte, appendTime int64, _ int16, _ string) {
	rules, maxBytes := dp.clientRules(spec)
	if len(recs) > maxBytes {
		return nil, nil, -1, codeMessageTooLarge, fmt.Sprintf("the records are %d bytes, more than max.message.bytes %d", len(recs), maxBytes)
	}
	if len(recs) == 0 {
		return nil, nil, -1, codeInvalidRecord, "a produce must hold one record batch per partition"
	}
	if len(recs) > 16 && int8(recs[16]) != 2 {
		return nil, nil, -1, codeInvalidRecord, fmt.Sprintf("magic %d: only v2 record batches are accepted", int8(recs[16]))
	}
	b, err := records.ParseBatch(recs)
	if err != nil {
		return nil, nil, -1, codeCorruptMessage, err.Error()
	}
	if len(b) != len(recs) {
		if _, err := records.ParseBatch(recs[len(b):]); err != nil {
			return nil, nil, -1, codeCorruptMessage, "bytes after the record batch: " + err.Error()
		}
		return nil, nil, -1, codeInvalidRecord, "a produce must hold exactly one record batch per partition"
	}
	if version < 7 && b.Attributes().Compression() == records.CompressionZstd {
		return nil, nil, -1, codeUnsupportedCompression, fmt.Sprintf("produce v%d may not use zstd compression (v7 or later)", version)
	}
	info, err := records.ValidateClientBatch(b, rules)
	if err != nil {
		return nil, nil, -1, validationCode(err), err.Error()
	}
	if rules.LogAppendTime || info.MaxTimestamp != b.MaxTimestamp() {
		stamped := records.Batch(append([]byte(nil), b...))
		records.StampClientBatch(stamped, info, rules.LogAppendTime)
		b, recs = stamped, stamped
	}
	appendTime = -1
	if rules.LogAppendTime {
		appendTime = info.MaxTimestamp
	}
	return []records.Batch{b}, recs, appendTime, fetcher.CodeNone, ""
}

// produceOne appends one partition's batches through the Writer after the
// validation, transaction (txn_produce.go) and sequence checks.
func (dp *DataPlane) produceOne(ctx context.Context, spec mirror.TopicSpec, version int16, txnID *string, rp kmsg.ProduceRequestTopicPartition, p *kmsg.ProduceResponseTopicPartition) (int16, string) {
	part, code := dp.resolve(spec, rp.Partition)
	if code != fetcher.CodeNone {
		return code, ""
	}
	if part.log.ReadOnly() {
		// Kafka refuses a write to an internal topic before it looks at the
		// records; the Writer checks again under the log's lock.
		return int16(admin.CodeReadOnlyTopic), fmt.Sprintf("%s-%d is a mirror partition and accepts writes only once STOPPED", spec.Name, rp.Partition)
	}
	batches, recs, appendTime, code, msg := dp.validateBatches(spec, version, rp.Records)
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
	base, err := dp.writer.Produce(ctx, spec.Name, rp.Partition, recs)
	if e != nil {
		e.accepted(tp, end, part.log.LogEndOffset()) // the partitions EndTxn marks
	}
	if err != nil {
		pp.loadedEnd = -1 // the log may hold part of it: reload on the next produce
		return writeCode(err)
	}
	next := base
	for _, b := range batches {
		if b.ProducerID() >= 0 {
			pp.record(b, next)
		}
		next += int64(b.LastOffsetDelta()) + 1
	}
	pp.loadedEnd = part.log.LogEndOffset()
	p.BaseOffset, p.LogStartOffset, p.LogAppendTime = base, part.log.LogStartOffset(), appendTime
	dp.appended()
	return fetcher.CodeNone, ""
}

// writeCode maps a Writer error to a Kafka code and message: the code and
// message of an *admin.Error (READ_ONLY_TOPIC, which forClient turns into
// the code a Kafka client knows), CORRUPT_MESSAGE for a batch the log
// refused, KAFKA_STORAGE_ERROR otherwise.
func writeCode(err error) (int16, string) {
	var ae *admin.Error
	switch {
	case errors.As(err, &ae):
		return int16(ae.Code), ae.Message
	case errors.Is(err, fetcher.ErrInvalidBatch):
		return codeCorruptMessage, err.Error()
	}
	return codeKafkaStorageError, err.Error()
}
