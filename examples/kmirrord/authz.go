package main

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror/dataplane"
)

// unauthorizedKeys are the only keys the listener may serve without an
// authorization rule: the ones a client sends before it has a principal
// (ApiVersions, and SASL's handshake and authentication).
var unauthorizedKeys = map[int16]string{
	int16(kmsg.ApiVersions):      "ApiVersions",
	int16(kmsg.SASLHandshake):    "SaslHandshake",
	int16(kmsg.SASLAuthenticate): "SaslAuthenticate",
}

// daemonRules are the authorization rules of the keys kmirrord serves
// itself, next to the data plane (each Serve checks with dp.Allowed).
var daemonRules = map[int16]string{
	int16(kmsg.DescribeConfigs):              "DESCRIBE_CONFIGS on each topic (TOPIC_AUTHORIZATION_FAILED) or on the cluster for a broker (CLUSTER_AUTHORIZATION_FAILED)",
	int16(kmsg.DescribeUserSCRAMCredentials): "DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED), credentialAPIs",
	int16(kmsg.AlterUserSCRAMCredentials):    "ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED), credentialAPIs",
	int16(kmsg.DescribeClientQuotas):         "DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED), describeClientQuotasAPI",
}

// authzRule names the rule that authorizes key on a kmirrord listener: the
// KIP's mirror RPCs are admin's table (admin.RequirementFor), the data
// plane's keys its rules (dataplane.AuthorizesKey), kmirrord's own keys
// daemonRules. ok is false for a key with no rule.
func authzRule(key int16) (rule string, ok bool) {
	if r, ok := admin.RequirementFor(key); ok {
		what := "CLUSTER_MIRROR"
		if r.Resource == admin.ResourceCluster {
			what = "CLUSTER"
		}
		return fmt.Sprintf("admin: %s on %s", r.Op, what), true
	}
	if dataplane.AuthorizesKey(key) {
		return "dataplane", true
	}
	r, ok := daemonRules[key]
	return r, ok
}

// checkAuthzRules fails for an Extra key with no authorization rule:
// kmirrord -enforce-acls refuses to start rather than serve a key that
// nothing authorizes (the mirror RPCs' rules are admin's table, checked by
// TestEveryServedKeyHasAnAuthzRule).
func checkAuthzRules(extra []admin.ExtraAPI) error {
	var missing []int
	for _, e := range extra {
		if _, ok := authzRule(e.Key); !ok {
			if _, ok := unauthorizedKeys[e.Key]; !ok {
				missing = append(missing, int(e.Key))
			}
		}
	}
	if len(missing) > 0 {
		sort.Ints(missing)
		return fmt.Errorf("kmirrord: keys %v have no authorization rule", missing)
	}
	return nil
}
