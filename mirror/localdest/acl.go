package localdest

import (
	"path/filepath"
	"sync"

	"github.com/kmirror/kmirror/mirror/dest"
)

var _ dest.ACLStore = (*LocalDestination)(nil)

const aclsFile = "kmirror-acls.json"

// aclStore is LocalDestination's ACLs: per mirror, persisted to aclsFile under the root
// of a file destination.
type aclStore struct {
	mu       sync.Mutex
	root     string
	byMirror map[string][]dest.ACL
	gen      uint64 // bumped by every ReplaceMirrorACLs that took effect
}

func openACLStore(root string) (*aclStore, error) {
	s := &aclStore{root: root, byMirror: map[string][]dest.ACL{}}
	if root == "" {
		return s, nil
	}
	if err := readJSON(filepath.Join(root, aclsFile), &s.byMirror); err != nil {
		return nil, err
	}
	if s.byMirror == nil {
		s.byMirror = map[string][]dest.ACL{}
	}
	return s, nil
}

func (d *LocalDestination) aclStore() *aclStore {
	d.aclsOnce.Do(func() {
		if d.acls == nil {
			d.acls, _ = openACLStore("") // a memory destination; a file one opened its store
		}
	})
	return d.acls
}

// ReplaceMirrorACLs implements dest.ACLStore; a file destination writes the new set
// atomically before it takes effect.
func (d *LocalDestination) ReplaceMirrorACLs(mirror string, acls []dest.ACL) error {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string][]dest.ACL, len(s.byMirror)+1)
	for k, v := range s.byMirror {
		next[k] = v
	}
	if len(acls) == 0 {
		delete(next, mirror)
	} else {
		next[mirror] = dest.SortACLs(acls)
	}
	if s.root != "" {
		if err := writeJSON(s.root, aclsFile, next); err != nil {
			return err
		}
	}
	s.byMirror = next
	s.gen++
	return nil
}

// ACLGeneration returns a number that changes whenever the set ACLs returns may have
// changed, so a reader (the data plane's authorizer) re-reads the ACLs only then.
func (d *LocalDestination) ACLGeneration() uint64 {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// MirrorACLs implements dest.ACLStore.
func (d *LocalDestination) MirrorACLs(mirror string) []dest.ACL {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]dest.ACL(nil), s.byMirror[mirror]...)
}

// ACLs implements dest.ACLStore.
func (d *LocalDestination) ACLs() []dest.ACL {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[dest.ACL]bool{}
	var out []dest.ACL
	for _, acls := range s.byMirror {
		for _, a := range acls {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return dest.SortACLs(out)
}
