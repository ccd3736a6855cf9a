package dataplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// Kafka codes of the topic admin RPCs.
const (
	codeOffsetOutOfRange         int16 = 1
	codeInvalidPartitions        int16 = 37
	codeInvalidReplicaAssignment int16 = 39
)

// MaxPartitions bounds the partition count of a topic CreateTopics makes or
// CreatePartitions grows: every partition is a log (a directory on a file destination), so a
// hostile count is refused with INVALID_PARTITIONS before anything is made.
const MaxPartitions = 10000

// clientAdminKeys are the keys served only over a Destination implementing
// mirror.ClientAdmin; APIs leaves them out otherwise.
var clientAdminKeys = map[kmsg.Key]bool{kmsg.CreatePartitions: true, kmsg.DeleteTopics: true, kmsg.DeleteRecords: true}

// clientAdmin returns the Destination's ClientAdmin, or nil.
func (dp *DataPlane) clientAdmin() mirror.ClientAdmin {
	ca, _ := dp.dst.(mirror.ClientAdmin)
	return ca
}

// codeOf turns a Destination error into a Kafka code and message.
func codeOf(err error) (int16, string) {
	var ae *admin.Error
	switch {
	case errors.As(err, &ae):
		return int16(ae.Code), ae.Message
	case errors.Is(err, fetcher.ErrOffsetOutOfRange):
		return codeOffsetOutOfRange, err.Error()
	case errors.Is(err, fetcher.ErrReadOnly):
		return int16(admin.CodeInvalidClusterMirrorStates), err.Error()
	}
	return int16(admin.CodeUnknownServerError), err.Error()
}

// mirrorGuard answers INVALID_CLUSTER_MIRROR_STATES when a partition of spec
// is read-only (a mirror topic that is not STOPPED), as the ClientAdmin
// does; it lets ValidateOnly requests answer what the real one would. Like
// every mirror code sent to a client, forClient turns it into
// INVALID_TOPIC_EXCEPTION on the wire.
func (dp *DataPlane) mirrorGuard(op string, spec mirror.TopicSpec) (int16, string) {
	for p := int32(0); p < spec.Partitions; p++ {
		if dp.dst.ReadOnly(spec.Name, p) {
			return int16(admin.CodeInvalidClusterMirrorStates),
				fmt.Sprintf("%s of topic %q refused: partition %d is a mirror partition that is not STOPPED; stop the mirror topic first", op, spec.Name, p)
		}
	}
	return 0, ""
}

// createPartitions serves CreatePartitions through the Destination's
// ClientAdmin: a mirror topic that is not STOPPED is refused with
// INVALID_TOPIC_EXCEPTION (forClient; the message names
// INVALID_CLUSTER_MIRROR_STATES), other topics of the request are unaffected.
// A topic named twice is refused (every copy) with INVALID_REQUEST.
func (dp *DataPlane) createPartitions(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, rt := range r.Topics {
		count[rt.Topic]++
	}
	for _, rt := range r.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		var code int16
		var msg string
		if count[rt.Topic] > 1 {
			code, msg = int16(admin.CodeInvalidRequest), "topic "+rt.Topic+" is named more than once in the request"
		} else {
			code, msg = dp.createPartitionsOne(ctx, rt, r.ValidateOnly)
		}
		code, msg = forClient(kmsg.CreatePartitions, r.Version, code, msg)
		t.ErrorCode = code
		if code != 0 && msg != "" {
			t.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func (dp *DataPlane) createPartitionsOne(ctx context.Context, rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) (int16, string) {
	spec, ok := dp.dst.Topic(rt.Topic)
	switch {
	case !ok:
		return fetcher.CodeUnknownTopicOrPartition, "unknown topic " + rt.Topic
	case rt.Count <= spec.Partitions:
		return codeInvalidPartitions, fmt.Sprintf("topic %s has %d partitions; the new count %d must be larger", rt.Topic, spec.Partitions, rt.Count)
	case rt.Count > MaxPartitions:
		return codeInvalidPartitions, fmt.Sprintf("a topic has at most %d partitions on this site, asked %d", MaxPartitions, rt.Count)
	}
	if rt.Assignment != nil {
		if int32(len(rt.Assignment)) != rt.Count-spec.Partitions {
			return codeInvalidReplicaAssignment, fmt.Sprintf("%d assignments for %d new partitions", len(rt.Assignment), rt.Count-spec.Partitions)
		}
		for _, a := range rt.Assignment {
			if len(a.Replicas) != 1 || a.Replicas[0] != dp.cfg.NodeID {
				return codeInvalidReplicaAssignment, fmt.Sprintf("this site has one broker (%d): every new partition's replicas must be [%d]", dp.cfg.NodeID, dp.cfg.NodeID)
			}
		}
	}
	if code, msg := dp.mirrorGuard("CreatePartitions", spec); code != 0 {
		return code, msg
	}
	if validateOnly {
		return 0, ""
	}
	if err := dp.clientAdmin().ClientCreatePartitions(ctx, rt.Topic, rt.Count); err != nil {
		return codeOf(err)
	}
	for i := spec.Partitions; i < rt.Count; i++ {
		l, err := dp.dst.Log(rt.Topic, i)
		if err == nil && l.LeaderEpoch() < 0 {
			_, err = l.BumpLeaderEpoch(-1)
		}
		if err != nil {
			return codeKafkaStorageError, err.Error()
		}
	}
	return 0, ""
}

// deleteTopics serves DeleteTopics (by name, or by id from v6) through the
// Destination's ClientAdmin: a mirror topic that is not STOPPED is refused
// with INVALID_TOPIC_EXCEPTION (forClient; the message, from v5, names
// INVALID_CLUSTER_MIRROR_STATES) and keeps its data; other topics of the
// request are deleted. A topic named twice, or an entry naming both or
// neither a name and an id, is refused with INVALID_REQUEST.
func (dp *DataPlane) deleteTopics(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	entries := r.Topics
	if r.Version < 6 {
		entries = make([]kmsg.DeleteTopicsRequestTopic, len(r.TopicNames))
		for i := range r.TopicNames {
			entries[i].Topic = &r.TopicNames[i]
		}
	}
	specs := make([]mirror.TopicSpec, len(entries))
	codes := make([]int16, len(entries))
	msgs := make([]string, len(entries))
	seen := map[string]int{}
	for i, e := range entries {
		specs[i], codes[i], msgs[i] = dp.deleteTarget(e)
		if codes[i] == 0 {
			seen[specs[i].Name]++
		}
	}
	for i, e := range entries {
		name := specs[i].Name
		switch {
		case codes[i] != 0:
		case seen[name] > 1:
			codes[i], msgs[i] = int16(admin.CodeInvalidRequest), "topic "+name+" is named more than once in the request"
		default:
			codes[i], msgs[i] = dp.deleteTopicOne(ctx, specs[i])
		}
		codes[i], msgs[i] = forClient(kmsg.DeleteTopics, r.Version, codes[i], msgs[i])
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = e.Topic, e.TopicID, codes[i]
		if t.Topic == nil && name != "" {
			t.Topic = &name
		}
		if t.TopicID == [16]byte{} {
			t.TopicID = specs[i].TopicID
		}
		if codes[i] != 0 && r.Version >= 5 {
			t.ErrorMessage = kmsg.StringPtr(msgs[i])
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// deleteTarget resolves one DeleteTopics entry to a topic.
func (dp *DataPlane) deleteTarget(e kmsg.DeleteTopicsRequestTopic) (mirror.TopicSpec, int16, string) {
	hasID := e.TopicID != [16]byte{}
	switch {
	case e.Topic != nil && hasID:
		return mirror.TopicSpec{}, int16(admin.CodeInvalidRequest), "an entry names both a topic and a topic id"
	case e.Topic != nil:
		spec, ok := dp.dst.Topic(*e.Topic)
		if !ok {
			return mirror.TopicSpec{}, fetcher.CodeUnknownTopicOrPartition, "unknown topic " + *e.Topic
		}
		return spec, 0, ""
	case hasID:
		spec, ok := dp.topicByID(e.TopicID)
		if !ok {
			return mirror.TopicSpec{}, fetcher.CodeUnknownTopicID, "unknown topic id"
		}
		return spec, 0, ""
	}
	return mirror.TopicSpec{}, int16(admin.CodeInvalidRequest), "an entry names neither a topic nor a topic id"
}

// deleteTopicOne deletes one topic through the ClientAdmin and forgets its
// producer state.
func (dp *DataPlane) deleteTopicOne(ctx context.Context, spec mirror.TopicSpec) (int16, string) {
	if err := dp.clientAdmin().DeleteTopic(ctx, spec.Name); err != nil {
		return codeOf(err)
	}
	dp.partsMu.Lock()
	for p := int32(0); p < spec.Partitions; p++ {
		delete(dp.parts, mirror.TopicPartition{Topic: spec.Name, Partition: p})
	}
	dp.partsMu.Unlock()
	return 0, ""
}

// deleteRecords serves DeleteRecords through the Destination's ClientAdmin:
// a partition of a mirror topic that is not STOPPED is refused with
// INVALID_TOPIC_EXCEPTION (forClient; DeleteRecords has no message) and
// loses nothing; other partitions of the
// request are unaffected. Offset -1 means the high watermark; any other
// negative offset, or one above the high watermark, is OFFSET_OUT_OF_RANGE. A
// partition named twice is refused (every copy) with INVALID_REQUEST.
func (dp *DataPlane) deleteRecords(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.DeleteRecordsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	count := map[mirror.TopicPartition]int{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			count[mirror.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]++
		}
	}
	for _, rt := range r.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.LowWatermark = rp.Partition, -1
			if count[mirror.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] > 1 {
				p.ErrorCode = int16(admin.CodeInvalidRequest)
			} else {
				p.LowWatermark, p.ErrorCode = dp.deleteRecordsOne(ctx, rt.Topic, rp)
			}
			p.ErrorCode, _ = forClient(kmsg.DeleteRecords, r.Version, p.ErrorCode, "")
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func (dp *DataPlane) deleteRecordsOne(ctx context.Context, topic string, rp kmsg.DeleteRecordsRequestTopicPartition) (int64, int16) {
	spec, ok := dp.dst.Topic(topic)
	switch {
	case !ok || rp.Partition < 0 || rp.Partition >= spec.Partitions:
		return -1, fetcher.CodeUnknownTopicOrPartition
	case rp.Offset < -1:
		return -1, codeOffsetOutOfRange
	}
	low, err := dp.clientAdmin().DeleteRecords(ctx, topic, rp.Partition, rp.Offset)
	if err != nil {
		code, _ := codeOf(err)
		return -1, code
	}
	return low, 0
}
