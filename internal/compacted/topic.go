package compacted

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
)

// cleanupPolicy is the topic config a state log depends on.
const cleanupPolicy = "cleanup.policy"

// ensureTopic creates the topic when it is missing and validates it otherwise.
func (l *Log) ensureTopic(ctx context.Context) error {
	adm, err := sarama.NewClusterAdminFromClient(l.client)
	if err != nil {
		return fmt.Errorf("compacted: admin client: %w", err)
	}
	// adm shares l.client: closing adm would close it, so adm is left to the client.
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		meta, err := l.describeTopic(adm)
		if err != nil {
			return err
		}
		if meta != nil {
			return l.checkTopic(adm, meta)
		}
		err = adm.CreateTopic(l.cfg.Topic, l.topicDetail(), false)
		if err == nil {
			return l.waitLeaders(ctx)
		}
		if !errors.Is(err, sarama.ErrTopicAlreadyExists) || attempt > 0 {
			return fmt.Errorf("compacted: create topic %q: %w", l.cfg.Topic, err)
		}
		// Created concurrently by another process: validate what it created.
	}
}

func (l *Log) topicDetail() *sarama.TopicDetail {
	entries := map[string]*string{cleanupPolicy: ptr("compact")}
	if l.cfg.MinInSyncReplicas > 0 {
		entries["min.insync.replicas"] = ptr(strconv.Itoa(int(l.cfg.MinInSyncReplicas)))
	}
	return &sarama.TopicDetail{NumPartitions: l.cfg.Partitions, ReplicationFactor: l.cfg.ReplicationFactor,
		ConfigEntries: entries}
}

func ptr(s string) *string { return &s }

// describeTopic returns the topic's metadata, or nil when the topic does not exist.
func (l *Log) describeTopic(adm sarama.ClusterAdmin) (*sarama.TopicMetadata, error) {
	metas, err := adm.DescribeTopics([]string{l.cfg.Topic})
	if err != nil {
		return nil, fmt.Errorf("compacted: describe topic %q: %w", l.cfg.Topic, err)
	}
	if len(metas) != 1 {
		return nil, fmt.Errorf("compacted: describe topic %q: %d results", l.cfg.Topic, len(metas))
	}
	switch m := metas[0]; {
	case errors.Is(m.Err, sarama.ErrUnknownTopicOrPartition):
		return nil, nil
	case !errors.Is(m.Err, sarama.ErrNoError):
		return nil, fmt.Errorf("compacted: describe topic %q: %w", l.cfg.Topic, m.Err)
	default:
		return m, nil
	}
}

// checkTopic refuses an existing topic that cannot hold the log.
func (l *Log) checkTopic(adm sarama.ClusterAdmin, m *sarama.TopicMetadata) error {
	if n := int32(len(m.Partitions)); n != l.cfg.Partitions {
		return &PartitionCountError{Topic: l.cfg.Topic, Partitions: n, Want: l.cfg.Partitions}
	}
	if rf := l.cfg.ReplicationFactor; rf > 0 {
		for _, p := range m.Partitions {
			if len(p.Replicas) < int(rf) {
				return &ReplicationError{Topic: l.cfg.Topic, Partition: p.ID, Replicas: len(p.Replicas), Want: rf}
			}
		}
	}
	policy, err := l.describePolicy(adm)
	if err != nil {
		return err
	}
	if !CompactOnly(policy) {
		return &CleanupPolicyError{Topic: l.cfg.Topic, Policy: policy}
	}
	return nil
}

// describePolicy returns the topic's cleanup.policy ("delete", Kafka's default, when the
// broker names none).
func (l *Log) describePolicy(adm sarama.ClusterAdmin) (string, error) {
	results, err := adm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: l.cfg.Topic,
		ConfigNames: []string{cleanupPolicy}}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return "", fmt.Errorf("compacted: describe configs of %q: %w", l.cfg.Topic, err)
	}
	policy := "delete"
	for _, r := range results {
		if r.ErrorCode != sarama.ErrNoError {
			return "", fmt.Errorf("compacted: describe configs of %q: %w (%s)", l.cfg.Topic, r.ErrorCode, r.ErrorMsg)
		}
		for _, e := range r.Configs {
			if e.Name == cleanupPolicy {
				policy = e.Value
			}
		}
	}
	return policy, nil
}

// CompactOnly reports whether a cleanup.policy value keeps the latest value of every key
// for ever: it names compact and nothing else ("compact", " compact ", "[compact]").
// "compact,delete", "delete" and the empty policy do not.
func CompactOnly(policy string) bool {
	items := strings.FieldsFunc(policy, func(r rune) bool { return r == ',' || r == ' ' || r == '[' || r == ']' })
	for _, it := range items {
		if !strings.EqualFold(it, "compact") {
			return false
		}
	}
	return len(items) > 0
}

// waitLeaders waits until every partition of a just-created topic has a leader, within
// the retry budget.
func (l *Log) waitLeaders(ctx context.Context) error {
	r := newRetrier(l.cfg.RetryTimeout)
	for {
		err := l.client.RefreshMetadata(l.cfg.Topic)
		for p := int32(0); p < l.cfg.Partitions && err == nil; p++ {
			_, err = l.client.Leader(l.cfg.Topic, p)
		}
		if err == nil {
			return nil
		}
		if werr := r.wait(ctx, err); werr != nil {
			return fmt.Errorf("compacted: leaders of the created topic %q: %w", l.cfg.Topic, werr)
		}
	}
}
