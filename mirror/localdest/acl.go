package localdest

import (
	"path/filepath"
	"slices"
	"sync"

	"github.com/kmirror/kmirror/mirror/dest"
)

var _ dest.ACLStore = (*LocalDestination)(nil)

const (
	aclsFile      = "kmirror-acls.json"       // the ACLs the mirrors synced, per mirror
	localACLsFile = "kmirror-local-acls.json" // the ACLs created on this site (CreateAcls)
)

// aclStore is LocalDestination's ACLs: the synced ones per mirror, persisted to aclsFile,
// and the site's own (local) ones, persisted to localACLsFile, under the root of a file
// destination. The two sets are kept apart so a mirror's sync never touches a local ACL
// and a local delete never removes a synced one.
type aclStore struct {
	mu       sync.Mutex
	root     string
	byMirror map[string][]dest.ACL
	local    []dest.ACL // sorted, no duplicates
	gen      uint64     // bumped by every change of either set that took effect
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
	if err := readJSON(filepath.Join(root, localACLsFile), &s.local); err != nil {
		return nil, err
	}
	s.local = slices.Compact(dest.SortACLs(s.local))
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

// ACLs implements dest.ACLStore: the effective ACLs, the local ones and those of every
// mirror, sorted and without duplicates.
func (d *LocalDestination) ACLs() []dest.ACL {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[dest.ACL]bool{}
	var out []dest.ACL
	for _, a := range s.local {
		seen[a] = true
		out = append(out, a)
	}
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

// LocalACLs returns the ACLs created on this site (CreateLocalACLs), sorted. The
// mirrors' ACL sync never changes them.
func (d *LocalDestination) LocalACLs() []dest.ACL {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]dest.ACL(nil), s.local...)
}

// CreateLocalACLs adds acls to the site's own ACLs; one already there is not added
// twice (Kafka's CreateAcls is idempotent the same way). A file destination writes the
// new set atomically before it takes effect; on an error nothing changed. The caller
// validates the bindings.
func (d *LocalDestination) CreateLocalACLs(acls []dest.ACL) error {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	have := make(map[dest.ACL]bool, len(s.local))
	for _, a := range s.local {
		have[a] = true
	}
	next := append([]dest.ACL(nil), s.local...)
	for _, a := range acls {
		if !have[a] {
			have[a] = true
			next = append(next, a)
		}
	}
	if len(next) == len(s.local) {
		return nil
	}
	return s.setLocalLocked(dest.SortACLs(next))
}

// DeleteLocalACLs removes the site's own ACLs for which match is true and returns them,
// sorted. A file destination writes the new set atomically before it takes effect; on an
// error nothing was removed. The mirrors' synced ACLs are never removed here.
func (d *LocalDestination) DeleteLocalACLs(match func(dest.ACL) bool) ([]dest.ACL, error) {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	var kept, removed []dest.ACL
	for _, a := range s.local {
		if match(a) {
			removed = append(removed, a)
		} else {
			kept = append(kept, a)
		}
	}
	if len(removed) == 0 {
		return nil, nil
	}
	if err := s.setLocalLocked(kept); err != nil {
		return nil, err
	}
	return removed, nil
}

// SyncedACLs returns the ACLs the mirrors synced, by mirror name (each sorted).
func (d *LocalDestination) SyncedACLs() map[string][]dest.ACL {
	s := d.aclStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]dest.ACL, len(s.byMirror))
	for m, acls := range s.byMirror {
		out[m] = append([]dest.ACL(nil), acls...)
	}
	return out
}

// setLocalLocked makes next (sorted) the local set, durably first.
func (s *aclStore) setLocalLocked(next []dest.ACL) error {
	if next == nil {
		next = []dest.ACL{}
	}
	if s.root != "" {
		if err := writeJSON(s.root, localACLsFile, next); err != nil {
			return err
		}
	}
	s.local = next
	s.gen++
	return nil
}
