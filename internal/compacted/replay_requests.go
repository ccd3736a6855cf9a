package compacted

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The kmsg requests of a replay: Metadata for the partition's leader, then Fetch and
// ListOffsets sent to that leader through the Log's kgo client.

// Kafka protocol values of the replay requests.
const (
	isolationReadUncommitted int8  = 0
	isolationReadCommitted   int8  = 1
	timestampEarliest        int64 = -2
	timestampLatest          int64 = -1
	// fetchTopicIDVersion is the first Fetch version that names topics by id.
	fetchTopicIDVersion = 13
)

var (
	codeOffsetOutOfRange = kerr.OffsetOutOfRange.Code
	codeLeaderNotAvail   = kerr.LeaderNotAvailable.Code
	codeUnknownPartition = kerr.UnknownTopicOrPartition.Code
	codeReplicaNotAvail  = kerr.ReplicaNotAvailable.Code
)

// errUnexpectedResponse is a response of another type than the request's.
var errUnexpectedResponse = errors.New("compacted: unexpected response type")

// fetchAnswer is the partition's part of one Fetch response.
type fetchAnswer struct {
	fetched
	outOfRange        bool // OFFSET_OUT_OF_RANGE
	hw, lso, logStart int64
}

// leader returns the partition's leader, looked up with a Metadata request when not
// known; the lookup also tells the kgo client the brokers' addresses.
func (rp *replay) leader(ctx context.Context) (int32, error) {
	if rp.leaderID >= 0 {
		return rp.leaderID, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(rp.l.cfg.Topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, rp.l.kcl)
	if err != nil {
		return -1, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != rp.l.cfg.Topic {
			continue
		}
		if err := kafkaErr("Metadata", t.ErrorCode); err != nil {
			return -1, err
		}
		for _, p := range t.Partitions {
			if p.Partition != rp.partition {
				continue
			}
			if p.ErrorCode != codeReplicaNotAvail {
				if err := kafkaErr("Metadata", p.ErrorCode); err != nil {
					return -1, err
				}
			}
			if p.Leader < 0 {
				return -1, &KafkaError{Op: "Metadata", Code: codeLeaderNotAvail}
			}
			rp.leaderID, rp.topicID = p.Leader, t.TopicID
			return p.Leader, nil
		}
	}
	return -1, &KafkaError{Op: "Metadata", Code: codeUnknownPartition}
}

// fetchOnce sends one read_committed Fetch at offset to the leader. The answer has no
// error, or OFFSET_OUT_OF_RANGE; any other error code is a *KafkaError.
func (rp *replay) fetchOnce(ctx context.Context, offset int64) (fetchAnswer, error) {
	leader, err := rp.leader(ctx)
	if err != nil {
		return fetchAnswer{}, err
	}
	topic := rp.l.cfg.Topic
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(rp.l.cfg.FetchMaxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = 1, rp.maxBytes
	req.IsolationLevel = isolationReadCommitted
	req.SessionID, req.SessionEpoch = 0, -1 // a full fetch, no session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, rp.topicID
	part := kmsg.NewFetchRequestTopicPartition()
	part.Partition, part.FetchOffset, part.PartitionMaxBytes = rp.partition, offset, rp.maxBytes
	part.CurrentLeaderEpoch, part.LastFetchedEpoch, part.LogStartOffset = -1, -1, -1
	rt.Partitions = append(rt.Partitions, part)
	req.Topics = append(req.Topics, rt)
	kr, err := rp.l.kcl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return fetchAnswer{}, err
	}
	resp, ok := kr.(*kmsg.FetchResponse)
	if !ok {
		return fetchAnswer{}, fmt.Errorf("%w %T to Fetch", errUnexpectedResponse, kr)
	}
	if err := kafkaErr("Fetch", resp.ErrorCode); err != nil {
		return fetchAnswer{}, err
	}
	for _, t := range resp.Topics {
		if (resp.Version >= fetchTopicIDVersion && t.TopicID != rp.topicID) || (resp.Version < fetchTopicIDVersion && t.Topic != topic) {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == rp.partition {
				return answerOf(p)
			}
		}
	}
	return fetchAnswer{}, fmt.Errorf("compacted: no partition %d of %q in the fetch response", rp.partition, topic)
}

// answerOf reads the partition of a Fetch response.
func answerOf(p kmsg.FetchResponseTopicPartition) (fetchAnswer, error) {
	ans := fetchAnswer{hw: p.HighWatermark, lso: p.LastStableOffset, logStart: p.LogStartOffset}
	if p.ErrorCode == codeOffsetOutOfRange {
		ans.outOfRange = true
		return ans, nil
	}
	if err := kafkaErr("Fetch", p.ErrorCode); err != nil {
		return fetchAnswer{}, err
	}
	ans.Batches = p.RecordBatches
	for _, a := range p.AbortedTransactions {
		ans.Aborted = append(ans.Aborted, abortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	return ans, nil
}

// boundsOnce lists the log start and the last stable offset at the leader.
func (rp *replay) boundsOnce(ctx context.Context) (start, end int64, err error) {
	leader, err := rp.leader(ctx)
	if err != nil {
		return 0, 0, err
	}
	if start, err = rp.listOffset(ctx, leader, timestampEarliest, isolationReadUncommitted); err != nil {
		return 0, 0, err
	}
	if end, err = rp.listOffset(ctx, leader, timestampLatest, isolationReadCommitted); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

func (rp *replay) listOffset(ctx context.Context, leader int32, ts int64, iso int8) (int64, error) {
	topic := rp.l.cfg.Topic
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	part := kmsg.NewListOffsetsRequestTopicPartition()
	part.Partition, part.CurrentLeaderEpoch, part.Timestamp = rp.partition, -1, ts
	rt.Partitions = append(rt.Partitions, part)
	req.Topics = append(req.Topics, rt)
	kr, err := rp.l.kcl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp, ok := kr.(*kmsg.ListOffsetsResponse)
	if !ok {
		return 0, fmt.Errorf("%w %T to ListOffsets", errUnexpectedResponse, kr)
	}
	for _, t := range resp.Topics {
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition != rp.partition {
				continue
			}
			if err := kafkaErr("ListOffsets", p.ErrorCode); err != nil {
				return 0, err
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("compacted: no partition %d of %q in the list offsets response", rp.partition, topic)
}
