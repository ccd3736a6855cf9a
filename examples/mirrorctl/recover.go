package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/admin"
)

// doRecover sends RecoverMirrorTopics (spec §14.10): the FAILED partitions of the
// topics restart with their retry attempts reset.
func (c *cli) doRecover(ctx context.Context) error {
	items := splitList(c.o.topics)
	names, err := c.resolveTopics(ctx, items)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no topic of mirror %q matches %s", c.o.mirror, strings.Join(items, ","))
	}
	req := admin.NewPtrRecoverMirrorTopicsRequest()
	req.MirrorName = c.o.mirror
	req.TimeoutMs = c.timeoutMs()
	for _, n := range names {
		req.Topics = append(req.Topics, admin.RecoverMirrorTopicsRequestTopic{TopicName: n})
	}
	req.ValidateOnly = c.o.plan.dryRun
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
		results = append(results, r)
	}
	return c.report("recover", "Recovered mirroring", results, items)
}
