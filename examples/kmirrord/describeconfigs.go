package main

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/dataplane"
)

// describeConfigsAPI serves DescribeConfigs (v0-v4) next to the data plane:
// a topic's configs are the ones kept with it in the destination (each
// reported as a topic-level, DYNAMIC_TOPIC_CONFIG value, which is what a
// mirror's metadata sync of this site copies); a broker resource has no
// dynamic configs; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION and any
// other resource type INVALID_REQUEST. With -enforce-acls it needs
// DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a
// broker, on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka does.
func describeConfigsAPI(dest mirror.Destination, dp *dataplane.DataPlane) admin.ExtraAPI {
	return admin.ExtraAPI{Key: int16(kmsg.DescribeConfigs), MinVersion: 0, MaxVersion: 4,
		Serve: func(ctx context.Context, _ *admin.RequestContext, req kmsg.Request) (kmsg.Response, error) {
			allowed := func(resourceType, name string) bool {
				return dp.Allowed(ctx, dataplane.OpDescribeConfigs, resourceType, name)
			}
			return describeConfigs(dest, allowed, req.(*kmsg.DescribeConfigsRequest)), nil
		}}
}

func describeConfigs(dest mirror.Destination, allowed func(resourceType, name string) bool, req *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		switch {
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic && !allowed(dataplane.ResourceTopic, rr.ResourceName):
			out.ErrorCode, out.ErrorMessage = int16(admin.CodeTopicAuthorizationFailed), kmsg.StringPtr("not authorized: DESCRIBE_CONFIGS on TOPIC "+rr.ResourceName)
			resp.Resources = append(resp.Resources, out)
			continue
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker && !allowed(dataplane.ResourceCluster, dataplane.ClusterName):
			out.ErrorCode, out.ErrorMessage = int16(admin.CodeClusterAuthorizationFailed), kmsg.StringPtr("not authorized: DESCRIBE_CONFIGS on CLUSTER")
			resp.Resources = append(resp.Resources, out)
			continue
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			spec, ok := dest.Topic(rr.ResourceName)
			if !ok {
				out.ErrorCode = int16(admin.CodeUnknownTopicOrPartition)
				msg := "unknown topic " + rr.ResourceName
				out.ErrorMessage = &msg
				break
			}
			out.Configs = topicConfigs(spec.Configs, rr.ConfigNames)
		case kmsg.ConfigResourceTypeBroker:
			out.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		default:
			out.ErrorCode = int16(admin.CodeInvalidRequest)
			msg := "only topic and broker configs are served"
			out.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// topicConfigs lists cfgs, sorted; a non-empty names keeps only those (a null
// or empty list asks for all, as Kafka treats both).
func topicConfigs(cfgs map[string]string, names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	keys := make([]string, 0, len(cfgs))
	for k := range cfgs {
		if len(names) == 0 || want[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(keys))
	for _, k := range keys {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		v := cfgs[k]
		c.Name, c.Value, c.Source = k, &v, kmsg.ConfigSourceDynamicTopicConfig
		out = append(out, c)
	}
	return out
}
