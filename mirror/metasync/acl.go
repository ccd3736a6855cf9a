package metasync

import (
	"context"

	"github.com/kmirror/kmirror/mirror/dest"
)

// ACLSource is optionally implemented by a SourceAdmin that can list the source
// cluster's ACLs (KafkaSourceAdmin: DescribeAcls with a match-everything filter).
type ACLSource interface {
	// DescribeACLs returns every ACL binding of the source.
	DescribeACLs(ctx context.Context) ([]dest.ACL, error)
}

// syncACLs copies the source's ACLs selected by acls.include to the destination, as the
// complete set of this mirror's ACLs (removals propagate). Skipped when the source
// cannot list ACLs or the destination cannot keep them.
func (c *cycle) syncACLs(ctx context.Context) {
	src, ok := c.s.cfg.Source.(ACLSource)
	store, ok2 := c.s.cfg.Destination.(dest.ACLStore)
	if !ok || !ok2 {
		return
	}
	all, err := src.DescribeACLs(ctx)
	if err != nil {
		c.fail("acls", "", "", err) // keep the last synced set: never remove on a failed read
		return
	}
	var keep []dest.ACL
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
