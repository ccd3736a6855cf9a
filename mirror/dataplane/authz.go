package dataplane

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
)

// ErrUnauthorized is wrapped by the error of a request the data plane cannot
// answer with an authorization code: a Produce with acks 0 that names a
// topic the principal may not write (Kafka closes the connection then, and
// so does the admin server on this error).
var ErrUnauthorized = errors.New("dataplane: not authorized")

// Kafka's authorization codes the data plane answers.
const (
	codeTopicAuthorizationFailed   = int16(admin.CodeTopicAuthorizationFailed)   // 29
	codeGroupAuthorizationFailed   = int16(30)                                   // GROUP_AUTHORIZATION_FAILED
	codeClusterAuthorizationFailed = int16(admin.CodeClusterAuthorizationFailed) // 31
	codeTxnIDAuthorizationFailed   = int16(53)                                   // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
)

// authz is the authorization view of one request: who asks, from where, and
// the ACLs at the time. A nil *authz allows everything (enforcement off).
type authz struct {
	acls      []mirror.ACL
	policy    ACLPolicy
	principal string
	host      string
}

// allowed reports whether the request's principal may perform op on the
// resource.
func (z *authz) allowed(op, resourceType, name string) bool {
	if z == nil {
		return true
	}
	return Decide(z.acls, z.policy, Action{Principal: z.principal, Host: z.host, Operation: op, ResourceType: resourceType, Name: name}).Allowed
}

// allowedAny reports whether the principal may perform op on some resource
// of the type (DecideAnyResource).
func (z *authz) allowedAny(op, resourceType string) bool {
	if z == nil {
		return true
	}
	return DecideAnyResource(z.acls, z.policy, Action{Principal: z.principal, Host: z.host, Operation: op, ResourceType: resourceType})
}

// ACLGenerationer is optionally implemented by a Destination's ACL store
// (mirror.LocalDestination does): ACLGeneration changes whenever the set
// ACLs returns may have changed. With it the data plane re-reads the ACLs
// only after a change; without it, on every request.
type ACLGenerationer interface {
	ACLGeneration() uint64
}

// aclCache is the last ACL snapshot read and the generation it was read at.
type aclCache struct {
	mu    sync.Mutex
	valid bool
	gen   uint64
	acls  []mirror.ACL // shared read-only by the requests using it
}

// acls returns the ACLs of the store, from the cache when the store's
// generation has not moved.
func (dp *DataPlane) acls() []mirror.ACL {
	g, ok := dp.aclStore.(ACLGenerationer)
	if !ok {
		return dp.aclStore.ACLs()
	}
	gen := g.ACLGeneration() // before reading: a change meanwhile moves it again
	c := &dp.aclCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.valid || c.gen != gen {
		c.acls, c.gen, c.valid = dp.aclStore.ACLs(), gen, true
	}
	return c.acls
}

// authzFor builds the view of the request served under ctx: the principal
// and address of its connection (admin.RequestContextFrom), or
// AnonymousPrincipal from an unknown host for a request given to Serve.
func (dp *DataPlane) authzFor(ctx context.Context) *authz {
	z := &authz{acls: dp.acls(), policy: dp.cfg.ACLPolicy, principal: AnonymousPrincipal}
	if rc, ok := admin.RequestContextFrom(ctx); ok {
		if rc.Principal != "" {
			z.principal = rc.Principal
		}
		if host, _, err := net.SplitHostPort(rc.RemoteAddr); err == nil {
			z.host = host
		}
	}
	return z
}

// next serves a (possibly narrowed) request with the key's own handler.
type next func(kmsg.Request) (kmsg.Response, error)

// authzRule checks one key's request against z and calls next with what the
// principal may do; it answers the authorization codes for the rest.
type authzRule func(dp *DataPlane, z *authz, req kmsg.Request, next next) (kmsg.Response, error)

// authzRules is the one table of the checks of every served key (Kafka's
// KafkaApis checks, per RPC). TestEveryKeyHasAnAuthzRule keeps it complete.
var authzRules = map[kmsg.Key]authzRule{
	kmsg.Produce:                authzProduce,
	kmsg.Fetch:                  authzFetch,
	kmsg.ListOffsets:            authzListOffsets,
	kmsg.OffsetForLeaderEpoch:   authzOffsetForLeaderEpoch,
	kmsg.Metadata:               authzMetadata,
	kmsg.CreateTopics:           authzCreateTopics,
	kmsg.CreatePartitions:       authzCreatePartitions,
	kmsg.DeleteTopics:           authzDeleteTopics,
	kmsg.DeleteRecords:          authzDeleteRecords,
	kmsg.FindCoordinator:        authzFindCoordinator,
	kmsg.OffsetCommit:           authzOffsetCommit,
	kmsg.OffsetFetch:            authzOffsetFetch,
	kmsg.DescribeGroups:         authzDescribeGroups,
	kmsg.ListGroups:             authzListGroups,
	kmsg.JoinGroup:              authzGroupMembership,
	kmsg.SyncGroup:              authzGroupMembership,
	kmsg.Heartbeat:              authzGroupMembership,
	kmsg.LeaveGroup:             authzGroupMembership,
	kmsg.DeleteGroups:           authzDeleteGroups,
	kmsg.ConsumerGroupHeartbeat: authzConsumerGroupHeartbeat,
	kmsg.ConsumerGroupDescribe:  authzConsumerGroupDescribe,
	kmsg.InitProducerID:         authzInitProducerID,
	kmsg.AddPartitionsToTxn:     authzAddPartitionsToTxn,
	kmsg.AddOffsetsToTxn:        authzAddOffsetsToTxn,
	kmsg.EndTxn:                 authzEndTxn,
	kmsg.TxnOffsetCommit:        authzTxnOffsetCommit,
	kmsg.DescribeTransactions:   authzDescribeTransactions,
	kmsg.ListTransactions:       authzListTransactions,
	kmsg.DescribeACLs:           authzDescribeACLs,
	kmsg.CreateACLs:             authzCreateACLs,
	kmsg.DeleteACLs:             authzDeleteACLs,
}

// AuthorizesKey reports whether the data plane has an authorization rule
// for key (every key APIs can return has one); a host that serves further
// keys on the same listener checks its own with it.
func AuthorizesKey(key int16) bool {
	_, ok := authzRules[kmsg.Key(key)]
	return ok
}

// call serves req with a's handler, through the key's authorization rule
// when ACLs are enforced.
func (dp *DataPlane) call(ctx context.Context, a api, req kmsg.Request) (kmsg.Response, error) {
	resp, err := dp.authorizeAndServe(ctx, a, req)
	if err == nil {
		txnCodesForClient(resp)
	}
	return resp, err
}

// authorizeAndServe serves req with a's handler, through the key's
// authorization rule when ACLs are enforced.
func (dp *DataPlane) authorizeAndServe(ctx context.Context, a api, req kmsg.Request) (kmsg.Response, error) {
	if dp.aclStore == nil {
		return a.serve(dp, ctx, req)
	}
	rule, ok := authzRules[a.key]
	if !ok { // never: TestEveryKeyHasAnAuthzRule
		return nil, errors.New("dataplane: no authorization rule for a served key")
	}
	return rule(dp, dp.authzFor(ctx), req, func(r kmsg.Request) (kmsg.Response, error) { return a.serve(dp, ctx, r) })
}

// Allowed reports whether the principal of the request served under ctx
// may perform op (OpRead, ...) on the resource (ResourceTopic, ...), with
// the same decision the data plane's own keys use; always true without
// Config.EnforceACLs. Hosts serving further keys next to the data plane
// (kmirrord's DescribeConfigs) authorize with it.
func (dp *DataPlane) Allowed(ctx context.Context, op, resourceType, name string) bool {
	if dp.aclStore == nil {
		return true
	}
	return dp.authzFor(ctx).allowed(op, resourceType, name)
}

// split divides ts into the items allow lets through (kept: they stay in the
// request) and the rest (denied: answered with an authorization code).
func split[T any](ts []T, allow func(T) bool) (kept, denied []T) {
	for _, t := range ts {
		if allow(t) {
			kept = append(kept, t)
		} else {
			denied = append(denied, t)
		}
	}
	return kept, denied
}

// serveKept answers a request narrowed to what the principal may do: next
// serves it when anything is kept, else an empty response of its kind stands
// in (there is nothing to serve).
func serveKept(req kmsg.Request, some bool, next next) (kmsg.Response, error) {
	if !some {
		return req.ResponseKind(), nil
	}
	return next(req)
}
