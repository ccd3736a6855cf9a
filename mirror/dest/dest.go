// Package dest holds the contract between kmirror and the host's destination cluster:
// the Destination interface, its optional capabilities (ReplicaWaiter, GroupOffsets,
// ClientAdmin, ACLStore; ShareGroupOffsets, ReplicaPlacement and ProducerIDAllocator in
// share.go, replication.go and producerids.go) and the types they exchange. It imports no other kmirror package but
// fetcher, admin and records, so a Destination implementation
// (mirror/localdest, or the host's own) and the mirror facade can both depend on it;
// package mirror re-exports every name.
package dest

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// TopicSpec describes a destination topic: a mirror topic carries its source's topic id
// and partition count, so offsets and ids are identical on both sides.
type TopicSpec struct {
	Name       string
	TopicID    records.UUID
	Partitions int32
	Configs    map[string]string
}

// TopicPartition names one partition. It is fetcher.TopicPartition, so that one type
// names a partition from the fetch loop to the destination.
type TopicPartition = fetcher.TopicPartition

// Destination is what the host owns on the destination side: topics, their partition
// logs, the read-only flag of mirror partitions and committed consumer-group offsets.
// kmirror never writes a destination partition except through the Log the Destination
// returns. Implementations must be safe for concurrent use.
type Destination interface {
	// ClusterID is the destination cluster's id (used to find, on the other cluster, the
	// mirror that mirrors back from this one during failback).
	ClusterID() string
	// CreateTopic creates a topic. Creating an existing topic with the same id returns
	// nil and changes nothing; a name taken with another id, or an id used by another
	// name, returns an *admin.Error with TOPIC_ALREADY_EXISTS.
	CreateTopic(ctx context.Context, spec TopicSpec) error
	// CreatePartitions grows topic to count partitions; shrinking is an error.
	CreatePartitions(ctx context.Context, topic string, count int32) error
	// AlterTopicConfigs replaces the given topic configs (others are left alone).
	AlterTopicConfigs(ctx context.Context, topic string, configs map[string]string) error
	// Topic describes one topic.
	Topic(name string) (TopicSpec, bool)
	// Topics lists every topic, sorted by name.
	Topics() []TopicSpec
	// Log returns the log of one partition. The Destination owns it: callers never
	// Close it, and the same Log is returned on every call. Its read-only flag
	// (fetcher.Log.SetReadOnly) must always agree with ReadOnly, so that a client write
	// through any handle to it is refused while the partition is read-only.
	Log(topic string, partition int32) (fetcher.Log, error)
	// Produce is the client write path (what a broker's Produce handler or a service
	// calls): one v2 data batch appended as leader, its base offset returned. A
	// read-only partition refuses it with an error errors.Is matches to
	// admin.CodeReadOnlyTopic.Err(); ProduceToLog implements the checks.
	Produce(ctx context.Context, topic string, partition int32, batch []byte) (int64, error)
	// SetReadOnly sets whether producers may write the partition (mirror partitions are
	// read-only in every state but STOPPED), durably, and on its Log when open.
	SetReadOnly(topic string, partition int32, readOnly bool) error
	// ReadOnly reports the read-only flag of a partition.
	ReadOnly(topic string, partition int32) bool
	// Close releases every log.
	Close() error
}

// ReplicaWaiter is optionally implemented by a Destination whose partitions have
// follower replicas. PREPARING and ULE_LOG_TRUNCATION call it after truncating the
// leader's log and before the fetcher starts, so no replica keeps a stale tail while new
// data arrives (spec §6.3 step 6, §7.4). A Destination without it (localdest.LocalDestination: one
// replica) counts as converged at once.
type ReplicaWaiter interface {
	// WaitReplicas returns once the replicas of the partition have caught up with the
	// leader at offset (-1: the leader's current log end), with no entry beyond it: the
	// ISR, or every assigned replica when all is true (the partition or its mirror sets
	// mirror.support.unclean.leader.election). It returns ctx.Err() when ctx ends first.
	WaitReplicas(ctx context.Context, topic string, partition int32, offset int64, all bool) error
}

// OpenLogs is optionally implemented by a Destination that opens its logs on demand
// and can tell whether a partition's log is open without opening it. A start then
// answers without opening the logs of the topics it creates (creating 10,000 logs
// took seconds of the answer); their reconcilers open them.
type OpenLogs interface {
	// OpenLog returns the partition's log and true when it is open (or being opened:
	// it waits for that open), and nil and false when it is not. The Destination
	// guarantees that a log it reports as not open has not been written since it was
	// last open in this process, or ever, if never: every write to it goes through Log.
	OpenLog(topic string, partition int32) (fetcher.Log, bool)
}

// GroupOffsets is optionally implemented by a Destination that stores consumer-group
// offsets, for the offset sync of spec §17.
type GroupOffsets interface {
	// CommittedOffsets returns the committed offsets of group (nil when it has none).
	CommittedOffsets(group string) map[TopicPartition]int64
	// HasActiveMembers reports whether group has members on the destination; such groups
	// are never synced.
	HasActiveMembers(group string) bool
	// CommitOffsets stores offsets for group.
	CommitOffsets(group string, offsets map[TopicPartition]int64) error
}

// GroupOffsetLowerer is optionally implemented by a Destination that keeps group
// offsets. After a mirror truncation cut a partition's log to end (a failback's LME
// truncation, a divergence, a stop's LSO cut), a committed offset above end points
// past records that are gone; the records mirrored next take those offsets and are new
// to the group, so a group resuming there would skip them without an error (the offset
// sync never rewinds an offset). LowerGroupOffsets sets every committed offset of tp
// above end to end, durably, and returns what it lowered.
type GroupOffsetLowerer interface {
	LowerGroupOffsets(tp TopicPartition, end int64) ([]LoweredGroupOffset, error)
}

// LoweredGroupOffset is one committed offset a truncation lowered: group's offset on
// the partition went From -> To.
type LoweredGroupOffset struct {
	Group    string
	From, To int64
}

// ClientAdmin is optionally implemented by a Destination: the host-facing topic admin
// operations, what a broker's CreatePartitions, DeleteTopics and DeleteRecords handlers
// call for a client. A mirror topic that is not STOPPED refuses them with
// INVALID_CLUSTER_MIRROR_STATES (spec §12: a mirror topic changes only through the
// mirror); once STOPPED, and for topics that are not mirror topics, they work as usual.
// Destination.CreatePartitions stays the mirror's own path (the metadata sync grows a
// mirror topic with its source).
type ClientAdmin interface {
	// ClientCreatePartitions grows topic to count partitions for a client.
	ClientCreatePartitions(ctx context.Context, topic string, count int32) error
	// DeleteTopic deletes topic and its data.
	DeleteTopic(ctx context.Context, topic string) error
	// DeleteRecords moves the log start of a partition to before (-1 = the high
	// watermark) and returns the new log start (Kafka's low watermark). An offset
	// above the high watermark is an error Is(fetcher.ErrOffsetOutOfRange).
	DeleteRecords(ctx context.Context, topic string, partition int32, before int64) (int64, error)
}

// ACL is one access-control binding (Kafka's AclBinding), with Kafka's upper-case names:
// ResourceType TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN or USER;
// PatternType LITERAL or PREFIXED; Operation READ, WRITE, ...; PermissionType ALLOW or
// DENY; Principal "User:alice"; Host "*" or an address.
type ACL struct {
	ResourceType   string `json:"resource_type"`
	ResourceName   string `json:"resource_name"`
	PatternType    string `json:"pattern_type"`
	Principal      string `json:"principal"`
	Host           string `json:"host"`
	Operation      string `json:"operation"`
	PermissionType string `json:"permission_type"`
}

// String renders the binding in one line.
func (a ACL) String() string {
	return fmt.Sprintf("%s:%s:%s %s %s %s from %s", a.ResourceType, a.PatternType, a.ResourceName,
		a.Principal, a.PermissionType, a.Operation, a.Host)
}

// ACLStore is optionally implemented by a Destination that keeps ACLs: the metadata
// sync replaces, per mirror, the set of ACLs it copied from the source (acls.include),
// so an ACL removed on the source is removed here too, and ACLs created on the
// destination itself or by another mirror are never touched. Enforcing them is the
// host's (or the data plane's) job.
type ACLStore interface {
	// ReplaceMirrorACLs makes acls the set of ACLs synced by mirror, durably.
	ReplaceMirrorACLs(mirror string, acls []ACL) error
	// MirrorACLs returns the ACLs synced by mirror, sorted.
	MirrorACLs(mirror string) []ACL
	// ACLs returns every ACL the destination holds (of every mirror), sorted and
	// without duplicates.
	ACLs() []ACL
}

// ProduceToLog is the client write path of one destination partition, for Destination
// implementations (localdest.LocalDestination uses it): it checks that batch is exactly one whole,
// CRC-valid v2 data batch and appends it as leader at the log end, returning its base
// offset. A control batch is refused with INVALID_RECORD (clients never write
// transaction markers or barriers, as Kafka's LogValidator refuses them), a malformed one
// with CORRUPT_MESSAGE. A read-only log (a mirror partition in any state but STOPPED)
// refuses it with an error that errors.Is matches both to admin.CodeReadOnlyTopic.Err()
// and to fetcher.ErrReadOnly. Nothing is appended on any error.
func ProduceToLog(ctx context.Context, log fetcher.Log, topic string, partition int32, batch []byte) (int64, error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	b, err := records.ParseBatch(batch)
	if err == nil && len(b) != len(batch) {
		err = fmt.Errorf("%d bytes after the batch (one batch per partition)", len(batch)-len(b))
	}
	if err == nil {
		err = b.VerifyCRC()
	}
	if err != nil {
		return -1, fmt.Errorf("%w: %w", admin.Errorf(admin.CodeCorruptMessage, "produce to %s-%d", topic, partition), err)
	}
	if b.Attributes().IsControl() {
		return -1, admin.Errorf(admin.CodeInvalidRecord, "produce to %s-%d: clients cannot write control batches", topic, partition)
	}
	off, err := log.AppendAsLeader(batch)
	if errors.Is(err, fetcher.ErrReadOnly) {
		return -1, fmt.Errorf("%w: %w", admin.Errorf(admin.CodeReadOnlyTopic,
			"%s-%d is a mirror partition and accepts writes only once STOPPED", topic, partition), err)
	}
	return off, err
}

// SortACLs returns a sorted copy of acls (by String), the order ACLStore lists them in.
func SortACLs(acls []ACL) []ACL {
	out := append([]ACL(nil), acls...)
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// CloneConfigs returns a copy of the topic configs m, never nil (room for two more).
func CloneConfigs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	return out
}
