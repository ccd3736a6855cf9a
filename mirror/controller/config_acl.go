package controller

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kmirror/kmirror/mirror/dest"
)

// ACLRule is one acls.include rule,
// resourceType;resourceName;operation;permissionType;principal. "*" (or a missing
// trailing field) matches anything; ResourceName is a regular expression matched against
// the whole resource name.
type ACLRule struct {
	ResourceType   string // TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER or *
	ResourceName   string // a regular expression, or *
	Operation      string // READ, WRITE, ... or *
	PermissionType string // ALLOW, DENY or *
	Principal      string // e.g. User:alice, or *

	name *regexp.Regexp
}

var (
	aclResourceTypes = []string{"TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
	aclOperations    = []string{"ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
		"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS",
		"DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"}
	aclPermissions = []string{"ALLOW", "DENY"}
)

// ParseACLRule parses one acls.include rule. Enumerated fields are case-insensitive and
// returned upper case. A rule with more than five fields, an unknown resource type,
// operation or permission type, a resource name that is not a valid regular expression or
// a principal without a "Type:" prefix is refused with an error naming the rule.
func ParseACLRule(rule string) (ACLRule, error) {
	f := strings.Split(rule, ";")
	if len(f) > 5 {
		return ACLRule{}, fmt.Errorf("acl rule %q: %d fields, at most 5 (resourceType;resourceName;operation;permissionType;principal)", rule, len(f))
	}
	for len(f) < 5 {
		f = append(f, "*")
	}
	for i := range f {
		if f[i] = strings.TrimSpace(f[i]); f[i] == "" {
			f[i] = "*"
		}
	}
	r := ACLRule{ResourceType: strings.ToUpper(f[0]), ResourceName: f[1], Operation: strings.ToUpper(f[2]),
		PermissionType: strings.ToUpper(f[3]), Principal: f[4]}
	checks := []struct {
		what, v string
		in      []string
	}{{"resource type", r.ResourceType, aclResourceTypes}, {"operation", r.Operation, aclOperations},
		{"permission type", r.PermissionType, aclPermissions}}
	for _, c := range checks {
		if c.v != "*" && !containsString(c.in, c.v) {
			return ACLRule{}, fmt.Errorf("acl rule %q: unknown %s %q", rule, c.what, c.v)
		}
	}
	if r.Principal != "*" && !strings.Contains(r.Principal, ":") {
		return ACLRule{}, fmt.Errorf("acl rule %q: principal %q is not Type:name", rule, r.Principal)
	}
	pat := r.ResourceName
	if pat == "*" {
		pat = ".*"
	}
	re, err := regexp.Compile(anchor(pat))
	if err != nil {
		return ACLRule{}, fmt.Errorf("acl rule %q: resource name: %v", rule, err)
	}
	r.name = re
	return r, nil
}

// MatchesResourceName reports whether the rule's resource-name pattern matches name.
func (r ACLRule) MatchesResourceName(name string) bool {
	return r.name != nil && r.name.MatchString(name)
}

func validateACLRules(v string) error {
	for _, rule := range splitList(v) {
		if _, err := ParseACLRule(rule); err != nil {
			return err
		}
	}
	return nil
}

// mustACLRules parses rules validated before.
func mustACLRules(v string) []ACLRule {
	var out []ACLRule
	for _, rule := range splitList(v) {
		r, _ := ParseACLRule(rule)
		out = append(out, r)
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Matches reports whether rule selects a: every field of the rule is "*" or equal, and
// its resource-name pattern matches the whole resource name.
func (r ACLRule) Matches(a dest.ACL) bool {
	eq := func(rule, v string) bool { return rule == "*" || rule == v }
	return eq(r.ResourceType, a.ResourceType) && eq(r.Operation, a.Operation) &&
		eq(r.PermissionType, a.PermissionType) && eq(r.Principal, a.Principal) && r.MatchesResourceName(a.ResourceName)
}
