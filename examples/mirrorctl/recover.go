package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// doRecover sends RecoverMirrorTopics (spec §14.10): the FAILED partitions of the
// topics restart with their retry attempts reset. Each topic's line says how many
// partitions were FAILED (from a describe just before), or that none was.
func (c *cli) doRecover(ctx context.Context) error {
	items := splitList(c.o.topics)
	names, err := c.resolveTopics(ctx, items)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no topic of mirror %q matches %s", c.o.mirror, strings.Join(items, ","))
	}
	failed, countErr := c.failedPartitions(ctx, names)
	req := admin.NewPtrRecoverMirrorTopicsRequest()
	req.MirrorName = c.o.mirror
	req.TimeoutMs = c.timeoutMs()
	for _, n := range names {
		req.Topics = append(req.Topics, admin.RecoverMirrorTopicsRequestTopic{TopicName: n})
	}
	req.ValidateOnly, req.AllowTruncation = c.o.plan.dryRun, c.o.plan.allowTruncation
	if err := c.needPlanVersion(ctx, admin.KeyRecoverMirrorTopics); err != nil {
		return err
	}
	resp, err := c.cl.RecoverMirrorTopics(ctx, req)
	if err != nil {
		return err
	}
	var results []topicResult
	for _, t := range resp.Topics {
		r := newTopicResult(t.TopicName, t.ErrorCode, t.ErrorMessage)
		r.Plan = planRows(t.Partitions)
		if r.ErrorCode == 0 && countErr == nil && !c.o.plan.dryRun {
			switch n := failed[t.TopicName]; n {
			case 0:
				r.Note = "had no FAILED partition: nothing to recover"
			case 1:
				r.Note = "is recovering: 1 FAILED partition restarted"
			default:
				r.Note = fmt.Sprintf("is recovering: %d FAILED partitions restarted", n)
			}
		}
		results = append(results, r)
	}
	return c.report("recover", "Recovering mirroring", results, items)
}

// failedPartitions describes the mirror once and counts the FAILED partitions of each
// of topics.
func (c *cli) failedPartitions(ctx context.Context, topics []string) (map[string]int, error) {
	req := admin.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{c.o.mirror}
	req.IncludeMirrorStates = true
	req.TimeoutMs = c.timeoutMs()
	resp, err := c.cl.DescribeClusterMirrors(ctx, req)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, m := range resp.Mirrors {
		if err := admin.ErrorFromResponse(m.ErrorCode, m.ErrorMessage); err != nil {
			return nil, err
		}
		for _, t := range m.Topics {
			if !slices.Contains(topics, t.TopicName) {
				continue
			}
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && statemachine.State(p.State) == statemachine.Failed {
					out[t.TopicName]++
				}
			}
		}
	}
	return out, nil
}
