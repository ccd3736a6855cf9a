package localdest

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror/dest"
)

var _ dest.ShareGroupOffsets = (*LocalDestination)(nil)

const shareGroupsFile = "kmirror-share-groups.json"

// shareStore is LocalDestination's share-group start offsets: group -> "topic/partition"
// -> start offset, persisted to shareGroupsFile under the root of a file destination.
type shareStore struct {
	mu     sync.Mutex
	root   string // "" for a memory destination
	groups map[string]map[string]int64
}

func openShareStore(root string) (*shareStore, error) {
	s := &shareStore{root: root, groups: map[string]map[string]int64{}}
	if root == "" {
		return s, nil
	}
	if err := readJSON(filepath.Join(root, shareGroupsFile), &s.groups); err != nil {
		return nil, err
	}
	if s.groups == nil {
		s.groups = map[string]map[string]int64{}
	}
	return s, nil
}

// ShareStartOffsets implements dest.ShareGroupOffsets.
func (d *LocalDestination) ShareStartOffsets(group string) map[dest.TopicPartition]int64 {
	s := d.shares
	s.mu.Lock()
	defer s.mu.Unlock()
	return offsetsOf(s.groups, group)
}

// ShareGroups lists the share groups with start offsets, sorted.
func (d *LocalDestination) ShareGroups() []string {
	s := d.shares
	s.mu.Lock()
	defer s.mu.Unlock()
	return groupNames(s.groups)
}

// HasActiveShareMembers implements dest.ShareGroupOffsets. LocalDestination serves no
// share consumers (the data plane has no ShareGroupHeartbeat), so a share group is
// active only when marked with SetGroupActive.
func (d *LocalDestination) HasActiveShareMembers(group string) bool {
	return d.HasActiveMembers(group)
}

// SetShareStartOffsets implements dest.ShareGroupOffsets. A file destination writes the
// new state atomically before it takes effect, so a failed write changes nothing. A
// negative offset or an empty group id is refused with INVALID_REQUEST.
func (d *LocalDestination) SetShareStartOffsets(group string, offsets map[dest.TopicPartition]int64) error {
	if group == "" {
		return admin.Errorf(admin.CodeInvalidRequest, "share group offsets: empty group id")
	}
	for tp, off := range offsets {
		if off < 0 {
			return admin.Errorf(admin.CodeInvalidRequest, "share group %q: start offset %d of %s-%d is negative", group, off, tp.Topic, tp.Partition)
		}
	}
	s := d.shares
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]map[string]int64, len(s.groups)+1)
	for k, v := range s.groups {
		next[k] = v
	}
	g := make(map[string]int64, len(s.groups[group])+len(offsets))
	for k, v := range s.groups[group] {
		g[k] = v
	}
	for tp, off := range offsets {
		g[roKey(tp.Topic, tp.Partition)] = off
	}
	next[group] = g
	if s.root != "" {
		if err := writeJSON(s.root, shareGroupsFile, next); err != nil {
			return fmt.Errorf("share group %q: %w", group, err)
		}
	}
	s.groups = next
	return nil
}
