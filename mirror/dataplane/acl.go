package dataplane

import (
	"slices"
	"strings"

	"github.com/kmirror/kmirror/mirror"
)

// AnonymousPrincipal is the principal of a connection that did not
// authenticate: the data plane has no SASL, so every plaintext client is
// this principal (a TLS client with a certificate is "User:" + its subject,
// admin.DefaultPrincipal).
const AnonymousPrincipal = "User:ANONYMOUS"

// WildcardPrincipal is the principal of an ACL that applies to every user.
const WildcardPrincipal = "User:*"

// Resource types, pattern types, permissions and operations of an ACL, in
// Kafka's names (as mirror.ACL spells them).
const (
	ResourceTopic         = "TOPIC"
	ResourceGroup         = "GROUP"
	ResourceCluster       = "CLUSTER"
	ResourceTransactional = "TRANSACTIONAL_ID"

	PatternLiteral  = "LITERAL"
	PatternPrefixed = "PREFIXED"

	PermissionAllow = "ALLOW"
	PermissionDeny  = "DENY"

	OpAll             = "ALL"
	OpRead            = "READ"
	OpWrite           = "WRITE"
	OpCreate          = "CREATE"
	OpDelete          = "DELETE"
	OpAlter           = "ALTER"
	OpDescribe        = "DESCRIBE"
	OpClusterAction   = "CLUSTER_ACTION"
	OpDescribeConfigs = "DESCRIBE_CONFIGS"
	OpAlterConfigs    = "ALTER_CONFIGS"
	OpIdempotentWrite = "IDEMPOTENT_WRITE"
)

// ClusterName is the resource name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// wildcardResource is the literal resource name that matches every name.
const wildcardResource = "*"

// Action is one authorization question: may Principal, connected from Host
// (an IP address, or "" when unknown), perform Operation on the resource
// (ResourceType, Name)?
type Action struct {
	Principal    string
	Host         string
	Operation    string
	ResourceType string
	Name         string
}

// ACLPolicy is what the ACLs alone do not say: super users, and what an
// unreferenced resource allows (Kafka's super.users and
// allow.everyone.if.no.acl.found).
type ACLPolicy struct {
	// SuperUsers are principals ("User:admin") allowed everything.
	SuperUsers []string
	// AllowIfNoACL allows an action on a resource no ACL refers to (by
	// any principal); false (Kafka's default) denies it.
	AllowIfNoACL bool
}

// Decision is the answer to an Action and why.
type Decision struct {
	Allowed bool
	// Rule is the binding that decided: the DENY that refused, or an ALLOW
	// that allowed; nil when none did (super user, or no matching binding).
	Rule *mirror.ACL
	// SuperUser is set when the principal is a super user.
	SuperUser bool
	// ResourceHasACLs reports whether any binding refers to the resource
	// (when none does, ACLPolicy.AllowIfNoACL decided).
	ResourceHasACLs bool
}

// Decide answers a with the semantics of Kafka's StandardAuthorizer:
//   - a super user is allowed everything;
//   - a binding applies when its resource type is a's, its pattern matches
//     a.Name (LITERAL: equal, or the name "*"; PREFIXED: a prefix of it),
//     its principal is a.Principal or "User:*", and its host is a.Host or
//     "*";
//   - a DENY for the operation (or ALL) wins over every ALLOW;
//   - an ALLOW for the operation (or ALL) allows; an ALLOW of READ, WRITE,
//     DELETE or ALTER also allows DESCRIBE, and one of ALTER_CONFIGS allows
//     DESCRIBE_CONFIGS (implications hold for ALLOW only);
//   - otherwise denied, unless no binding refers to the resource at all and
//     policy.AllowIfNoACL is set.
//
// Bindings with an unknown pattern or permission type, or an empty resource
// name, never apply.
func Decide(acls []mirror.ACL, policy ACLPolicy, a Action) Decision {
	for _, su := range policy.SuperUsers {
		if su == a.Principal {
			return Decision{Allowed: true, SuperUser: true}
		}
	}
	var d Decision
	for i := range acls {
		acl := &acls[i]
		if acl.ResourceType != a.ResourceType || !patternMatches(acl, a.Name) {
			continue
		}
		d.ResourceHasACLs = true
		if !entryMatches(acl, a) {
			continue
		}
		switch acl.PermissionType {
		case PermissionDeny:
			if acl.Operation == OpAll || acl.Operation == a.Operation {
				return Decision{Rule: acl, ResourceHasACLs: true}
			}
		case PermissionAllow:
			if d.Rule == nil && allowCovers(acl.Operation, a.Operation) {
				d.Rule = acl
			}
		}
	}
	d.Allowed = d.Rule != nil || (!d.ResourceHasACLs && policy.AllowIfNoACL)
	return d
}

// patternMatches reports whether the binding's resource pattern matches name.
func patternMatches(acl *mirror.ACL, name string) bool {
	switch {
	case acl.ResourceName == "":
		return false
	case acl.PatternType == PatternLiteral:
		return acl.ResourceName == name || acl.ResourceName == wildcardResource
	case acl.PatternType == PatternPrefixed:
		return strings.HasPrefix(name, acl.ResourceName)
	}
	return false
}

// entryMatches reports whether the binding's principal and host match a.
func entryMatches(acl *mirror.ACL, a Action) bool {
	if acl.Principal != a.Principal && acl.Principal != WildcardPrincipal {
		return false
	}
	return acl.Host == wildcardResource || (a.Host != "" && acl.Host == a.Host)
}

// allowCovers reports whether an ALLOW of aclOp permits op.
func allowCovers(aclOp, op string) bool {
	if aclOp == OpAll || aclOp == op {
		return true
	}
	switch op {
	case OpDescribe:
		return aclOp == OpRead || aclOp == OpWrite || aclOp == OpDelete || aclOp == OpAlter
	case OpDescribeConfigs:
		return aclOp == OpAlterConfigs
	}
	return false
}

// DecideAnyResource answers whether a.Principal may perform a.Operation on
// at least one resource of a.ResourceType (a.Name is ignored), with Kafka's
// authorizeByResourceType semantics: a super user may; a DENY on the
// literal "*" refuses; an ALLOW on the literal "*" allows; otherwise some
// ALLOW on a literal or prefix must not be dominated by a DENY (the same
// literal, or a prefix DENY that is a prefix of it). Only the operation
// itself or ALL count (no implications), as in Kafka.
func DecideAnyResource(acls []mirror.ACL, policy ACLPolicy, a Action) bool {
	probe := a
	probe.Name = "hardcode" // what Kafka probes: lets super users (and an ACL-less type with AllowIfNoACL) through
	if Decide(acls, policy, probe).Allowed {
		return true
	}
	type pattern struct {
		literal bool
		name    string
	}
	var allows []pattern
	var denyLiteral, denyPrefix []string
	for i := range acls {
		acl := &acls[i]
		if acl.ResourceType != a.ResourceType || acl.ResourceName == "" || !entryMatches(acl, a) ||
			(acl.Operation != a.Operation && acl.Operation != OpAll) {
			continue
		}
		literal := acl.PatternType == PatternLiteral
		if !literal && acl.PatternType != PatternPrefixed {
			continue
		}
		switch acl.PermissionType {
		case PermissionDeny:
			switch {
			case literal && acl.ResourceName == wildcardResource:
				return false
			case literal:
				denyLiteral = append(denyLiteral, acl.ResourceName)
			default:
				denyPrefix = append(denyPrefix, acl.ResourceName)
			}
		case PermissionAllow:
			if literal && acl.ResourceName == wildcardResource {
				return true
			}
			allows = append(allows, pattern{literal, acl.ResourceName})
		}
	}
	for _, al := range allows {
		if al.literal && slices.Contains(denyLiteral, al.name) {
			continue
		}
		dominated := false
		for _, dp := range denyPrefix {
			if strings.HasPrefix(al.name, dp) {
				dominated = true
				break
			}
		}
		if !dominated {
			return true
		}
	}
	return false
}
