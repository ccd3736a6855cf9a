package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// metadata serves Metadata: this node is the only broker, the controller and
// the leader (and sole replica) of every partition, at the log's leader
// epoch. Topics are named, asked for by id (v12+), or all when the list is
// null. Topics are never auto-created.
func (dp *DataPlane) metadata(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = dp.cfg.NodeID, dp.cfg.AdvertisedHost, dp.cfg.AdvertisedPort
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	cid := dp.dst.ClusterID()
	resp.ClusterID, resp.ControllerID = &cid, dp.cfg.NodeID
	if r.Topics == nil {
		for _, spec := range dp.dst.Topics() {
			resp.Topics = append(resp.Topics, dp.metadataTopic(spec))
		}
		return resp, nil
	}
	for _, rt := range r.Topics {
		var spec mirror.TopicSpec
		var ok bool
		missing := fetcher.CodeUnknownTopicOrPartition
		if rt.Topic != nil {
			spec, ok = dp.dst.Topic(*rt.Topic)
		} else {
			spec, ok = dp.topicByID(rt.TopicID)
			missing = fetcher.CodeUnknownTopicID
		}
		if !ok {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, missing
			resp.Topics = append(resp.Topics, t)
			continue
		}
		resp.Topics = append(resp.Topics, dp.metadataTopic(spec))
	}
	return resp, nil
}

func (dp *DataPlane) metadataTopic(spec mirror.TopicSpec) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	name := spec.Name
	t.Topic, t.TopicID = &name, spec.TopicID
	for i := int32(0); i < spec.Partitions; i++ {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader = i, dp.cfg.NodeID
		p.Replicas, p.ISR = []int32{dp.cfg.NodeID}, []int32{dp.cfg.NodeID}
		part, code := dp.resolve(spec, i)
		if code != fetcher.CodeNone {
			p.ErrorCode, p.Leader, p.LeaderEpoch = code, -1, -1
			p.OfflineReplicas = []int32{dp.cfg.NodeID}
		} else {
			p.LeaderEpoch = part.log.LeaderEpoch()
		}
		t.Partitions = append(t.Partitions, p)
	}
	return t
}

// Kafka's topic name rules (Topic.validate).
const maxTopicName = 249

func validTopicName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > maxTopicName {
		return false
	}
	for _, c := range name {
		ok := c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// createTopics serves CreateTopics for plain (non-mirror) topics: one
// replica on this node, a fresh topic id, the given configs; every
// partition's leader epoch starts at 0.
func (dp *DataPlane) createTopics(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]bool{}
	for _, rt := range r.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = rt.Topic, -1, -1
		if seen[rt.Topic] {
			t.ErrorCode = int16(admin.CodeInvalidRequest)
			resp.Topics = append(resp.Topics, t)
			continue
		}
		seen[rt.Topic] = true
		code, msg := dp.createOne(ctx, rt, r.ValidateOnly, &t)
		t.ErrorCode = code
		if msg != "" {
			t.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func (dp *DataPlane) createOne(ctx context.Context, rt kmsg.CreateTopicsRequestTopic, validateOnly bool, t *kmsg.CreateTopicsResponseTopic) (int16, string) {
	switch {
	case !validTopicName(rt.Topic):
		return int16(admin.CodeInvalidTopic), "topic names are 1-249 of [a-zA-Z0-9._-], not . or .."
	case len(rt.ReplicaAssignment) > 0:
		return int16(admin.CodeInvalidRequest), "replica assignments are not supported: one broker"
	case rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1:
		return int16(admin.CodeInvalidReplicationFactor), "this site has one broker: replication factor must be 1 or -1"
	case rt.NumPartitions == 0 || rt.NumPartitions < -1:
		return int16(admin.CodeInvalidRequest), "number of partitions must be positive or -1"
	case rt.NumPartitions > MaxPartitions:
		return codeInvalidPartitions, fmt.Sprintf("a topic has at most %d partitions on this site, asked %d", MaxPartitions, rt.NumPartitions)
	}
	if _, exists := dp.dst.Topic(rt.Topic); exists {
		return int16(admin.CodeTopicAlreadyExists), "topic " + rt.Topic + " already exists"
	}
	n := rt.NumPartitions
	if n == -1 {
		n = dp.cfg.DefaultPartitions
	}
	spec := mirror.TopicSpec{Name: rt.Topic, TopicID: dp.cfg.NewTopicID(), Partitions: n, Configs: map[string]string{}}
	for _, c := range rt.Configs {
		if c.Value != nil {
			spec.Configs[c.Name] = *c.Value
		}
	}
	t.NumPartitions, t.ReplicationFactor = n, 1
	// The topic's configs, as Kafka answers them (v5+): the Java admin client
	// dereferences the list, so it is never left null on success.
	t.Configs = createdConfigs(spec.Configs)
	if validateOnly {
		return 0, ""
	}
	if err := dp.dst.CreateTopic(ctx, spec); err != nil {
		var ae *admin.Error
		if errors.As(err, &ae) {
			return int16(ae.Code), ae.Message
		}
		return int16(admin.CodeUnknownServerError), err.Error()
	}
	t.TopicID = spec.TopicID
	for i := int32(0); i < n; i++ {
		l, err := dp.dst.Log(spec.Name, i)
		if err == nil && l.LeaderEpoch() < 0 {
			_, err = l.BumpLeaderEpoch(-1)
		}
		if err != nil {
			t.TopicID = [16]byte{}
			return int16(codeKafkaStorageError), dp.undoCreate(ctx, spec.Name, i, err)
		}
	}
	return 0, ""
}

// undoCreate removes a topic this request created whose partition p could not be
// opened (out of descriptors, a full or failing disk), so that a CreateTopics that
// cannot complete leaves no half-created topic behind; the topic holds no data yet.
// It returns the error message of the answer, which says whether the topic is gone.
func (dp *DataPlane) undoCreate(ctx context.Context, topic string, p int32, cause error) string {
	msg := fmt.Sprintf("topic %q not created: partition %d cannot be opened: %v", topic, p, cause)
	ca := dp.clientAdmin()
	if ca == nil {
		return msg + "; the destination cannot delete topics, so the topic stays registered without that partition's log"
	}
	if err := ca.DeleteTopic(ctx, topic); err != nil {
		return fmt.Sprintf("%s; removing the half-created topic failed too: %v", msg, err)
	}
	return msg
}

// createdConfigs lists the configs a CreateTopics answer reports for a new topic: the
// ones it was created with, sorted by name, as topic-level values.
func createdConfigs(cfg map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	names := make([]string, 0, len(cfg))
	for k := range cfg {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(names))
	for _, k := range names {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(cfg[k])
		c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
		out = append(out, c)
	}
	return out
}
