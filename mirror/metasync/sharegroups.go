package metasync

import (
	"context"
	"errors"

	"github.com/kmirror/kmirror/mirror/dest"
)

// syncShareGroups copies the share-partition start offsets of the source's inactive
// share groups that groups.include/exclude select, for partitions of healthy MIRRORING
// topics (and actually MIRRORING when SyncConfig.Mirroring says so), into a Destination that implements dest.ShareGroupOffsets: the offset is
// clamped to the destination log like a consumer-group offset (ClampGroupOffset: never
// beyond the mirrored data, never before the log start), never moves a destination
// offset backwards, and a group with active share members on the destination is
// skipped. A source without share groups (before Kafka 4.0) is skipped quietly.
func (c *cycle) syncShareGroups(ctx context.Context) {
	src, ok := c.s.cfg.Source.(ShareGroupSource)
	d, ok2 := c.s.cfg.Destination.(dest.ShareGroupOffsets)
	if !ok || !ok2 || len(c.healthy) == 0 {
		return
	}
	groups, err := src.InactiveShareGroups(ctx)
	if errors.Is(err, ErrShareGroupsUnsupported) {
		c.log.Debug("share-group offset sync skipped", "err", err)
		return
	}
	if err != nil {
		c.fail("share-group", "", "*", err)
		return
	}
	for _, group := range groups {
		if ctx.Err() != nil {
			return
		}
		if !c.cfg.IncludesGroup(group) {
			continue
		}
		if d.HasActiveShareMembers(group) {
			c.stats.ShareGroupsSkipped++
			c.log.Info("share-group offset sync skipped: the group has active members on the destination", "group", group)
			continue
		}
		c.syncShareGroup(ctx, src, d, group)
	}
}

// syncShareGroup syncs one share group.
func (c *cycle) syncShareGroup(ctx context.Context, src ShareGroupSource, d dest.ShareGroupOffsets, group string) {
	starts, err := src.ShareStartOffsets(ctx, group)
	if err != nil {
		c.fail("share-group", "", group, err)
		return
	}
	have := d.ShareStartOffsets(group)
	set := map[dest.TopicPartition]int64{}
	for tp, start := range starts {
		if !c.healthy[tp.Topic] || (c.s.cfg.Mirroring != nil && !c.s.cfg.Mirroring(tp.Topic, tp.Partition)) {
			continue
		}
		l, err := c.s.cfg.Destination.Log(tp.Topic, tp.Partition)
		if err != nil {
			continue // partition not created yet on the destination
		}
		synced := ClampGroupOffset(start, l.LogStartOffset(), l.LogEndOffset())
		if cur, ok := have[tp]; ok && cur >= synced {
			continue // never backwards, and nothing to do when equal
		}
		if synced != start {
			c.log.Debug("share-group start offset clamped to the destination log", "group", group,
				"topic", tp.Topic, "partition", tp.Partition, "source", start, "synced", synced)
		}
		set[tp] = synced
	}
	if len(set) == 0 {
		return
	}
	if err := d.SetShareStartOffsets(group, set); err != nil {
		c.fail("share-group", "", group, err)
		return
	}
	c.stats.ShareGroupsSynced++
	c.stats.ShareOffsetsSynced += len(set)
	c.log.Debug("share-group start offsets synced", "group", group, "partitions", len(set))
}

// shareGroupNames is the set of the source's share groups, which the consumer-group
// sync leaves out (Kafka lists them among all groups, and OffsetFetch does not know
// them). Empty when the source has no share groups or cannot list them (then the
// consumer-group sync reports their OffsetFetch failures as usual).
func (c *cycle) shareGroupNames(ctx context.Context) map[string]bool {
	src, ok := c.s.cfg.Source.(ShareGroupSource)
	if !ok {
		return nil
	}
	names, err := src.ShareGroupNames(ctx)
	if err != nil {
		if !errors.Is(err, ErrShareGroupsUnsupported) {
			c.log.Warn("cannot list the source's share groups", "err", err)
		}
		return nil
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}
