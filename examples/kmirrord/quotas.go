package main

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror/dataplane"
)

// describeClientQuotasAPI serves DescribeClientQuotas (v0-v1): a kmirrord
// enforces no client quotas, so every well-formed filter matches no entry.
// kafka-configs --entity-type users --describe asks for it next to
// DescribeUserScramCredentials. A component of an unknown entity type or
// match type is INVALID_REQUEST; with -enforce-acls it needs
// DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka.
func describeClientQuotasAPI(dp *dataplane.DataPlane) admin.ExtraAPI {
	return admin.ExtraAPI{Key: int16(kmsg.DescribeClientQuotas), MinVersion: 0, MaxVersion: 1,
		Serve: func(ctx context.Context, _ *admin.RequestContext, req kmsg.Request) (kmsg.Response, error) {
			r := req.(*kmsg.DescribeClientQuotasRequest)
			resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
			if !dp.Allowed(ctx, dataplane.OpDescribeConfigs, dataplane.ResourceCluster, dataplane.ClusterName) {
				resp.ErrorCode = int16(admin.CodeClusterAuthorizationFailed)
				resp.ErrorMessage = kmsg.StringPtr("not authorized: DESCRIBE_CONFIGS on CLUSTER")
				return resp, nil
			}
			for _, c := range r.Components {
				switch {
				case c.EntityType != "user" && c.EntityType != "client-id" && c.EntityType != "ip":
					resp.ErrorCode, resp.ErrorMessage = int16(admin.CodeInvalidRequest), kmsg.StringPtr("unknown quota entity type "+c.EntityType)
				case c.MatchType < kmsg.QuotasMatchTypeExact || c.MatchType > kmsg.QuotasMatchTypeAny:
					resp.ErrorCode, resp.ErrorMessage = int16(admin.CodeInvalidRequest), kmsg.StringPtr("unknown quota match type")
				}
			}
			resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
			return resp, nil
		}}
}
