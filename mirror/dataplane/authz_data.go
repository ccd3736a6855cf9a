package dataplane

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// authzProduce: WRITE on the transactional id (every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic
// (TOPIC_AUTHORIZATION_FAILED); nothing is appended to a refused topic. With
// acks 0 a refusal closes the connection, as Kafka does.
func authzProduce(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.ProduceRequest)
	txnDenied := r.TransactionID != nil && !z.allowed(OpWrite, ResourceTransactional, *r.TransactionID)
	kept, denied := split(r.Topics, func(rt kmsg.ProduceRequestTopic) bool {
		return !txnDenied && z.allowed(OpWrite, ResourceTopic, rt.Topic)
	})
	if len(denied) == 0 {
		return next(r)
	}
	if r.Acks == 0 {
		return nil, fmt.Errorf("%w: produce with acks 0 to %s by %s", ErrUnauthorized, denied[0].Topic, z.principal)
	}
	code := codeTopicAuthorizationFailed
	if txnDenied {
		code = codeTxnIDAuthorizationFailed
	}
	r.Topics = kept
	out, err := serveKept(r, len(kept) > 0, next)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.ProduceResponse)
	for _, rt := range denied {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = rp.Partition, code, -1, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// authzFetch: a consumer needs READ on each topic, a follower (replica id
// >= 0) CLUSTER_ACTION on the cluster; a refused topic's partitions are
// TOPIC_AUTHORIZATION_FAILED and are not read, and the fetch then answers
// without long-polling (Kafka answers at once when a partition has an
// error). A topic id this site does not know is left to the handler
// (UNKNOWN_TOPIC_ID).
//
// An incremental fetch (SessionEpoch > 0) goes to the handler whole: it
// reads every partition of the session, named or not, and denies each topic
// of it by the same rule (incremental.plan).
func authzFetch(dp *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.FetchRequest)
	if r.Version >= 7 && r.SessionEpoch > 0 {
		return next(r)
	}
	allowed := fetchRule(dp, z, r)
	var kept, denied []kmsg.FetchRequestTopic
	for _, rt := range r.Topics {
		if allowed(rt) {
			kept = append(kept, rt)
		} else {
			denied = append(denied, rt)
		}
	}
	if len(denied) == 0 {
		return next(r)
	}
	r.Topics, r.MaxWaitMillis = kept, 0
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return resp, nil
	}
	for _, rt := range denied {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, codeTopicAuthorizationFailed
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// fetchRule is authzFetch's rule for one topic of Fetch r.
func fetchRule(dp *DataPlane, z *authz, r *kmsg.FetchRequest) func(kmsg.FetchRequestTopic) bool {
	replica := fetchReplica(r)
	clusterOK := replica >= 0 && z.allowed(OpClusterAction, ResourceCluster, ClusterName)
	return func(rt kmsg.FetchRequestTopic) bool {
		name, known := rt.Topic, true
		if r.Version >= 13 {
			spec, ok := dp.topicByID(rt.TopicID)
			name, known = spec.Name, ok
		}
		return !known || clusterOK || (replica < 0 && z.allowed(OpRead, ResourceTopic, name))
	}
}

// authzListOffsets: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED.
func authzListOffsets(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.ListOffsetsRequest)
	kept, denied := split(r.Topics, func(rt kmsg.ListOffsetsRequestTopic) bool {
		return z.allowed(OpDescribe, ResourceTopic, rt.Topic)
	})
	if len(denied) == 0 {
		return next(r)
	}
	r.Topics = kept
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.ListOffsetsResponse)
	for _, rt := range denied {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.ErrorCode, p.Timestamp, p.Offset, p.LeaderEpoch = rp.Partition, codeTopicAuthorizationFailed, -1, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// authzOffsetForLeaderEpoch: CLUSTER_ACTION on the cluster allows every
// topic (brokers), else DESCRIBE on each topic (consumers, KIP-320).
func authzOffsetForLeaderEpoch(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.OffsetForLeaderEpochRequest)
	if z.allowed(OpClusterAction, ResourceCluster, ClusterName) {
		return next(r)
	}
	kept, denied := split(r.Topics, func(rt kmsg.OffsetForLeaderEpochRequestTopic) bool {
		return z.allowed(OpDescribe, ResourceTopic, rt.Topic)
	})
	if len(denied) == 0 {
		return next(r)
	}
	r.Topics = kept
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range denied {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.ErrorCode, p.LeaderEpoch, p.EndOffset = rp.Partition, codeTopicAuthorizationFailed, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// authzMetadata: DESCRIBE on each topic. Asked for all topics, the answer
// leaves out those the principal may not describe (Kafka never discloses
// them); a topic asked for by name is TOPIC_AUTHORIZATION_FAILED without
// saying whether it exists, one asked for by id TOPIC_AUTHORIZATION_FAILED
// with the id and no name.
func authzMetadata(dp *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.MetadataRequest)
	if r.Topics == nil {
		out, err := next(r)
		if err != nil {
			return out, err
		}
		resp := out.(*kmsg.MetadataResponse)
		kept := resp.Topics[:0]
		for _, t := range resp.Topics {
			if t.Topic != nil && z.allowed(OpDescribe, ResourceTopic, *t.Topic) {
				kept = append(kept, t)
			}
		}
		resp.Topics = kept
		return resp, nil
	}
	kept := make([]kmsg.MetadataRequestTopic, 0, len(r.Topics)) // never nil: nil asks for every topic
	var denied []kmsg.MetadataResponseTopic
	for _, rt := range r.Topics {
		name, known := "", true
		if rt.Topic != nil {
			name = *rt.Topic
		} else {
			spec, ok := dp.topicByID(rt.TopicID)
			name, known = spec.Name, ok
		}
		if !known || z.allowed(OpDescribe, ResourceTopic, name) {
			kept = append(kept, rt)
			continue
		}
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.ErrorCode = rt.Topic, codeTopicAuthorizationFailed
		if rt.Topic == nil {
			t.TopicID = rt.TopicID
		}
		denied = append(denied, t)
	}
	r.Topics = kept
	out, err := next(r)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.MetadataResponse)
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

// authzCreateTopics: CREATE on the cluster allows every topic, else CREATE
// on each topic (TOPIC_AUTHORIZATION_FAILED). A created topic's configs are
// reported only with DESCRIBE_CONFIGS on it (else its config error code is
// TOPIC_AUTHORIZATION_FAILED), as Kafka does.
func authzCreateTopics(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	r := req.(*kmsg.CreateTopicsRequest)
	cluster := z.allowed(OpCreate, ResourceCluster, ClusterName)
	kept, denied := split(r.Topics, func(rt kmsg.CreateTopicsRequestTopic) bool {
		return cluster || z.allowed(OpCreate, ResourceTopic, rt.Topic)
	})
	r.Topics = kept
	out, err := serveKept(r, len(kept) > 0, next)
	if err != nil {
		return out, err
	}
	resp := out.(*kmsg.CreateTopicsResponse)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.ErrorCode == 0 && !z.allowed(OpDescribeConfigs, ResourceTopic, t.Topic) {
			t.Configs, t.ConfigErrorCode = []kmsg.CreateTopicsResponseTopicConfig{}, codeTopicAuthorizationFailed
		}
	}
	for _, rt := range denied {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.ErrorCode, t.NumPartitions, t.ReplicationFactor = rt.Topic, codeTopicAuthorizationFailed, -1, -1
		t.ErrorMessage = kmsg.StringPtr("not authorized: CREATE on TOPIC " + rt.Topic)
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
