package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// waitPoll is how often --wait describes the partitions again.
const waitPoll = 100 * time.Millisecond

// lifecycleVerbs are how stop, pause and resume report a topic they were accepted for:
// ongoing ("Stopping mirroring") while the partitions are on their way, done ("Stopped
// mirroring") once --wait saw every partition there.
var lifecycleVerbs = map[string]struct{ ongoing, done string }{
	"stop":   {"Stopping mirroring", "Stopped mirroring"},
	"pause":  {"Pausing mirroring", "Paused mirroring"},
	"resume": {"Resuming mirroring", "Resumed mirroring"},
}

// lifecycle finishes stop, pause and resume: a stop or pause refused because the topic
// is already in the target state becomes a success with a note, the results are
// reported, and with --wait it returns once every partition of the topics that
// succeeded reached the target state.
func (c *cli) lifecycle(ctx context.Context, op string, results []topicResult, items []string) error {
	var target statemachine.State
	switch op {
	case "stop":
		target = statemachine.Stopped
		c.markAlready(ctx, results, statemachine.DesiredStopped, target, "stopped")
	case "pause":
		target = statemachine.Paused
		c.markAlready(ctx, results, statemachine.DesiredPaused, target, "paused")
	default:
		target = statemachine.Mirroring
	}
	verb := lifecycleVerbs[op]
	if !c.o.wait {
		return c.report(op, verb.ongoing, results, items)
	}
	var topics []string
	for _, r := range results {
		if r.ErrorCode == 0 {
			topics = append(topics, r.Topic)
		}
	}
	if err := c.waitStates(ctx, topics, target); err != nil {
		_ = c.report(op, verb.ongoing, results, items)
		return err
	}
	for i := range results {
		if results[i].ErrorCode == 0 {
			results[i].State = target.String()
		}
	}
	if err := c.report(op, verb.done, results, items); err != nil {
		return err
	}
	if c.o.output != "json" && len(topics) > 0 {
		fmt.Fprintf(c.out, "Every partition of %s is %s.\n", quoteList(topics), target)
	}
	return nil
}

// markAlready turns the INVALID_CLUSTER_MIRROR_STATES (or prototype ALREADY_PAUSED)
// refusal of a topic whose desired state already is desired into a success with a
// note: "is already <done>" when every partition is in state target, else "is already
// being <done>" with the partition still on its way. The desired states come from
// ListClusterMirrors; when it fails, the refusals stay.
func (c *cli) markAlready(ctx context.Context, results []topicResult, desired statemachine.Desired, target statemachine.State, done string) {
	refused := false
	for _, r := range results {
		refused = refused || isAlreadyCode(admin.Code(r.ErrorCode))
	}
	if !refused {
		return
	}
	req := admin.NewPtrListClusterMirrorsRequest()
	req.MirrorNameFilter = []string{c.o.mirror}
	req.DesiredMirrorStateFilter = []string{desired.String()}
	req.IncludeTopicNames = true
	resp, err := c.cl.ListClusterMirrors(ctx, req)
	if err != nil {
		return
	}
	var inState []string
	for _, m := range resp.Mirrors {
		if m.MirrorName == c.o.mirror {
			inState = append(inState, m.TopicNames...)
		}
	}
	for i, r := range results {
		if !isAlreadyCode(admin.Code(r.ErrorCode)) || !slices.Contains(inState, r.Topic) {
			continue
		}
		note := "is already " + done
		switch pending, err := c.pendingPartitions(ctx, []string{r.Topic}, target); {
		case err != nil:
			note = fmt.Sprintf("is already %s (desired state %s)", done, desired)
		case pending != "":
			note = fmt.Sprintf("is already being %s (%s)", done, pending)
		}
		results[i] = topicResult{Topic: r.Topic, Note: note}
	}
}

func isAlreadyCode(c admin.Code) bool {
	return c == admin.CodeInvalidClusterMirrorStates || c == admin.CodeMirrorTopicAlreadyPaused
}

// waitStates describes the mirror until every partition of topics is in state want. A
// FAILED partition ends the wait with an error unless want is STOPPED (a stop leads out
// of FAILED); so does a topic the mirror no longer has.
func (c *cli) waitStates(ctx context.Context, topics []string, want statemachine.State) error {
	if len(topics) == 0 {
		return nil
	}
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	last := "no describe answered yet"
	for {
		pending, err := c.pendingPartitions(ctx, topics, want)
		switch {
		case err != nil && ctx.Err() == nil:
			return err
		case err == nil && pending == "":
			return nil
		case err == nil:
			last = pending
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %v waiting for %s to be %s: %s: %w", c.o.timeout, quoteList(topics), want, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// pendingPartitions describes the topics once and returns "" when every partition is in
// state want, else the first partition that is not.
func (c *cli) pendingPartitions(ctx context.Context, topics []string, want statemachine.State) (string, error) {
	req := admin.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{c.o.mirror}
	req.IncludeMirrorStates = true
	req.TimeoutMs = c.timeoutMs()
	resp, err := c.cl.DescribeClusterMirrors(ctx, req)
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	for _, m := range resp.Mirrors {
		if err := admin.ErrorFromResponse(m.ErrorCode, m.ErrorMessage); err != nil {
			return "", err
		}
		for _, t := range m.Topics {
			if !slices.Contains(topics, t.TopicName) {
				continue
			}
			seen[t.TopicName] = true
			for _, p := range t.Partitions {
				st := statemachine.State(p.State)
				if p.ErrorCode != 0 || st == want {
					if p.ErrorCode != 0 {
						return fmt.Sprintf("topic %q partition %d: %s", t.TopicName, p.PartitionIndex,
							codeText(admin.Code(p.ErrorCode), deref(p.ErrorMessage))), nil
					}
					continue
				}
				if st == statemachine.Failed && want != statemachine.Stopped {
					return "", fmt.Errorf("topic %q partition %d is FAILED: %s", t.TopicName, p.PartitionIndex, deref(p.ErrorMessage))
				}
				return fmt.Sprintf("topic %q partition %d is %s", t.TopicName, p.PartitionIndex, st), nil
			}
		}
	}
	for _, t := range topics {
		if !seen[t] {
			return "", fmt.Errorf("topic %q is not a topic of mirror %q", t, c.o.mirror)
		}
	}
	return "", nil
}

// quoteList renders topics as "a", "b".
func quoteList(topics []string) string {
	q := make([]string, len(topics))
	for i, t := range topics {
		q[i] = fmt.Sprintf("%q", t)
	}
	sort.Strings(q)
	return strings.Join(q, ", ")
}
