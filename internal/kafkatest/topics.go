package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WaitTimeout bounds every wait of this package (leaders, topic creation).
const WaitTimeout = 60 * time.Second

// pollInterval is how often a wait re-reads metadata.
const pollInterval = 100 * time.Millisecond

// PartitionInfo is one partition as the cluster's metadata describes it.
type PartitionInfo struct {
	Partition   int32
	Leader      int32 // -1 when the partition has no leader
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	ErrorCode   int16
}

// TopicInfo is one topic as the cluster's metadata describes it. Partitions are indexed by
// partition number.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions []PartitionInfo
}

// NewClient returns a kgo client for brokers that is closed when the test ends.
func NewClient(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

var unsafeTopicChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// TopicName returns a topic name unique to this run, derived from the test's name.
func TopicName(t testing.TB) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeTopicChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 180 {
		name = name[:180]
	}
	return "kt-" + name + "-" + hex.EncodeToString(b[:])
}

// CreateTopic creates topic with the given partition count, replication factor and topic
// configs (for example "unclean.leader.election.enable": "true"), then waits until every
// partition has a leader and a full ISR. It returns the topic's metadata.
func CreateTopic(t testing.TB, cl *kgo.Client, topic string, partitions int32, replicationFactor int16, configs map[string]string) TopicInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	if err := createTopic(ctx, cl, topic, partitions, replicationFactor, configs); err != nil {
		t.Fatalf("%v", err)
	}
	return WaitForLeaders(t, cl, topic)
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32, rf int16, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(WaitTimeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		v := configs[k]
		c.Value = &v
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafkatest: create topic %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("kafkatest: create topic %s: %d topics in response", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		msg := ""
		if resp.Topics[0].ErrorMessage != nil {
			msg = ": " + *resp.Topics[0].ErrorMessage
		}
		return fmt.Errorf("kafkatest: create topic %s: %w%s", topic, err, msg)
	}
	return nil
}

// DescribeTopic reads topic's metadata from the cluster.
func DescribeTopic(ctx context.Context, cl *kgo.Client, topic string) (TopicInfo, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return TopicInfo{}, fmt.Errorf("kafkatest: metadata %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return TopicInfo{}, fmt.Errorf("kafkatest: metadata %s: %d topics in response", topic, len(resp.Topics))
	}
	mt := resp.Topics[0]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return TopicInfo{}, fmt.Errorf("kafkatest: metadata %s: %w", topic, err)
	}
	info := TopicInfo{Name: topic, ID: mt.TopicID, Partitions: make([]PartitionInfo, len(mt.Partitions))}
	for _, p := range mt.Partitions {
		if p.Partition < 0 || int(p.Partition) >= len(mt.Partitions) {
			return TopicInfo{}, fmt.Errorf("kafkatest: metadata %s: partition %d out of range", topic, p.Partition)
		}
		info.Partitions[p.Partition] = PartitionInfo{
			Partition:   p.Partition,
			Leader:      p.Leader,
			LeaderEpoch: p.LeaderEpoch,
			Replicas:    slices.Clone(p.Replicas),
			ISR:         slices.Clone(p.ISR),
			ErrorCode:   p.ErrorCode,
		}
	}
	return info, nil
}

// errNotYet marks a wait condition that does not hold yet.
var errNotYet = errors.New("kafkatest: condition not met")

// WaitTopic polls topic's metadata until cond holds and returns the metadata that satisfied
// it. It fails the test after WaitTimeout, showing the last metadata or error.
func WaitTopic(t testing.TB, cl *kgo.Client, topic string, what string, cond func(TopicInfo) bool) TopicInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last TopicInfo
	var lastErr error
	for {
		info, err := DescribeTopic(ctx, cl, topic)
		if err == nil {
			last = info
			if cond(info) {
				return info
			}
			lastErr = errNotYet
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kafkatest: topic %s: timed out after %v waiting for %s: last error %v, last metadata %+v",
				topic, WaitTimeout, what, lastErr, last)
			return TopicInfo{}
		case <-tick.C:
		}
	}
}

// WaitForLeaders waits until every partition of topic has a leader and an ISR equal to its
// replica set, and returns that metadata.
func WaitForLeaders(t testing.TB, cl *kgo.Client, topic string) TopicInfo {
	t.Helper()
	return WaitTopic(t, cl, topic, "leaders and full ISRs", func(info TopicInfo) bool {
		if len(info.Partitions) == 0 {
			return false
		}
		for _, p := range info.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
				return false
			}
		}
		return true
	})
}

// WaitForNewLeader waits until partition of topic has a leader other than oldLeader with a
// leader epoch above oldEpoch, and returns that partition's metadata.
func WaitForNewLeader(t testing.TB, cl *kgo.Client, topic string, partition, oldLeader, oldEpoch int32) PartitionInfo {
	t.Helper()
	info := WaitTopic(t, cl, topic, fmt.Sprintf("partition %d to leave leader %d", partition, oldLeader), func(info TopicInfo) bool {
		if int(partition) >= len(info.Partitions) {
			return false
		}
		p := info.Partitions[partition]
		return p.Leader >= 0 && p.Leader != oldLeader && p.LeaderEpoch > oldEpoch
	})
	return info.Partitions[partition]
}

// String formats the partition like kafka-topics --describe does.
func (p PartitionInfo) String() string {
	return fmt.Sprintf("Partition: %d Leader: %d LeaderEpoch: %d Replicas: %s Isr: %s",
		p.Partition, p.Leader, p.LeaderEpoch, joinIDs(p.Replicas), joinIDs(p.ISR))
}

func joinIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

// Election types of ElectLeaders.
const (
	// ElectPreferred moves leadership to the first replica when it is in the ISR.
	ElectPreferred int8 = 0
	// ElectUnclean elects any live replica when the ISR has none, losing data.
	ElectUnclean int8 = 1
)

// ElectLeaders runs a leader election of the given type for partition of topic and returns
// the partition's metadata once the election's outcome shows. A preferred election that is
// not needed (the preferred replica already leads) is not an error.
func ElectLeaders(t testing.TB, cl *kgo.Client, topic string, partition int32, electionType int8) PartitionInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = electionType
	req.TimeoutMillis = int32(WaitTimeout / time.Millisecond)
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kafkatest: elect leaders %s-%d: %v", topic, partition, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("kafkatest: elect leaders %s-%d: %v", topic, partition, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			err := kerr.ErrorForCode(rp.ErrorCode)
			if err != nil && !errors.Is(err, kerr.ElectionNotNeeded) {
				t.Fatalf("kafkatest: elect leaders %s-%d: %v", topic, partition, err)
			}
		}
	}
	info := WaitTopic(t, cl, topic, "an elected leader", func(info TopicInfo) bool {
		if int(partition) >= len(info.Partitions) {
			return false
		}
		p := info.Partitions[partition]
		if p.Leader < 0 {
			return false
		}
		return electionType != ElectPreferred || len(p.Replicas) == 0 || p.Leader == p.Replicas[0]
	})
	return info.Partitions[partition]
}
