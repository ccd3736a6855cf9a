package dataplane

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// acl builds a binding: pattern "L" (literal) or "P" (prefixed).
func acl(resType, pattern, name, principal, host, op, perm string) mirror.ACL {
	pt := PatternLiteral
	if pattern == "P" {
		pt = PatternPrefixed
	}
	return mirror.ACL{ResourceType: resType, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, PermissionType: perm}
}

func TestDecide(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	allowReadOrders := acl(ResourceTopic, "L", "orders", alice, "*", OpRead, PermissionAllow)
	for _, tc := range []struct {
		name    string
		acls    []mirror.ACL
		policy  ACLPolicy
		a       Action
		allowed bool
		hasACLs bool
	}{
		{"no ACLs: denied by default", nil, ACLPolicy{}, Action{alice, "1.2.3.4", OpRead, ResourceTopic, "orders"}, false, false},
		{"no ACLs: AllowIfNoACL", nil, ACLPolicy{AllowIfNoACL: true}, Action{alice, "", OpRead, ResourceTopic, "orders"}, true, false},
		{"ACLs of another principal: denied even with AllowIfNoACL", []mirror.ACL{allowReadOrders}, ACLPolicy{AllowIfNoACL: true},
			Action{bob, "", OpRead, ResourceTopic, "orders"}, false, true},
		{"super user beats DENY", []mirror.ACL{acl(ResourceTopic, "L", "*", "User:*", "*", OpAll, PermissionDeny)},
			ACLPolicy{SuperUsers: []string{alice}}, Action{alice, "", OpWrite, ResourceTopic, "orders"}, true, false},
		{"literal allow", []mirror.ACL{allowReadOrders}, ACLPolicy{}, Action{alice, "", OpRead, ResourceTopic, "orders"}, true, true},
		{"literal is exact", []mirror.ACL{allowReadOrders}, ACLPolicy{}, Action{alice, "", OpRead, ResourceTopic, "orders2"}, false, false},
		{"other operation", []mirror.ACL{allowReadOrders}, ACLPolicy{}, Action{alice, "", OpWrite, ResourceTopic, "orders"}, false, true},
		{"other resource type", []mirror.ACL{allowReadOrders}, ACLPolicy{}, Action{alice, "", OpRead, ResourceGroup, "orders"}, false, false},
		{"READ implies DESCRIBE", []mirror.ACL{allowReadOrders}, ACLPolicy{}, Action{alice, "", OpDescribe, ResourceTopic, "orders"}, true, true},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", []mirror.ACL{acl(ResourceTopic, "L", "orders", alice, "*", OpAlterConfigs, PermissionAllow)},
			ACLPolicy{}, Action{alice, "", OpDescribeConfigs, ResourceTopic, "orders"}, true, true},
		{"DESCRIBE does not imply READ", []mirror.ACL{acl(ResourceTopic, "L", "orders", alice, "*", OpDescribe, PermissionAllow)},
			ACLPolicy{}, Action{alice, "", OpRead, ResourceTopic, "orders"}, false, true},
		{"DENY READ does not deny DESCRIBE", []mirror.ACL{acl(ResourceTopic, "L", "orders", alice, "*", OpAll, PermissionAllow),
			acl(ResourceTopic, "L", "orders", alice, "*", OpRead, PermissionDeny)}, ACLPolicy{}, Action{alice, "", OpDescribe, ResourceTopic, "orders"}, true, true},
		{"ALL allows anything", []mirror.ACL{acl(ResourceGroup, "L", "g", alice, "*", OpAll, PermissionAllow)}, ACLPolicy{},
			Action{alice, "", OpDelete, ResourceGroup, "g"}, true, true},
		{"prefixed allow", []mirror.ACL{acl(ResourceTopic, "P", "ord", alice, "*", OpRead, PermissionAllow)}, ACLPolicy{},
			Action{alice, "", OpRead, ResourceTopic, "orders"}, true, true},
		{"prefixed does not match a shorter name", []mirror.ACL{acl(ResourceTopic, "P", "orders-", alice, "*", OpRead, PermissionAllow)}, ACLPolicy{},
			Action{alice, "", OpRead, ResourceTopic, "orders"}, false, false},
		{"wildcard resource", []mirror.ACL{acl(ResourceTopic, "L", "*", alice, "*", OpRead, PermissionAllow)}, ACLPolicy{},
			Action{alice, "", OpRead, ResourceTopic, "anything"}, true, true},
		{"prefixed * is not a wildcard", []mirror.ACL{acl(ResourceTopic, "P", "*", alice, "*", OpRead, PermissionAllow)}, ACLPolicy{},
			Action{alice, "", OpRead, ResourceTopic, "orders"}, false, false},
		{"wildcard principal", []mirror.ACL{acl(ResourceTopic, "L", "orders", WildcardPrincipal, "*", OpRead, PermissionAllow)}, ACLPolicy{},
			Action{bob, "", OpRead, ResourceTopic, "orders"}, true, true},
		{"DENY wins over ALLOW", []mirror.ACL{allowReadOrders, acl(ResourceTopic, "P", "ord", WildcardPrincipal, "*", OpRead, PermissionDeny)},
			ACLPolicy{}, Action{alice, "", OpRead, ResourceTopic, "orders"}, false, true},
		{"DENY of ALL wins", []mirror.ACL{allowReadOrders, acl(ResourceTopic, "L", "*", alice, "*", OpAll, PermissionDeny)},
			ACLPolicy{}, Action{alice, "", OpRead, ResourceTopic, "orders"}, false, true},
		{"DENY of another principal does not apply", []mirror.ACL{allowReadOrders, acl(ResourceTopic, "L", "orders", bob, "*", OpRead, PermissionDeny)},
			ACLPolicy{}, Action{alice, "", OpRead, ResourceTopic, "orders"}, true, true},
		{"host must match", []mirror.ACL{acl(ResourceTopic, "L", "orders", alice, "10.0.0.1", OpRead, PermissionAllow)}, ACLPolicy{},
			Action{alice, "10.0.0.2", OpRead, ResourceTopic, "orders"}, false, true},
		{"host matches", []mirror.ACL{acl(ResourceTopic, "L", "orders", alice, "10.0.0.1", OpRead, PermissionAllow)}, ACLPolicy{},
			Action{alice, "10.0.0.1", OpRead, ResourceTopic, "orders"}, true, true},
		{"unknown host matches only *", []mirror.ACL{acl(ResourceTopic, "L", "orders", alice, "10.0.0.1", OpRead, PermissionAllow)}, ACLPolicy{},
			Action{alice, "", OpRead, ResourceTopic, "orders"}, false, true},
		{"unknown pattern type never applies", []mirror.ACL{{ResourceType: ResourceTopic, ResourceName: "orders", PatternType: "MATCH",
			Principal: alice, Host: "*", Operation: OpRead, PermissionType: PermissionAllow}}, ACLPolicy{}, Action{alice, "", OpRead, ResourceTopic, "orders"}, false, false},
		{"cluster", []mirror.ACL{acl(ResourceCluster, "L", ClusterName, alice, "*", OpIdempotentWrite, PermissionAllow)}, ACLPolicy{},
			Action{alice, "", OpIdempotentWrite, ResourceCluster, ClusterName}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.acls, tc.policy, tc.a)
			require.Equal(t, tc.allowed, d.Allowed)
			require.Equal(t, tc.hasACLs, d.ResourceHasACLs)
			if d.Allowed && !d.SuperUser && tc.hasACLs {
				require.NotNil(t, d.Rule)
				require.Equal(t, PermissionAllow, d.Rule.PermissionType)
			}
			if !d.Allowed && d.Rule != nil {
				require.Equal(t, PermissionDeny, d.Rule.PermissionType)
			}
		})
	}
}

func TestDecideAnyResource(t *testing.T) {
	const alice = "User:alice"
	write := func(pattern, name, perm string) mirror.ACL {
		return acl(ResourceTopic, pattern, name, alice, "*", OpWrite, perm)
	}
	for _, tc := range []struct {
		name    string
		acls    []mirror.ACL
		policy  ACLPolicy
		allowed bool
	}{
		{"nothing", nil, ACLPolicy{}, false},
		{"super user", nil, ACLPolicy{SuperUsers: []string{alice}}, true},
		{"a literal allow", []mirror.ACL{write("L", "t", PermissionAllow)}, ACLPolicy{}, true},
		{"a literal allow denied by the same literal", []mirror.ACL{write("L", "t", PermissionAllow), write("L", "t", PermissionDeny)}, ACLPolicy{}, false},
		{"a literal allow denied by a prefix", []mirror.ACL{write("L", "topic", PermissionAllow), write("P", "to", PermissionDeny)}, ACLPolicy{}, false},
		{"a prefix allow not dominated", []mirror.ACL{write("P", "to", PermissionAllow), write("P", "topic", PermissionDeny)}, ACLPolicy{}, true},
		{"wildcard deny", []mirror.ACL{write("L", "t", PermissionAllow), write("L", "*", PermissionDeny)}, ACLPolicy{}, false},
		{"wildcard allow", []mirror.ACL{write("L", "*", PermissionAllow)}, ACLPolicy{}, true},
		{"READ does not count", []mirror.ACL{acl(ResourceTopic, "L", "t", alice, "*", OpRead, PermissionAllow)}, ACLPolicy{}, false},
		{"another principal does not count", []mirror.ACL{acl(ResourceTopic, "L", "t", "User:bob", "*", OpWrite, PermissionAllow)}, ACLPolicy{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.allowed, DecideAnyResource(tc.acls, tc.policy, Action{Principal: alice, Operation: OpWrite, ResourceType: ResourceTopic}))
		})
	}
}

// BenchmarkDecide: one decision against 1000 bindings (the linear scan a
// request pays per resource with EnforceACLs).
func BenchmarkDecide(b *testing.B) {
	acls := make([]mirror.ACL, 0, 1000)
	for i := 0; i < 1000; i++ {
		acls = append(acls, acl(ResourceTopic, "L", fmt.Sprintf("topic-%d", i), "User:alice", "*", OpRead, PermissionAllow))
	}
	a := Action{Principal: "User:alice", Host: "127.0.0.1", Operation: OpRead, ResourceType: ResourceTopic, Name: "topic-999"}
	b.ReportAllocs()
	for b.Loop() {
		if !Decide(acls, ACLPolicy{}, a).Allowed {
			b.Fatal("denied")
		}
	}
}

// BenchmarkACLSnapshot: what a request pays with EnforceACLs to read 1000
// bindings from a LocalDestination before deciding.
func BenchmarkACLSnapshot(b *testing.B) {
	dst := mirror.NewMemoryDestination("c", fetcher.MemoryLogOptions{})
	defer dst.Close()
	acls := make([]mirror.ACL, 0, 1000)
	for i := 0; i < 1000; i++ {
		acls = append(acls, acl(ResourceTopic, "L", fmt.Sprintf("topic-%d", i), "User:alice", "*", OpRead, PermissionAllow))
	}
	if err := dst.ReplaceMirrorACLs("m", acls); err != nil {
		b.Fatal(err)
	}
	dp, err := New(Config{Destination: dst, AdvertisedHost: "h", AdvertisedPort: 1, EnforceACLs: true})
	if err != nil {
		b.Fatal(err)
	}
	defer dp.Close()
	b.ReportAllocs()
	for b.Loop() {
		if len(dp.authzFor(b.Context()).acls) != 1000 {
			b.Fatal("lost bindings")
		}
	}
}
