package dataplane

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// listOffsets serves ListOffsets: earliest (-2, and -4 earliest-local, the
// same here), latest (-1: HW, or LSO for read_committed) through
// fetcher.LocalSource, and a timestamp by scanning batch headers for the
// first batch whose max timestamp reaches it.
func (dp *DataPlane) listOffsets(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.ListOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	iso := fetcher.ReadUncommitted
	if r.Version >= 2 && r.IsolationLevel == fetcher.ReadCommitted {
		iso = fetcher.ReadCommitted
	}
	for _, rt := range r.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		spec, ok := dp.dst.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.Offset, p.Timestamp, p.LeaderEpoch = rp.Partition, -1, -1, -1
			code := fetcher.CodeUnknownTopicOrPartition
			var part partition
			if ok {
				part, code = dp.resolve(spec, rp.Partition)
			}
			if code == fetcher.CodeNone {
				code = dp.listOne(ctx, r.Version, iso, part, rp, &p)
			}
			p.ErrorCode = code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func (dp *DataPlane) listOne(ctx context.Context, version int16, iso int8, part partition, rp kmsg.ListOffsetsRequestTopicPartition, p *kmsg.ListOffsetsResponseTopicPartition) int16 {
	current := int32(-1)
	if version >= 4 {
		current = rp.CurrentLeaderEpoch
	}
	ts := rp.Timestamp
	if ts == -4 { // EARLIEST_LOCAL_TIMESTAMP: no tiered storage, so the log start
		ts = fetcher.EarliestTimestamp
	}
	if ts == fetcher.EarliestTimestamp || ts == fetcher.LatestTimestamp {
		res, err := localSource(iso, part).ListOffsets(ctx, []fetcher.OffsetQuery{{Topic: part.topic, Partition: part.index, CurrentLeaderEpoch: current, Timestamp: ts}})
		if err != nil || len(res) != 1 {
			return codeKafkaStorageError
		}
		p.Offset, p.LeaderEpoch = res[0].Offset, res[0].LeaderEpoch
		return res[0].ErrorCode
	}
	if ts < 0 {
		return fetcher.CodeOffsetNotAvailable // -3 max timestamp, -5 tiered: not kept
	}
	// A leader's fencing applies to timestamp queries too.
	res, err := localSource(iso, part).ListOffsets(ctx, []fetcher.OffsetQuery{{Topic: part.topic, Partition: part.index, CurrentLeaderEpoch: current, Timestamp: fetcher.LatestTimestamp}})
	if err != nil || len(res) != 1 {
		return codeKafkaStorageError
	}
	if res[0].ErrorCode != fetcher.CodeNone {
		return res[0].ErrorCode
	}
	bound := res[0].Offset
	serr := scanBatches(part.log, part.log.LogStartOffset(), func(b records.Batch) bool {
		if b.BaseOffset() >= bound {
			return false
		}
		if !b.Attributes().IsControl() && b.MaxTimestamp() >= ts {
			p.Offset, p.Timestamp, p.LeaderEpoch = b.BaseOffset(), b.MaxTimestamp(), b.PartitionLeaderEpoch()
			return false
		}
		return true
	})
	if serr != nil {
		return codeKafkaStorageError
	}
	return fetcher.CodeNone // offset -1: no record at or after ts, as Kafka answers
}

// offsetForLeaderEpoch serves OffsetForLeaderEpoch with fetcher.LocalSource.
func (dp *DataPlane) offsetForLeaderEpoch(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		spec, ok := dp.dst.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, -1, -1
			code := fetcher.CodeUnknownTopicOrPartition
			var part partition
			if ok {
				part, code = dp.resolve(spec, rp.Partition)
			}
			if code == fetcher.CodeNone {
				res, err := localSource(fetcher.ReadUncommitted, part).OffsetForLeaderEpoch(ctx, []fetcher.EpochQuery{{
					Topic: part.topic, Partition: part.index, CurrentLeaderEpoch: rp.CurrentLeaderEpoch, LeaderEpoch: rp.LeaderEpoch}})
				if err != nil || len(res) != 1 {
					code = codeKafkaStorageError
				} else {
					code, p.LeaderEpoch, p.EndOffset = res[0].ErrorCode, res[0].LeaderEpoch, res[0].EndOffset
				}
			}
			p.ErrorCode = code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
