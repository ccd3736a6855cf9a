package dataplane

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/metasync"
)

func creation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, perm
	return c
}

func createACLsReq(cs ...kmsg.CreateACLsRequestCreation) *kmsg.CreateACLsRequest {
	r := kmsg.NewPtrCreateACLsRequest()
	r.Version, r.Creations = 3, cs
	return r
}

func deleteACLsReq(fs ...kmsg.DeleteACLsRequestFilter) *kmsg.DeleteACLsRequest {
	r := kmsg.NewPtrDeleteACLsRequest()
	r.Version, r.Filters = 3, fs
	return r
}

func describeAll() *kmsg.DescribeACLsRequest {
	r := kmsg.NewPtrDescribeACLsRequest()
	r.Version, r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = 3, anyCode, anyCode, anyCode, anyCode
	return r
}

func filterAny() kmsg.DeleteACLsRequestFilter {
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = anyCode, anyCode, anyCode, anyCode
	return f
}

const (
	wTopic, wGroup, wCluster   = kmsg.ACLResourceType(2), kmsg.ACLResourceType(3), kmsg.ACLResourceType(4)
	wLiteral, wPrefixed        = kmsg.ACLResourcePatternType(3), kmsg.ACLResourcePatternType(4)
	wRead, wAlter, wDescribe   = kmsg.ACLOperation(3), kmsg.ACLOperation(7), kmsg.ACLOperation(8)
	wDeny, wAllow              = kmsg.ACLPermissionType(2), kmsg.ACLPermissionType(3)
	wClusterMirror             = kmsg.ACLResourceType(admin.ResourceClusterMirror)
	codeClusterAuthzFailedWire = int16(31)
)

// TestACLRPCsNeedClusterPermission: without ALTER (DESCRIBE) on the cluster,
// CreateAcls and DeleteAcls answer CLUSTER_AUTHORIZATION_FAILED per item and
// change nothing; DescribeAcls answers it at top level. Granted (here as a
// local ACL), they work, and an ACL created over the wire takes effect.
func TestACLRPCsNeedClusterPermission(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	gen := s.dst.ACLGeneration()

	cr := request[*kmsg.CreateACLsResponse](t, cl, createACLsReq(
		creation(wTopic, "orders", wLiteral, anon, wRead, wAllow), creation(wCluster, ClusterName, wLiteral, anon, kmsg.ACLOperation(2), wAllow)))
	require.Len(t, cr.Results, 2)
	for _, r := range cr.Results {
		require.Equal(t, codeClusterAuthzFailedWire, r.ErrorCode)
	}
	require.Empty(t, s.dst.ACLs())
	require.Equal(t, gen, s.dst.ACLGeneration(), "a refused CreateAcls changes nothing")

	require.NoError(t, s.dst.CreateLocalACLs([]mirror.ACL{allow(ResourceTopic, "L", "other", OpRead)}))
	dr := request[*kmsg.DeleteACLsResponse](t, cl, deleteACLsReq(filterAny()))
	require.Equal(t, codeClusterAuthzFailedWire, dr.Results[0].ErrorCode)
	require.Empty(t, dr.Results[0].MatchingACLs)
	require.Len(t, s.dst.LocalACLs(), 1, "a refused DeleteAcls removes nothing")

	desc := request[*kmsg.DescribeACLsResponse](t, cl, describeAll())
	require.Equal(t, codeClusterAuthzFailedWire, desc.ErrorCode)
	require.Empty(t, desc.Resources)

	// ALTER on the cluster allows create and delete, and DESCRIBE (implied).
	require.NoError(t, s.dst.CreateLocalACLs([]mirror.ACL{allow(ResourceCluster, "L", ClusterName, OpAlter)}))
	require.Equal(t, codeTopicAuthorizationFailed, fetchCode(t, cl, s))
	cr = request[*kmsg.CreateACLsResponse](t, cl, createACLsReq(creation(wTopic, "orders", wLiteral, anon, wRead, wAllow)))
	require.Equal(t, int16(0), cr.Results[0].ErrorCode)
	require.Equal(t, int16(0), fetchCode(t, cl, s), "the created ACL takes effect")
	desc = request[*kmsg.DescribeACLsResponse](t, cl, describeAll())
	require.Equal(t, int16(0), desc.ErrorCode)
	require.Len(t, desc.Resources, 3)

	f := filterAny()
	f.ResourceType, f.ResourceName = wTopic, kmsg.StringPtr("orders")
	dr = request[*kmsg.DeleteACLsResponse](t, cl, deleteACLsReq(f))
	require.Equal(t, int16(0), dr.Results[0].ErrorCode)
	require.Len(t, dr.Results[0].MatchingACLs, 1)
	require.Equal(t, "orders", dr.Results[0].MatchingACLs[0].ResourceName)
	require.Equal(t, codeTopicAuthorizationFailed, fetchCode(t, cl, s), "the removed ACL no longer applies")
}

// TestCreateACLsValidation: each invalid creation answers INVALID_REQUEST
// alone; the valid ones of the same request are created; a duplicate is
// created once and succeeds.
func TestCreateACLsValidation(t *testing.T) {
	s := startSite(t, Config{EnforceACLs: true, ACLPolicy: ACLPolicy{SuperUsers: []string{anon}}})
	cl := s.client(t)
	good := creation(wTopic, "orders", wPrefixed, "User:alice", wRead, wAllow)
	noHost := good
	noHost.Host = ""
	cases := []kmsg.CreateACLsRequestCreation{
		good,
		creation(kmsg.ACLResourceType(1), "x", wLiteral, "User:alice", wRead, wAllow),      // ANY
		creation(kmsg.ACLResourceType(42), "x", wLiteral, "User:alice", wRead, wAllow),     // unknown
		creation(wTopic, "x", kmsg.ACLResourcePatternType(2), "User:alice", wRead, wAllow), // MATCH
		creation(wTopic, "x", wLiteral, "User:alice", kmsg.ACLOperation(1), wAllow),        // ANY op
		creation(wTopic, "x", wLiteral, "User:alice", wRead, kmsg.ACLPermissionType(1)),    // ANY perm
		creation(wTopic, "", wLiteral, "User:alice", wRead, wAllow),
		creation(wCluster, "other-cluster", wLiteral, "User:alice", wAlter, wAllow),
		creation(wTopic, "x", wLiteral, "alice", wRead, wAllow),
		noHost,
		good,
		creation(wClusterMirror, "m1", wLiteral, "User:alice", wDescribe, wAllow),
	}
	resp := request[*kmsg.CreateACLsResponse](t, cl, createACLsReq(cases...))
	require.Len(t, resp.Results, len(cases))
	for i, r := range resp.Results {
		want := codeInvalidRequest
		if i == 0 || i == 10 || i == 11 {
			want = 0
		}
		require.Equal(t, want, r.ErrorCode, "creation %d: %v", i, r.ErrorMessage)
	}
	require.Equal(t, []mirror.ACL{
		{ResourceType: ResourceClusterMirror, ResourceName: "m1", PatternType: PatternLiteral, Principal: "User:alice", Host: "*", Operation: OpDescribe, PermissionType: PermissionAllow},
		{ResourceType: ResourceTopic, ResourceName: "orders", PatternType: PatternPrefixed, Principal: "User:alice", Host: "*", Operation: OpRead, PermissionType: PermissionAllow},
	}, s.dst.LocalACLs())
}

// TestDescribeAndDeleteACLFilters: DescribeAcls lists the effective ACLs
// (local and synced) grouped by resource pattern; MATCH selects the
// bindings that apply to a name; DeleteAcls removes local ACLs only,
// reports each removed one, and lists a matching synced ACL with
// POLICY_VIOLATION without removing it.
func TestDescribeAndDeleteACLFilters(t *testing.T) {
	s := startSite(t, Config{EnforceACLs: true, ACLPolicy: ACLPolicy{SuperUsers: []string{anon}}})
	cl := s.client(t)
	const alice = "User:alice"
	local := []mirror.ACL{
		acl(ResourceTopic, "L", "orders", alice, "*", OpRead, PermissionAllow),
		acl(ResourceTopic, "P", "ord", alice, "*", OpWrite, PermissionAllow),
		acl(ResourceTopic, "L", "*", alice, "*", OpDescribe, PermissionAllow),
		acl(ResourceGroup, "L", "g", alice, "*", OpRead, PermissionAllow),
	}
	require.NoError(t, s.dst.CreateLocalACLs(local))
	synced := acl(ResourceTopic, "L", "orders", "User:bob", "*", OpRead, PermissionDeny)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m1", []mirror.ACL{synced}))

	desc := request[*kmsg.DescribeACLsResponse](t, cl, describeAll())
	require.Equal(t, int16(0), desc.ErrorCode)
	n := 0
	for _, r := range desc.Resources {
		n += len(r.ACLs)
	}
	require.Equal(t, 5, n, "local and synced")
	require.Len(t, desc.Resources, 4, "grouped by resource pattern")

	match := describeAll()
	match.ResourceType, match.ResourcePatternType, match.ResourceName = wTopic, kmsg.ACLResourcePatternType(matchCode), kmsg.StringPtr("orders")
	desc = request[*kmsg.DescribeACLsResponse](t, cl, match)
	names := map[string]int{}
	for _, r := range desc.Resources {
		names[r.ResourceName+"/"+r.ResourcePatternType.String()] += len(r.ACLs)
	}
	require.Equal(t, map[string]int{"orders/LITERAL": 2, "ord/PREFIXED": 1, "*/LITERAL": 1}, names)

	literal := describeAll()
	literal.ResourceType, literal.ResourcePatternType, literal.ResourceName = wTopic, wLiteral, kmsg.StringPtr("orders")
	literal.Principal = kmsg.StringPtr(alice)
	desc = request[*kmsg.DescribeACLsResponse](t, cl, literal)
	require.Len(t, desc.Resources, 1)
	require.Len(t, desc.Resources[0].ACLs, 1)

	bad := describeAll()
	bad.ResourcePatternType = 0
	require.Equal(t, codeInvalidRequest, request[*kmsg.DescribeACLsResponse](t, cl, bad).ErrorCode)

	// Delete by MATCH on "orders": removes the three local topic ACLs that
	// apply; the synced DENY is reported, not removed. A second filter that
	// overlaps lists the shared ACL too. An UNKNOWN filter fails alone.
	f1 := filterAny()
	f1.ResourceType, f1.ResourcePatternType, f1.ResourceName = wTopic, kmsg.ACLResourcePatternType(matchCode), kmsg.StringPtr("orders")
	f2 := filterAny()
	f2.ResourceType, f2.Operation = wTopic, wRead
	f3 := filterAny()
	f3.PermissionType = 0
	dr := request[*kmsg.DeleteACLsResponse](t, cl, deleteACLsReq(f1, f2, f3))
	require.Len(t, dr.Results, 3)
	require.Equal(t, int16(0), dr.Results[0].ErrorCode)
	var removed, refused int
	for _, m := range dr.Results[0].MatchingACLs {
		switch m.ErrorCode {
		case 0:
			removed++
		case codePolicyViolation:
			refused++
			require.Equal(t, "User:bob", m.Principal)
		}
	}
	require.Equal(t, 3, removed)
	require.Equal(t, 1, refused)
	require.Len(t, dr.Results[1].MatchingACLs, 2, "READ on orders (removed) and the synced READ (refused)")
	require.Equal(t, codeInvalidRequest, dr.Results[2].ErrorCode)
	require.Equal(t, []mirror.ACL{local[3]}, s.dst.LocalACLs())
	require.Equal(t, []mirror.ACL{synced}, s.dst.MirrorACLs("m1"))
}

// TestACLRPCsWithoutEnforcement: without EnforceACLs the ACL RPCs answer
// SECURITY_DISABLED (Kafka's answer without an authorizer) and change
// nothing; a Destination that keeps no local ACLs does not serve them.
func TestACLRPCsWithoutEnforcement(t *testing.T) {
	s := startSite(t, Config{})
	cl := s.client(t)
	cr := request[*kmsg.CreateACLsResponse](t, cl, createACLsReq(creation(wTopic, "orders", wLiteral, anon, wRead, wAllow)))
	require.Equal(t, codeSecurityDisabled, cr.Results[0].ErrorCode)
	require.Equal(t, codeSecurityDisabled, request[*kmsg.DeleteACLsResponse](t, cl, deleteACLsReq(filterAny())).Results[0].ErrorCode)
	require.Equal(t, codeSecurityDisabled, request[*kmsg.DescribeACLsResponse](t, cl, describeAll()).ErrorCode)
	require.Empty(t, s.dst.ACLs())

	dst := mirror.NewMemoryDestination("c", fetcher.MemoryLogOptions{})
	defer dst.Close()
	noACLs := struct {
		mirror.Destination
		mirror.ProducerIDAllocator
	}{dst, dst}
	dp, err := New(Config{Destination: noACLs, AdvertisedHost: "h", AdvertisedPort: 1})
	require.NoError(t, err)
	defer dp.Close()
	for _, a := range dp.APIs() {
		require.False(t, aclKeys[kmsg.Key(a.Key)], "key %d served without a LocalACLStore", a.Key)
	}
}

// TestAuthorizerIsTheDataPlaneDecision: the mirror RPCs' authorizer answers
// with the same ACLs and policy: CLUSTER_MIRROR bindings, DENY wins, super
// users; nil without enforcement.
func TestAuthorizerIsTheDataPlaneDecision(t *testing.T) {
	s := startSite(t, Config{EnforceACLs: true, ACLPolicy: ACLPolicy{SuperUsers: []string{"User:root"}}})
	az := s.dp.Authorizer()
	require.NotNil(t, az)
	ctx := t.Context()
	require.False(t, az.Authorize(ctx, "User:alice", admin.OpDescribe, admin.ResourceClusterMirror, "m1"))
	require.NoError(t, s.dst.CreateLocalACLs([]mirror.ACL{
		acl(ResourceClusterMirror, "L", "m1", "User:alice", "*", OpDescribe, PermissionAllow),
		acl(ResourceClusterMirror, "P", "m", "User:alice", "*", OpAlter, PermissionAllow),
		acl(ResourceClusterMirror, "L", "m2", "User:alice", "*", OpAll, PermissionDeny),
	}))
	require.True(t, az.Authorize(ctx, "User:alice", admin.OpDescribe, admin.ResourceClusterMirror, "m1"))
	require.True(t, az.Authorize(ctx, "User:alice", admin.OpAlter, admin.ResourceClusterMirror, "m3"))
	require.False(t, az.Authorize(ctx, "User:alice", admin.OpAlter, admin.ResourceClusterMirror, "m2"), "DENY wins")
	require.False(t, az.Authorize(ctx, "User:alice", admin.OpCreate, admin.ResourceClusterMirror, "m1"))
	require.False(t, az.Authorize(ctx, "User:alice", admin.OpClusterAction, admin.ResourceCluster, ClusterName))
	require.True(t, az.Authorize(ctx, "User:root", admin.OpClusterAction, admin.ResourceCluster, ClusterName))

	plain := startSite(t, Config{})
	require.Nil(t, plain.dp.Authorizer())
}

// TestACLWireCodesAreKafkas: the wire codes of the ACL enums are Kafka's
// (as kmsg names them), CLUSTER_MIRROR being admin.ResourceClusterMirror.
func TestACLWireCodesAreKafkas(t *testing.T) {
	for c, name := range resourceTypeCodes {
		if c == kmsg.ACLResourceType(admin.ResourceClusterMirror) {
			require.Equal(t, admin.ResourceClusterMirror.String(), name)
			require.Equal(t, "UNKNOWN", c.String(), "CLUSTER_MIRROR's code is free in Kafka's table")
			continue
		}
		require.Equal(t, c.String(), name)
	}
	for c, name := range operationCodes {
		if c == 15 { // Kafka 4.4's TWO_PHASE_COMMIT, newer than kmsg's names
			require.Equal(t, "TWO_PHASE_COMMIT", name)
			continue
		}
		require.Equal(t, c.String(), name)
	}
	for c, name := range patternCodes {
		require.Equal(t, c.String(), name)
	}
	for c, name := range permissionCodes {
		require.Equal(t, c.String(), name)
	}
}

// TestACLSyncReadsASiteOfThisKind: a mirror whose source is a kmirror site
// reads its ACLs, CLUSTER_MIRROR bindings included, with the metadata sync's
// source admin (DescribeAcls): none is refused as an unknown code.
func TestACLSyncReadsASiteOfThisKind(t *testing.T) {
	s := startSite(t, Config{EnforceACLs: true, ACLPolicy: ACLPolicy{SuperUsers: []string{anon}}})
	want := []mirror.ACL{
		acl(ResourceClusterMirror, "L", "m1", "User:alice", "*", OpDescribe, PermissionAllow),
		acl(ResourceTopic, "P", "ord", "User:alice", "*", OpRead, PermissionAllow),
	}
	require.NoError(t, s.dst.CreateLocalACLs(want))
	mc, err := controller.ParseMirrorConfig(map[string]string{controller.KeyBootstrapServers: s.addr})
	require.NoError(t, err)
	sa, err := metasync.NewKafkaSourceAdmin(mc)
	require.NoError(t, err)
	defer sa.Close()
	got, err := sa.DescribeACLs(t.Context())
	require.NoError(t, err)
	require.Equal(t, s.dst.ACLs(), got)
}
