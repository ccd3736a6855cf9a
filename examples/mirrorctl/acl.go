package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
)

// aclOptions are the flags of --add-acl and --remove-acl: the ACLs of one
// CLUSTER_MIRROR (kafka-acls of Kafka 4.4 cannot name that resource type).
type aclOptions struct {
	principal  string
	operations string
	host       string
	deny       bool
}

// validateACL checks the flags of --add-acl and --remove-acl and returns the
// operations' wire codes.
func (o *options) validateACL() ([]kmsg.ACLOperation, error) {
	if !o.addACL && !o.removeACL {
		if o.acl.principal != "" || o.acl.operations != "" || o.acl.host != "*" || o.acl.deny {
			return nil, usagef("--principal, --operation, --host and --deny are only valid with --add-acl or --remove-acl")
		}
		return nil, nil
	}
	if kind, name, ok := strings.Cut(o.acl.principal, ":"); !ok || kind == "" || name == "" {
		return nil, usagef("--principal must be TYPE:NAME (User:alice), got %q", o.acl.principal)
	}
	if strings.TrimSpace(o.acl.host) == "" {
		return nil, usagef(`--host must not be empty ("*" is every host)`)
	}
	var ops []kmsg.ACLOperation
	for _, s := range splitList(o.acl.operations) {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationUnknown || op == kmsg.ACLOperationAny {
			return nil, usagef("--operation: unknown operation %q (Describe, Alter, Create, All, ...)", s)
		}
		ops = append(ops, op)
	}
	if len(ops) == 0 {
		return nil, usagef("%s requires --operation", map[bool]string{true: "--add-acl", false: "--remove-acl"}[o.addACL])
	}
	return ops, nil
}

func (c *cli) aclPermission() kmsg.ACLPermissionType {
	if c.o.acl.deny {
		return kmsg.ACLPermissionTypeDeny
	}
	return kmsg.ACLPermissionTypeAllow
}

// doAddACL creates one literal CLUSTER_MIRROR ACL per operation with
// CreateAcls; a refused one is reported on stderr (exit 1).
func (c *cli) doAddACL(ctx context.Context) error {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, op := range c.o.aclOps {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName = kmsg.ACLResourceType(admin.ResourceClusterMirror), c.o.mirror
		cr.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = c.o.acl.principal, c.o.acl.host, op, c.aclPermission()
		req.Creations = append(req.Creations, cr)
	}
	resp, err := req.RequestWith(ctx, c.kcl)
	if err != nil {
		return err
	}
	if len(resp.Results) != len(req.Creations) {
		return fmt.Errorf("CreateAcls answered %d results for %d ACLs", len(resp.Results), len(req.Creations))
	}
	for i, r := range resp.Results {
		what := c.aclText(c.o.aclOps[i])
		if r.ErrorCode != 0 {
			fmt.Fprintf(c.errOut, "Error: %s: %s\n", what, codeText(admin.Code(r.ErrorCode), deref(r.ErrorMessage)))
			c.partial = true
			continue
		}
		fmt.Fprintf(c.out, "Added %s\n", what)
	}
	return nil
}

// doRemoveACL deletes the literal CLUSTER_MIRROR ACLs of the principal, host,
// permission and each operation with DeleteAcls and prints what it removed.
func (c *cli) doRemoveACL(ctx context.Context) error {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, op := range c.o.aclOps {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName = kmsg.ACLResourceType(admin.ResourceClusterMirror), kmsg.StringPtr(c.o.mirror)
		f.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr(c.o.acl.principal), kmsg.StringPtr(c.o.acl.host), op, c.aclPermission()
		req.Filters = append(req.Filters, f)
	}
	resp, err := req.RequestWith(ctx, c.kcl)
	if err != nil {
		return err
	}
	if len(resp.Results) != len(req.Filters) {
		return fmt.Errorf("DeleteAcls answered %d results for %d filters", len(resp.Results), len(req.Filters))
	}
	for i, r := range resp.Results {
		what := c.aclText(c.o.aclOps[i])
		if r.ErrorCode != 0 {
			fmt.Fprintf(c.errOut, "Error: %s: %s\n", what, codeText(admin.Code(r.ErrorCode), deref(r.ErrorMessage)))
			c.partial = true
			continue
		}
		removed := 0
		for _, m := range r.MatchingACLs {
			if m.ErrorCode != 0 {
				fmt.Fprintf(c.errOut, "Error: %s: %s\n", what, codeText(admin.Code(m.ErrorCode), deref(m.ErrorMessage)))
				c.partial = true
				continue
			}
			removed++
		}
		if removed == 0 {
			fmt.Fprintf(c.out, "No such ACL: %s\n", what)
			continue
		}
		fmt.Fprintf(c.out, "Removed %s\n", what)
	}
	return nil
}

func (c *cli) aclText(op kmsg.ACLOperation) string {
	return fmt.Sprintf("ACL %s %s for %s on CLUSTER_MIRROR %s from host %s", c.aclPermission(), op, c.o.acl.principal, c.o.mirror, c.o.acl.host)
}
