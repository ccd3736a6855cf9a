package dataplane

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
)

// ResourceClusterMirror is the resource type of a KIP-1279 cluster mirror
// (admin.ResourceClusterMirror on the wire); its names are mirror names.
const ResourceClusterMirror = "CLUSTER_MIRROR"

// Further resource types an ACL may name (CreateAcls accepts them; the data
// plane's own keys never ask about them).
const (
	ResourceDelegationToken = "DELEGATION_TOKEN"
	ResourceUser            = "USER"
)

// LocalACLStore is implemented by a Destination that keeps the site's own
// ACLs next to the ones its mirrors synced (mirror.LocalDestination does).
// With it the data plane serves CreateAcls, DeleteAcls and DescribeAcls:
// created ACLs are local, DeleteAcls removes local ACLs only, and the
// mirrors' ACL sync never changes them. ACLs (mirror.ACLStore) must return
// the effective set, local and synced, and every change must move
// ACLGeneration.
type LocalACLStore interface {
	// LocalACLs returns the site's own ACLs, sorted.
	LocalACLs() []mirror.ACL
	// CreateLocalACLs adds acls (an ACL already there is not added twice),
	// durably; on an error nothing changed.
	CreateLocalACLs(acls []mirror.ACL) error
	// DeleteLocalACLs removes the local ACLs match selects and returns them,
	// durably; on an error nothing was removed. match is called with the
	// store's lock held and must not call the store.
	DeleteLocalACLs(match func(mirror.ACL) bool) ([]mirror.ACL, error)
	// SyncedACLs returns the ACLs each mirror synced, by mirror name.
	SyncedACLs() map[string][]mirror.ACL
}

var _ LocalACLStore = (*mirror.LocalDestination)(nil)

// Kafka's codes the ACL RPCs answer.
const (
	codeInvalidRequest     = int16(admin.CodeInvalidRequest)     // 42
	codePolicyViolation    = int16(admin.CodePolicyViolation)    // 44
	codeSecurityDisabled   = int16(54)                           // SECURITY_DISABLED
	codeUnknownServerError = int16(admin.CodeUnknownServerError) // -1
)

// Wire codes of the ACL enums (Kafka's ResourceType, PatternType,
// AclOperation, AclPermissionType), both ways.
var (
	resourceTypeCodes = map[kmsg.ACLResourceType]string{2: ResourceTopic, 3: ResourceGroup, 4: ResourceCluster,
		5: ResourceTransactional, 6: ResourceDelegationToken, 7: ResourceUser,
		kmsg.ACLResourceType(admin.ResourceClusterMirror): ResourceClusterMirror}
	patternCodes    = map[kmsg.ACLResourcePatternType]string{3: PatternLiteral, 4: PatternPrefixed}
	operationCodes  = map[kmsg.ACLOperation]string{2: OpAll, 3: OpRead, 4: OpWrite, 5: OpCreate, 6: OpDelete, 7: OpAlter, 8: OpDescribe, 9: OpClusterAction, 10: OpDescribeConfigs, 11: OpAlterConfigs, 12: OpIdempotentWrite, 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"}
	permissionCodes = map[kmsg.ACLPermissionType]string{2: PermissionDeny, 3: PermissionAllow}
)

const (
	anyCode   = 1 // ANY in every ACL enum
	matchCode = 2 // MATCH (pattern type of a filter)
)

// wireCode returns the wire code of name in m (0, UNKNOWN, when absent).
func wireCode[K comparable](m map[K]string, name string) K {
	for k, v := range m {
		if v == name {
			return k
		}
	}
	var zero K
	return zero
}

// aclKeys are the ACL RPCs: served when the Destination is a LocalACLStore.
var aclKeys = map[kmsg.Key]bool{kmsg.DescribeACLs: true, kmsg.CreateACLs: true, kmsg.DeleteACLs: true}

// localACLs returns the Destination's LocalACLStore, or nil.
func (dp *DataPlane) localACLs() LocalACLStore {
	s, _ := dp.dst.(LocalACLStore)
	return s
}

const securityDisabled = "ACLs are not enforced on this site (the data plane runs without EnforceACLs)"

// authzDescribeACLs: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// at top level (Kafka's AclApis).
func authzDescribeACLs(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	if z.allowed(OpDescribe, ResourceCluster, ClusterName) {
		return next(req)
	}
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = codeClusterAuthorizationFailed
	resp.ErrorMessage = kmsg.StringPtr("not authorized: DESCRIBE on CLUSTER")
	return resp, nil
}

// authzCreateACLs: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for
// every creation (nothing is created).
func authzCreateACLs(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	if z.allowed(OpAlter, ResourceCluster, ClusterName) {
		return next(req)
	}
	r := req.(*kmsg.CreateACLsRequest)
	return createACLsError(r, codeClusterAuthorizationFailed, "not authorized: ALTER on CLUSTER"), nil
}

// authzDeleteACLs: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for
// every filter (nothing is removed).
func authzDeleteACLs(_ *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error) {
	if z.allowed(OpAlter, ResourceCluster, ClusterName) {
		return next(req)
	}
	r := req.(*kmsg.DeleteACLsRequest)
	return deleteACLsError(r, codeClusterAuthorizationFailed, "not authorized: ALTER on CLUSTER"), nil
}

func createACLsError(r *kmsg.CreateACLsRequest, code int16, msg string) *kmsg.CreateACLsResponse {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	for range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = code, kmsg.StringPtr(msg)
		resp.Results = append(resp.Results, res)
	}
	return resp
}

func deleteACLsError(r *kmsg.DeleteACLsRequest, code int16, msg string) *kmsg.DeleteACLsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = code, kmsg.StringPtr(msg)
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// describeACLs answers the effective ACLs (the site's own and those its
// mirrors synced, without duplicates: what the data plane enforces) that
// match the filter, grouped by resource pattern. Which of them are local is
// not said on the wire (Kafka's response has no field for it); DeleteAcls
// tells a synced match apart by its error.
func (dp *DataPlane) describeACLs(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.DescribeACLsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	if dp.aclStore == nil {
		resp.ErrorCode, resp.ErrorMessage = codeSecurityDisabled, kmsg.StringPtr(securityDisabled)
		return resp, nil
	}
	f := aclFilter{resourceType: r.ResourceType, name: r.ResourceName, pattern: r.ResourcePatternType,
		principal: r.Principal, host: r.Host, operation: r.Operation, permission: r.PermissionType}
	if why := f.unknown(); why != "" {
		resp.ErrorCode, resp.ErrorMessage = codeInvalidRequest, kmsg.StringPtr(why)
		return resp, nil
	}
	type pattern struct{ resourceType, name, patternType string }
	var order []pattern
	byPattern := map[pattern][]kmsg.DescribeACLsResponseResourceACL{}
	for _, a := range dp.acls() { // sorted: the order is stable
		if !f.matches(a) {
			continue
		}
		p := pattern{a.ResourceType, a.ResourceName, a.PatternType}
		if _, ok := byPattern[p]; !ok {
			order = append(order, p)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation, e.PermissionType = wireCode(operationCodes, a.Operation), wireCode(permissionCodes, a.PermissionType)
		byPattern[p] = append(byPattern[p], e)
	}
	for _, p := range order {
		res := kmsg.NewDescribeACLsResponseResource()
		res.ResourceType, res.ResourceName = wireCode(resourceTypeCodes, p.resourceType), p.name
		res.ResourcePatternType = wireCode(patternCodes, p.patternType)
		res.ACLs = byPattern[p]
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}

// createACLs adds the valid creations to the site's own ACLs, in one durable
// change, and answers a result per creation in request order: INVALID_REQUEST
// for an invalid binding (Kafka's AclControlManager and AclApis checks),
// UNKNOWN_SERVER_ERROR for every valid one when the store could not write
// (none was created). Creating an ACL that exists succeeds and adds nothing.
func (dp *DataPlane) createACLs(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.CreateACLsRequest)
	store := dp.localACLs()
	if dp.aclStore == nil || store == nil {
		return createACLsError(r, codeSecurityDisabled, securityDisabled), nil
	}
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	var valid []mirror.ACL
	var validAt []int
	for i, c := range r.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		a, why := aclFromCreation(c)
		if why != "" {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = codeInvalidRequest, kmsg.StringPtr(why)
			continue
		}
		valid, validAt = append(valid, a), append(validAt, i)
	}
	if len(valid) > 0 {
		if err := store.CreateLocalACLs(valid); err != nil {
			for _, i := range validAt {
				resp.Results[i].ErrorCode = codeUnknownServerError
				resp.Results[i].ErrorMessage = kmsg.StringPtr("ACL not created: " + err.Error())
			}
		}
	}
	return resp, nil
}

// aclFromCreation checks one creation and returns its binding, or why it is
// invalid.
func aclFromCreation(c kmsg.CreateACLsRequestCreation) (mirror.ACL, string) {
	pt := c.ResourcePatternType
	a := mirror.ACL{ResourceType: resourceTypeCodes[c.ResourceType], ResourceName: c.ResourceName,
		PatternType: patternCodes[pt], Principal: c.Principal, Host: c.Host,
		Operation: operationCodes[c.Operation], PermissionType: permissionCodes[c.PermissionType]}
	switch {
	case a.ResourceType == "":
		return a, fmt.Sprintf("invalid resource type %d", c.ResourceType)
	case a.PatternType == "":
		return a, fmt.Sprintf("invalid pattern type %d (LITERAL or PREFIXED)", pt)
	case a.Operation == "":
		return a, fmt.Sprintf("invalid operation %d", c.Operation)
	case a.PermissionType == "":
		return a, fmt.Sprintf("invalid permission type %d (ALLOW or DENY)", c.PermissionType)
	case a.ResourceName == "":
		return a, "resource name should not be empty"
	case a.ResourceType == ResourceCluster && a.ResourceName != ClusterName:
		return a, "the only valid name for the CLUSTER resource is " + ClusterName
	case a.Host == "":
		return a, `empty host (use "*" for every host)`
	}
	if kind, name, ok := strings.Cut(a.Principal, ":"); !ok || kind == "" || name == "" {
		return a, fmt.Sprintf("principal %q is not TYPE:NAME (User:alice)", a.Principal)
	}
	return a, ""
}

// deleteACLs removes, in one durable change, the site's own ACLs that match
// any valid filter, and answers per filter the ACLs it matched: each removed
// local ACL with no error, and each matching ACL a mirror synced with
// POLICY_VIOLATION (a synced ACL is the source's: it is removed on the
// source, or by the mirror's acls.include, never here). An ACL matched by two
// filters is listed under both. A filter with an UNKNOWN field answers
// INVALID_REQUEST; a store that could not write answers UNKNOWN_SERVER_ERROR
// for every valid filter, and nothing was removed.
func (dp *DataPlane) deleteACLs(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.DeleteACLsRequest)
	store := dp.localACLs()
	if dp.aclStore == nil || store == nil {
		return deleteACLsError(r, codeSecurityDisabled, securityDisabled), nil
	}
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	filters := make([]*aclFilter, len(r.Filters)) // nil: invalid
	for i, rf := range r.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		f := aclFilter{resourceType: rf.ResourceType, name: rf.ResourceName, pattern: rf.ResourcePatternType,
			principal: rf.Principal, host: rf.Host, operation: rf.Operation, permission: rf.PermissionType}
		if why := f.unknown(); why != "" {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = codeInvalidRequest, kmsg.StringPtr(why)
			continue
		}
		filters[i] = &f
	}
	removedBy := make([][]mirror.ACL, len(filters))
	_, err := store.DeleteLocalACLs(func(a mirror.ACL) bool {
		hit := false
		for i, f := range filters {
			if f != nil && f.matches(a) {
				removedBy[i] = append(removedBy[i], a)
				hit = true
			}
		}
		return hit
	})
	synced := store.SyncedACLs()
	mirrors := make([]string, 0, len(synced))
	for m := range synced {
		mirrors = append(mirrors, m)
	}
	slices.Sort(mirrors)
	for i, f := range filters {
		if f == nil {
			continue
		}
		res := &resp.Results[i]
		if err != nil {
			res.ErrorCode, res.ErrorMessage = codeUnknownServerError, kmsg.StringPtr("no ACL removed: "+err.Error())
			continue
		}
		for _, a := range removedBy[i] {
			res.MatchingACLs = append(res.MatchingACLs, matchingACL(a, 0, ""))
		}
		for _, m := range mirrors {
			for _, a := range synced[m] {
				if f.matches(a) {
					res.MatchingACLs = append(res.MatchingACLs, matchingACL(a, codePolicyViolation,
						"not removed: synced by cluster mirror "+m+" from its source (remove it there, or change the mirror's acls.include)"))
				}
			}
		}
	}
	return resp, nil
}

func matchingACL(a mirror.ACL, code int16, msg string) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ErrorCode = code
	if msg != "" {
		m.ErrorMessage = kmsg.StringPtr(msg)
	}
	m.ResourceType, m.ResourceName = wireCode(resourceTypeCodes, a.ResourceType), a.ResourceName
	m.ResourcePatternType = wireCode(patternCodes, a.PatternType)
	m.Principal, m.Host = a.Principal, a.Host
	m.Operation, m.PermissionType = wireCode(operationCodes, a.Operation), wireCode(permissionCodes, a.PermissionType)
	return m
}

// aclFilter is Kafka's AclBindingFilter: a resource pattern filter and an
// entry filter, in wire codes; a nil string matches any value.
type aclFilter struct {
	resourceType kmsg.ACLResourceType
	name         *string
	pattern      kmsg.ACLResourcePatternType
	principal    *string
	host         *string
	operation    kmsg.ACLOperation
	permission   kmsg.ACLPermissionType
}

// unknown says why the filter has an UNKNOWN field (a code Kafka does not
// define, or UNKNOWN itself), or "" when it has none.
func (f *aclFilter) unknown() string {
	switch {
	case f.resourceType != anyCode && resourceTypeCodes[f.resourceType] == "":
		return fmt.Sprintf("unknown resource type %d in the filter", f.resourceType)
	case f.pattern != anyCode && f.pattern != matchCode && patternCodes[f.pattern] == "":
		return fmt.Sprintf("unknown pattern type %d in the filter", f.pattern)
	case f.operation != anyCode && operationCodes[f.operation] == "":
		return fmt.Sprintf("unknown operation %d in the filter", f.operation)
	case f.permission != anyCode && permissionCodes[f.permission] == "":
		return fmt.Sprintf("unknown permission type %d in the filter", f.permission)
	}
	return ""
}

// matches reports whether the filter selects binding a, with Kafka's
// ResourcePatternFilter and AccessControlEntryFilter semantics: ANY matches
// every value; a pattern type of ANY or the binding's own compares names
// exactly; MATCH selects the bindings that would apply to the named
// resource (a LITERAL equal to it or "*", a PREFIXED prefix of it).
func (f *aclFilter) matches(a mirror.ACL) bool {
	if f.resourceType != anyCode && resourceTypeCodes[f.resourceType] != a.ResourceType {
		return false
	}
	own := patternCodes[f.pattern] == a.PatternType
	if f.pattern != anyCode && f.pattern != matchCode && !own {
		return false
	}
	if f.name != nil {
		switch {
		case f.pattern == anyCode || own:
			if *f.name != a.ResourceName {
				return false
			}
		case a.PatternType == PatternLiteral:
			if *f.name != a.ResourceName && a.ResourceName != wildcardResource {
				return false
			}
		case a.PatternType == PatternPrefixed:
			if !strings.HasPrefix(*f.name, a.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	switch {
	case f.principal != nil && *f.principal != a.Principal,
		f.host != nil && *f.host != a.Host,
		f.operation != anyCode && operationCodes[f.operation] != a.Operation,
		f.permission != anyCode && permissionCodes[f.permission] != a.PermissionType:
		return false
	}
	return true
}

// Authorizer returns the authorizer of the KIP-1279 mirror RPCs served next
// to the data plane (admin.ServerConfig.Authorizer): the same decision as
// the data plane's own keys (Decide with Config.ACLPolicy over the
// effective ACLs), for the principal the server names and the client
// address of the request's admin.RequestContext. Resource types and
// operations are named as admin.ResourceType and admin.Operation spell them
// (CLUSTER_MIRROR, CLUSTER, TOPIC; CREATE, ALTER, ...). nil without
// Config.EnforceACLs (admin's nil Authorizer allows everything).
func (dp *DataPlane) Authorizer() admin.Authorizer {
	if dp.aclStore == nil {
		return nil
	}
	return admin.AuthorizerFunc(func(ctx context.Context, principal string, op admin.Operation, rt admin.ResourceType, name string) bool {
		z := dp.authzFor(ctx)
		if principal != "" {
			z.principal = principal
		}
		return z.allowed(op.String(), rt.String(), name)
	})
}
