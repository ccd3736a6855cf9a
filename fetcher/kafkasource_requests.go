package fetcher

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// The per-broker requests of KafkaSource: each builds one kmsg request for the
// partitions a leader leads (grouped by topic, in the order of first
// appearance), sends it and scatters the answer back into the caller's
// results by index.

// topicIndex returns the index in *topics of topic's entry, appending mk()
// (a new entry for topic) the first time topic is seen; ti remembers the
// indexes.
func topicIndex[T any](ti map[string]int, topics *[]T, topic string, mk func() T) int {
	j, ok := ti[topic]
	if !ok {
		*topics = append(*topics, mk())
		j = len(*topics) - 1
		ti[topic] = j
	}
	return j
}

// fetchFrom sends the Fetch of parts[idx] to leader, at most one at a time
// per broker (brokerGate), and fills out[idx]. A context that ends while it
// waits for the broker's gate answers NETWORK_EXCEPTION for every partition, as a request the
// context cut short does.
func (s *KafkaSource) fetchFrom(ctx context.Context, leader int32, parts []FetchPartition, infos []PartitionInfo, idx []int, out []FetchResult) {
	loop, _ := ctx.Value(fetchSessionsKey{}).(*FetchSessions)
	lane := s.laneFor(loop)
	fs := sessionFor(ctx, leader)
	if s.cfg.DisableFetchSessions {
		fs = nil
	}
	g := lane.gate(leader)
	if err := g.acquire(ctx, fs != nil && fs.quickNext(parts, idx)); err != nil {
		fillFetch(nil, err, nil, nil, idx, out)
		return
	}
	defer g.release()
	if fs != nil {
		s.fetchInSession(ctx, lane.cl, leader, fs, parts, infos, idx, out)
		return
	}
	req, where, byID := s.fetchRequest(parts, infos, idx)
	resp, err := lane.cl.Broker(int(leader)).Request(ctx, req)
	fillFetch(resp, err, where, byID, idx, out)
}

// fillFetch fills out[idx] from a Fetch answer (or the error that stood in its place).
func fillFetch(resp kmsg.Response, err error, where map[TopicPartition]int, byID map[records.UUID]string, idx []int, out []FetchResult) {
	fr, ok := resp.(*kmsg.FetchResponse)
	if err != nil || !ok || fr.ErrorCode != CodeNone {
		code := CodeNetworkException
		if err == nil && ok {
			code = fr.ErrorCode
		}
		for _, i := range idx {
			out[i].ErrorCode = code
		}
		return
	}
	answered := make(map[int]bool, len(idx))
	for _, rt := range fr.Topics {
		topic := rt.Topic
		if fr.Version >= 13 {
			topic = byID[records.UUID(rt.TopicID)]
		}
		for _, rp := range rt.Partitions {
			i, ok := where[TopicPartition{topic, rp.Partition}]
			if !ok {
				continue
			}
			answered[i] = true
			fillPartition(&out[i], &rp)
		}
	}
	for _, i := range idx {
		if !answered[i] {
			out[i].ErrorCode = CodeUnknownTopicOrPartition
		}
	}
}

// fillPartition sets r from one partition of a Fetch answer.
func fillPartition(r *FetchResult, rp *kmsg.FetchResponseTopicPartition) {
	r.ErrorCode = rp.ErrorCode
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
	if rp.DivergingEpoch.Epoch >= 0 {
		r.DivergingEpoch = &epoch.Divergence{Epoch: rp.DivergingEpoch.Epoch, EndOffset: rp.DivergingEpoch.EndOffset}
	}
	r.Records = rp.RecordBatches
}

// fetchRequest is the full Fetch (no session) of parts[idx], with the index of
// each partition and the topic name of each topic ID (v13+ answers by ID).
func (s *KafkaSource) fetchRequest(parts []FetchPartition, infos []PartitionInfo, idx []int) (*kmsg.FetchRequest, map[TopicPartition]int, map[records.UUID]string) {
	req := s.newFetchRequest()
	req.SessionID = sessionlessID
	req.SessionEpoch = sessionFinalEpoch // full fetch, no session
	where := make(map[TopicPartition]int, len(idx))
	byID := make(map[records.UUID]string)
	ti := make(map[string]int)
	for _, i := range idx {
		p := parts[i]
		if p.TopicID == (records.UUID{}) {
			p.TopicID = infos[i].TopicID
		}
		byID[p.TopicID] = p.Topic
		addFetchPartition(req, ti, p)
		where[TopicPartition{p.Topic, p.Partition}] = i
	}
	return req, where, byID
}

// newFetchRequest is a Fetch with the source's settings and no partitions.
func (s *KafkaSource) newFetchRequest() *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(s.cfg.MaxWait / time.Millisecond)
	req.MinBytes = s.cfg.MinBytes
	req.MaxBytes = s.cfg.MaxBytes
	req.IsolationLevel = s.cfg.IsolationLevel
	return req
}

// addFetchPartition appends p (its TopicID resolved) to req, under its
// topic's entry (ti remembers their indexes).
func addFetchPartition(req *kmsg.FetchRequest, ti map[string]int, p FetchPartition) {
	j := topicIndex(ti, &req.Topics, p.Topic, func() kmsg.FetchRequestTopic {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = p.Topic, p.TopicID
		return rt
	})
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p.Partition
	rp.CurrentLeaderEpoch = p.CurrentLeaderEpoch
	rp.FetchOffset = p.FetchOffset
	rp.LastFetchedEpoch = p.LastFetchedEpoch
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = p.MaxBytes
	req.Topics[j].Partitions = append(req.Topics[j].Partitions, rp)
}

// partQuery is one partition of an OffsetForLeaderEpoch or a ListOffsets
// request: the partition, its CurrentLeaderEpoch (-1 = not given) and the
// leader epoch asked about (OffsetForLeaderEpoch) or the timestamp
// (ListOffsets).
type partQuery struct {
	TopicPartition
	current int32
	arg     int64
}

// epochOffset is one partition's answer to either request: an error code, a
// leader epoch and an offset (the epoch's end offset, or the offset at the
// timestamp).
type epochOffset struct {
	code   int16
	epoch  int32
	offset int64
}

// epochOffsetsFrom sends qs[idx] to leader as one OffsetForLeaderEpoch
// (listing false) or ListOffsets (listing true) request and fills out[idx]:
// each partition's answer (the first, if one is answered twice),
// CodeUnknownTopicOrPartition for a partition not answered, and
// CodeNetworkException for all when the request fails.
func (s *KafkaSource) epochOffsetsFrom(ctx context.Context, leader int32, listing bool, qs []partQuery, idx []int, out []epochOffset) {
	resp, err := s.cl.Broker(int(leader)).Request(ctx, s.epochOffsetsRequest(listing, qs, idx))
	answers, ok := readEpochOffsets(resp)
	if err != nil || !ok {
		for _, i := range idx {
			out[i].code = CodeNetworkException
		}
		return
	}
	where := make(map[TopicPartition]int, len(idx))
	for _, i := range idx {
		where[qs[i].TopicPartition] = i
	}
	for _, a := range answers {
		if i, ok := where[a.tp]; ok {
			out[i] = a.epochOffset
			delete(where, a.tp)
		}
	}
	for _, i := range where {
		out[i].code = CodeUnknownTopicOrPartition
	}
}

// epochOffsetsRequest is the OffsetForLeaderEpoch v4 (consumer form) or the
// ListOffsets request of qs[idx], grouped by topic in the order of first
// appearance.
func (s *KafkaSource) epochOffsetsRequest(listing bool, qs []partQuery, idx []int) kmsg.Request {
	oe, lo := kmsg.NewPtrOffsetForLeaderEpochRequest(), kmsg.NewPtrListOffsetsRequest()
	oe.ReplicaID, lo.ReplicaID, lo.IsolationLevel = -1, -1, s.cfg.IsolationLevel
	ti := make(map[string]int)
	for _, i := range idx {
		q := qs[i]
		if listing {
			j := topicIndex(ti, &lo.Topics, q.Topic, func() kmsg.ListOffsetsRequestTopic {
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = q.Topic
				return rt
			})
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = q.Partition, q.current, q.arg
			lo.Topics[j].Partitions = append(lo.Topics[j].Partitions, rp)
			continue
		}
		j := topicIndex(ti, &oe.Topics, q.Topic, func() kmsg.OffsetForLeaderEpochRequestTopic {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = q.Topic
			return rt
		})
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = q.Partition, q.current, int32(q.arg)
		oe.Topics[j].Partitions = append(oe.Topics[j].Partitions, rp)
	}
	if listing {
		return lo
	}
	return oe
}

// partAnswer is one partition of an OffsetForLeaderEpoch or ListOffsets answer.
type partAnswer struct {
	tp TopicPartition
	epochOffset
}

// readEpochOffsets lists the partitions of an OffsetForLeaderEpoch or
// ListOffsets answer, in the answer's order; false for anything else.
func readEpochOffsets(resp kmsg.Response) ([]partAnswer, bool) {
	var out []partAnswer
	switch r := resp.(type) {
	case *kmsg.OffsetForLeaderEpochResponse:
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, partAnswer{TopicPartition{rt.Topic, rp.Partition}, epochOffset{rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset}})
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, partAnswer{TopicPartition{rt.Topic, rp.Partition}, epochOffset{rp.ErrorCode, rp.LeaderEpoch, rp.Offset}})
			}
		}
	default:
		return nil, false
	}
	return out, true
}
