package metasync

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror/dest"
)

var _ ACLSource = (*KafkaSourceAdmin)(nil)

// Kafka's codes of the ACL enums, as on the wire.
var (
	aclResourceNames = map[kmsg.ACLResourceType]string{
		kmsg.ACLResourceTypeTopic: "TOPIC", kmsg.ACLResourceTypeGroup: "GROUP", kmsg.ACLResourceTypeCluster: "CLUSTER",
		kmsg.ACLResourceTypeTransactionalId: "TRANSACTIONAL_ID", kmsg.ACLResourceTypeDelegationToken: "DELEGATION_TOKEN",
		kmsg.ACLResourceType(7): "USER",
		// KIP-1279's CLUSTER_MIRROR, as a kmirror source answers it.
		kmsg.ACLResourceType(admin.ResourceClusterMirror): admin.ResourceClusterMirror.String(),
	}
	aclOperationNames = map[kmsg.ACLOperation]string{
		kmsg.ACLOperationAll: "ALL", kmsg.ACLOperationRead: "READ", kmsg.ACLOperationWrite: "WRITE",
		kmsg.ACLOperationCreate: "CREATE", kmsg.ACLOperationDelete: "DELETE", kmsg.ACLOperationAlter: "ALTER",
		kmsg.ACLOperationDescribe: "DESCRIBE", kmsg.ACLOperationClusterAction: "CLUSTER_ACTION",
		kmsg.ACLOperationDescribeConfigs: "DESCRIBE_CONFIGS", kmsg.ACLOperationAlterConfigs: "ALTER_CONFIGS",
		kmsg.ACLOperationIdempotentWrite: "IDEMPOTENT_WRITE", kmsg.ACLOperation(13): "CREATE_TOKENS",
		kmsg.ACLOperation(14): "DESCRIBE_TOKENS", kmsg.ACLOperation(15): "TWO_PHASE_COMMIT",
	}
	aclPermissionNames = map[kmsg.ACLPermissionType]string{kmsg.ACLPermissionTypeAllow: "ALLOW", kmsg.ACLPermissionTypeDeny: "DENY"}
	aclPatternNames    = map[kmsg.ACLResourcePatternType]string{kmsg.ACLResourcePatternTypeLiteral: "LITERAL", kmsg.ACLResourcePatternTypePrefixed: "PREFIXED"}
)

// DescribeACLs implements ACLSource with one DescribeAcls request matching every
// binding. A binding with a code this table does not know is refused with an error
// naming it (never dropped silently). A source without an authorizer answers
// SECURITY_DISABLED (kerr.SecurityDisabled, wrapped).
func (a *KafkaSourceAdmin) DescribeACLs(ctx context.Context) ([]dest.ACL, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	r, err := a.request(ctx, "describe ACLs", req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.DescribeACLsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("%w: describe ACLs: %w (%s)", ErrSourceAdmin, err, deref(resp.ErrorMessage))
	}
	var out []dest.ACL
	for _, ra := range resp.Resources {
		rt, ok1 := aclResourceNames[ra.ResourceType]
		pt, ok2 := aclPatternNames[ra.ResourcePatternType]
		for _, acl := range ra.ACLs {
			op, ok3 := aclOperationNames[acl.Operation]
			perm, ok4 := aclPermissionNames[acl.PermissionType]
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return nil, fmt.Errorf("%w: describe ACLs: binding on %q with unknown codes (resource %d, pattern %d, operation %d, permission %d)",
					ErrSourceAdmin, ra.ResourceName, ra.ResourceType, ra.ResourcePatternType, acl.Operation, acl.PermissionType)
			}
			out = append(out, dest.ACL{ResourceType: rt, ResourceName: ra.ResourceName, PatternType: pt,
				Principal: acl.Principal, Host: acl.Host, Operation: op, PermissionType: perm})
		}
	}
	return dest.SortACLs(out), nil
}
