package mirror

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
)

// ACL is one access-control binding (Kafka's AclBinding), with Kafka's upper-case names:
// ResourceType TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN or USER;
// PatternType LITERAL or PREFIXED; Operation READ, WRITE, ...; PermissionType ALLOW or
// DENY; Principal "User:alice"; Host "*" or an address.
type ACL struct {
	ResourceType   string `json:"resource_type"`
	ResourceName   string `json:"resource_name"`
	PatternType    string `json:"pattern_type"`
	Principal      string `json:"principal"`
	Host           string `json:"host"`
	Operation      string `json:"operation"`
	PermissionType string `json:"permission_type"`
}

// String renders the binding in one line.
func (a ACL) String() string {
	return fmt.Sprintf("%s:%s:%s %s %s %s from %s", a.ResourceType, a.PatternType, a.ResourceName,
		a.Principal, a.PermissionType, a.Operation, a.Host)
}

// Matches reports whether rule selects a: every field of the rule is "*" or equal, and
// its resource-name pattern matches the whole resource name.
func (r ACLRule) Matches(a ACL) bool {
	eq := func(rule, v string) bool { return rule == "*" || rule == v }
	return eq(r.ResourceType, a.ResourceType) && eq(r.Operation, a.Operation) &&
		eq(r.PermissionType, a.PermissionType) && eq(r.Principal, a.Principal) && r.MatchesResourceName(a.ResourceName)
}

// ACLSource is optionally implemented by a SourceAdmin that can list the source
// cluster's ACLs (KafkaSourceAdmin: DescribeAcls with a match-everything filter).
type ACLSource interface {
	// DescribeACLs returns every ACL binding of the source.
	DescribeACLs(ctx context.Context) ([]ACL, error)
}

// ACLStore is optionally implemented by a Destination that keeps ACLs: the metadata
// sync replaces, per mirror, the set of ACLs it copied from the source (acls.include),
// so an ACL removed on the source is removed here too, and ACLs created on the
// destination itself or by another mirror are never touched. Enforcing them is the
// host's (or the data plane's) job.
type ACLStore interface {
	// ReplaceMirrorACLs makes acls the set of ACLs synced by mirror, durably.
	ReplaceMirrorACLs(mirror string, acls []ACL) error
	// MirrorACLs returns the ACLs synced by mirror, sorted.
	MirrorACLs(mirror string) []ACL
	// ACLs returns every ACL the destination holds (of every mirror), sorted and
	// without duplicates.
	ACLs() []ACL
}

var _ ACLStore = (*LocalDestination)(nil)

const aclsFile = "kmirror-acls.json"

// aclStore is LocalDestination's ACLs: per mirror, persisted to aclsFile under the root
// of a file destination.
type aclStore struct {
	mu       sync.Mutex
	root     string
	byMirror map[string][]ACL
}

func openACLStore(root string) (*aclStore, error) {
	s := &aclStore{root: root, byMirror: map[string][]ACL{}}
	if root == "" {
		return s, nil
	}
	if err := readJSON(filepath.Join(root, aclsFile), &s.byMirror); err != nil {
		return nil, err
	}
	if s.byMirror == nil {
		s.byMirror = map[string][]ACL{}
	}
	return s, nil
}

func sortACLs(acls []ACL) []ACL {
	out := append([]ACL(nil), acls...)
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func (d *LocalDestination) aclStore() *aclStore {
	d.aclsOnce.Do(func() {
		if d.acls == nil {
			d.acls, _ = openACLStore("") // a memory destination; a file one opened its store
		}
	})
	return d.acls
}

// ReplaceMirrorACLs implements ACLStore; a file destination writes the new set
// atomically before it takes effect.
func (d *LocalDestination) ReplaceMirrorACLs(mirror string, acls []ACL) error {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string][]ACL, len(s.byMirror)+1)
	for k, v := range s.byMirror {
		next[k] = v
	}
	if len(acls) == 0 {
		delete(next, mirror)
	} else {
		next[mirror] = sortACLs(acls)
	}
	if s.root != "" {
		if err := writeJSON(s.root, aclsFile, next); err != nil {
			return err
		}
	}
	s.byMirror = next
	return nil
}

// MirrorACLs implements ACLStore.
func (d *LocalDestination) MirrorACLs(mirror string) []ACL {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ACL(nil), s.byMirror[mirror]...)
}

// ACLs implements ACLStore.
func (d *LocalDestination) ACLs() []ACL {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[ACL]bool{}
	var out []ACL
	for _, acls := range s.byMirror {
		for _, a := range acls {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return sortACLs(out)
}

// syncACLs copies the source's ACLs selected by acls.include to the destination, as the
// complete set of this mirror's ACLs (removals propagate). Skipped when the source
// cannot list ACLs or the destination cannot keep them.
func (c *cycle) syncACLs(ctx context.Context) {
	src, ok := c.s.cfg.Source.(ACLSource)
	store, ok2 := c.s.cfg.Destination.(ACLStore)
	if !ok || !ok2 {
		return
	}
	all, err := src.DescribeACLs(ctx)
	if err != nil {
		c.fail("acls", "", "", err) // keep the last synced set: never remove on a failed read
		return
	}
	var keep []ACL
	for _, a := range all {
		for _, r := range c.cfg.ACLsInclude {
			if r.Matches(a) {
				keep = append(keep, a)
				break
			}
		}
	}
	before := len(store.MirrorACLs(c.s.cfg.Mirror))
	if err := store.ReplaceMirrorACLs(c.s.cfg.Mirror, keep); err != nil {
		c.fail("acls", "", "", err)
		return
	}
	c.stats.ACLsSynced = len(keep)
	if before != len(keep) {
		c.log.Info("mirror ACLs synced", "acls", len(keep), "before", before)
	}
}
