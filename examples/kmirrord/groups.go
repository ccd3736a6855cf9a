package main

import (
	"sync/atomic"

	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/dataplane"
)

// groupGuard is the mirror's mirror.GroupGuard: the data plane's group
// membership, bound once the data plane is built (the Mirror is opened
// first). Until then no client is served, so no group has members.
type groupGuard struct {
	dp atomic.Pointer[dataplane.DataPlane]
}

var _ mirror.GroupGuard = (*groupGuard)(nil)

// GroupActive implements mirror.GroupGuard.
func (g *groupGuard) GroupActive(group string) bool {
	if dp := g.dp.Load(); dp != nil {
		return dp.GroupActive(group)
	}
	return false
}

// CommitIfInactive implements mirror.GroupGuard.
func (g *groupGuard) CommitIfInactive(group string, commit func() error) (bool, error) {
	if dp := g.dp.Load(); dp != nil {
		return dp.CommitIfInactive(group, commit)
	}
	return true, commit()
}
