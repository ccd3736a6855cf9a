package metasync

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/mirror/dest"
)

// ACLSource is optionally implemented by a SourceAdmin that can list the source
// cluster's ACLs (KafkaSourceAdmin: DescribeAcls with a match-everything filter).
type ACLSource interface {
	// DescribeACLs returns every ACL binding of the source.
	DescribeACLs(ctx context.Context) ([]dest.ACL, error)
}

// Conditions of the sync that repeat from cycle to cycle: each is logged when it starts
// and when it ends, with the number of cycles it lasted, never on every cycle, and
// reported to SyncConfig.Observer.
const (
	// ConditionACLsSecurityDisabled: the source has no authorizer (DescribeAcls answers
	// SECURITY_DISABLED); the ACL sync is skipped and the ACLs synced before are kept.
	ConditionACLsSecurityDisabled = "acls-security-disabled"
	// ConditionSyncErrors: the cycles end with failures (SyncStats.Errors); each
	// failure is logged when it starts and when it is resolved.
	ConditionSyncErrors = "sync-errors"
)

// DefaultConditionRecheck is how often a source is asked again while a condition holds
// (SyncConfig.ConditionRecheck).
const DefaultConditionRecheck = 10 * time.Minute

// ConditionObserver is told about the repeating conditions of a mirror's sync (a
// metrics adapter implements it: a gauge of active conditions, a counter of cycles).
type ConditionObserver interface {
	// SyncCondition reports condition of mirror at its start, at every cycle it holds
	// (cycles counts them, from 1) and at its end (active false, cycles the total).
	SyncCondition(mirror, condition string, active bool, cycles int64)
}

// condition is the state of one repeating condition of a Syncer (guarded by its mu).
type condition struct {
	active    bool
	since     time.Time
	cycles    int64
	lastProbe time.Time
}

// syncACLs copies the source's ACLs selected by acls.include to the destination, as the
// complete set of this mirror's ACLs (removals propagate). Skipped when the source
// cannot list ACLs or the destination cannot keep them. A source without an authorizer
// (SECURITY_DISABLED) is warned about once; it is asked again only every
// SyncConfig.ConditionRecheck (or by a new Syncer, when the mirror's source changes),
// and the end of the condition is logged with the number of cycles skipped.
func (c *cycle) syncACLs(ctx context.Context) {
	src, ok := c.s.cfg.Source.(ACLSource)
	store, ok2 := c.s.cfg.Destination.(dest.ACLStore)
	if !ok || !ok2 {
		return
	}
	cond, now := &c.s.aclsOff, c.s.cfg.Clock()
	if cond.active && now.Sub(cond.lastProbe) < c.s.cfg.ConditionRecheck {
		c.holdCondition(cond, ConditionACLsSecurityDisabled)
		return
	}
	all, err := src.DescribeACLs(ctx)
	if errors.Is(err, kerr.SecurityDisabled) {
		if !cond.active {
			*cond = condition{active: true, since: now}
			c.log.Warn("mirror ACL sync skipped: the source has no authorizer (SECURITY_DISABLED); the ACLs synced before are kept, the source is asked again every "+c.s.cfg.ConditionRecheck.String(),
				"condition", ConditionACLsSecurityDisabled)
		}
		cond.lastProbe = now
		c.holdCondition(cond, ConditionACLsSecurityDisabled)
		return
	}
	if cond.active {
		c.log.Info("mirror ACL sync resumed: the source answers DescribeAcls", "condition", ConditionACLsSecurityDisabled,
			"skipped_cycles", cond.cycles, "since", cond.since)
		cond.active = false
		c.observe(ConditionACLsSecurityDisabled, false, cond.cycles)
	}
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

// holdCondition counts one more cycle of an active condition.
func (c *cycle) holdCondition(cond *condition, name string) {
	cond.cycles++
	c.stats.Conditions = append(c.stats.Conditions, name)
	c.observe(name, true, cond.cycles)
}

func (c *cycle) observe(name string, active bool, cycles int64) {
	if o := c.s.cfg.Observer; o != nil {
		o.SyncCondition(c.s.cfg.Mirror, name, active, cycles)
	}
}
