package dataplane

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authzCreatePartitions: ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED
// (the topic is not grown).
func authzCreatePartitions(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.CreatePartitionsRequest)
	kept, denied := split(r.Topics, func(rt kmsg.CreatePartitionsRequestTopic) bool {
		return z.allowed(OpAlter, ResourceTopic, rt.Topic)
	})
	if len(denied) == 0 {
		return next(r)
	}
	r.Topics = kept
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.CreatePartitionsResponse)
	for _, rt := range denied {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic, t.ErrorCode = rt.Topic, codeTopicAuthorizationFailed
		t.ErrorMessage = kmsg.StringPtr("not authorized: ALTER on TOPIC " + rt.Topic)
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// authzDeleteTopics: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
// (the topic keeps its data). A topic named by id is refused without its
// name unless the principal may DESCRIBE it. An id this site does not know
// is left to the handler (UNKNOWN_TOPIC_ID).
func authzDeleteTopics(dp *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.DeleteTopicsRequest)
	var denied []kmsg.DeleteTopicsResponseTopic
	if r.Version < 6 {
		var kept []string
		for _, name := range r.TopicNames {
			if z.allowed(OpDelete, ResourceTopic, name) {
				kept = append(kept, name)
				continue
			}
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.ErrorCode = kmsg.StringPtr(name), codeTopicAuthorizationFailed
			denied = append(denied, t)
		}
		r.TopicNames = kept
	} else {
		var kept []kmsg.DeleteTopicsRequestTopic
		for _, rt := range r.Topics {
			name, known := "", true
			if rt.Topic != nil {
				name = *rt.Topic
			} else {
				spec, ok := dp.topicByID(rt.TopicID)
				name, known = spec.Name, ok
			}
			if !known || z.allowed(OpDelete, ResourceTopic, name) {
				kept = append(kept, rt)
				continue
			}
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, codeTopicAuthorizationFailed
			if rt.Topic == nil && z.allowed(OpDescribe, ResourceTopic, name) {
				t.Topic = kmsg.StringPtr(name)
			}
			denied = append(denied, t)
		}
		r.Topics = kept
	}
	if len(denied) == 0 {
		return next(r)
	}
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.DeleteTopicsResponse)
	for _, t := range denied {
		if r.Version >= 5 {
			t.ErrorMessage = kmsg.StringPtr("not authorized: DELETE on the topic")
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// authzDeleteRecords: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
// (nothing is deleted).
func authzDeleteRecords(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.DeleteRecordsRequest)
	kept, denied := split(r.Topics, func(rt kmsg.DeleteRecordsRequestTopic) bool {
		return z.allowed(OpDelete, ResourceTopic, rt.Topic)
	})
	if len(denied) == 0 {
		return next(r)
	}
	r.Topics = kept
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.DeleteRecordsResponse)
	for _, rt := range denied {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.LowWatermark, p.ErrorCode = rp.Partition, -1, codeTopicAuthorizationFailed
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
