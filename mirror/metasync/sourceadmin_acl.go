package metasync

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/kmirror/kmirror/mirror/dest"
)

var _ ACLSource = (*KafkaSourceAdmin)(nil)

// Kafka's codes of the ACL enums (the same numbers on the wire and in sarama).
var (
	aclResourceNames = map[sarama.AclResourceType]string{
		sarama.AclResourceTopic: "TOPIC", sarama.AclResourceGroup: "GROUP", sarama.AclResourceCluster: "CLUSTER",
		sarama.AclResourceTransactionalID: "TRANSACTIONAL_ID", sarama.AclResourceDelegationToken: "DELEGATION_TOKEN",
		sarama.AclResourceType(7): "USER",
	}
	aclOperationNames = map[sarama.AclOperation]string{
		sarama.AclOperationAll: "ALL", sarama.AclOperationRead: "READ", sarama.AclOperationWrite: "WRITE",
		sarama.AclOperationCreate: "CREATE", sarama.AclOperationDelete: "DELETE", sarama.AclOperationAlter: "ALTER",
		sarama.AclOperationDescribe: "DESCRIBE", sarama.AclOperationClusterAction: "CLUSTER_ACTION",
		sarama.AclOperationDescribeConfigs: "DESCRIBE_CONFIGS", sarama.AclOperationAlterConfigs: "ALTER_CONFIGS",
		sarama.AclOperationIdempotentWrite: "IDEMPOTENT_WRITE", sarama.AclOperation(13): "CREATE_TOKENS",
		sarama.AclOperation(14): "DESCRIBE_TOKENS", sarama.AclOperation(15): "TWO_PHASE_COMMIT",
	}
	aclPermissionNames = map[sarama.AclPermissionType]string{sarama.AclPermissionAllow: "ALLOW", sarama.AclPermissionDeny: "DENY"}
	aclPatternNames    = map[sarama.AclResourcePatternType]string{sarama.AclPatternLiteral: "LITERAL", sarama.AclPatternPrefixed: "PREFIXED"}
)

// DescribeACLs implements ACLSource with one DescribeAcls request matching every
// binding. A binding with a code this table does not know is refused with an error
// naming it (never dropped silently).
func (a *KafkaSourceAdmin) DescribeACLs(ctx context.Context) ([]dest.ACL, error) {
	_, adm, err := a.conn(ctx)
	if err != nil {
		return nil, err
	}
	res, err := adm.ListAcls(sarama.AclFilter{ResourceType: sarama.AclResourceAny,
		ResourcePatternTypeFilter: sarama.AclPatternAny, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny})
	if err != nil {
		return nil, fmt.Errorf("%w: describe ACLs: %w", ErrSourceAdmin, err)
	}
	var out []dest.ACL
	for _, ra := range res {
		rt, ok1 := aclResourceNames[ra.ResourceType]
		pt, ok2 := aclPatternNames[ra.ResourcePatternType]
		for _, acl := range ra.Acls {
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
