package mirror

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
)

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

var _ ClientAdmin = (*LocalDestination)(nil)

// guardMirrorTopicLocked refuses op on topic while one of its partitions is read-only:
// a mirror partition is read-only in every state but STOPPED.
func (d *LocalDestination) guardMirrorTopicLocked(op, topic string, t *fileTopic) error {
	for p := int32(0); p < t.Partitions; p++ {
		if d.meta.ReadOnly[roKey(topic, p)] {
			return admin.Errorf(admin.CodeInvalidClusterMirrorStates,
				"%s of topic %q refused: partition %d is a mirror partition that is not STOPPED; stop the mirror topic first", op, topic, p)
		}
	}
	return nil
}

// ClientCreatePartitions implements ClientAdmin.
func (d *LocalDestination) ClientCreatePartitions(ctx context.Context, topic string, count int32) error {
	d.mu.Lock()
	t, ok := d.meta.Topics[topic]
	var err error
	if ok {
		err = d.guardMirrorTopicLocked("CreatePartitions", topic, t)
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	return d.CreatePartitions(ctx, topic, count)
}

// DeleteTopic implements ClientAdmin: the topic's logs are closed and, for a file
// destination, their directories removed before the topic leaves the metadata, so a
// later topic of the same name never finds the old data.
func (d *LocalDestination) DeleteTopic(ctx context.Context, topic string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fetcher.ErrClosed
	}
	t, ok := d.meta.Topics[topic]
	if !ok {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown topic %q", topic)
	}
	if err := d.guardMirrorTopicLocked("DeleteTopics", topic, t); err != nil {
		return err
	}
	var errs []error
	for p := int32(0); p < t.Partitions; p++ {
		tp := TopicPartition{topic, p}
		if l, ok := d.logs[tp]; ok {
			errs = append(errs, l.Close())
			delete(d.logs, tp)
		}
		if d.root != "" {
			if err := os.RemoveAll(fetcher.PartitionDir(d.root, topic, p)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mirror: delete topic %q: %w", topic, err)
	}
	delete(d.meta.Topics, topic)
	return d.saveLocked()
}

// DeleteRecords implements ClientAdmin through the log's fetcher.RecordDeleter. The
// log's own read-only flag refuses too, under the log's lock, so a stop or start racing
// with the call never lets a mirror partition lose records.
func (d *LocalDestination) DeleteRecords(ctx context.Context, topic string, partition int32, before int64) (int64, error) {
	d.mu.Lock()
	t, ok := d.meta.Topics[topic]
	var err error
	if ok && d.meta.ReadOnly[roKey(topic, partition)] {
		err = d.guardMirrorTopicLocked("DeleteRecords", topic, t)
	}
	d.mu.Unlock()
	if err != nil {
		return -1, err
	}
	l, err := d.Log(topic, partition)
	if err != nil {
		return -1, err
	}
	rd, ok := l.(fetcher.RecordDeleter)
	if !ok {
		return -1, admin.Errorf(admin.CodeInvalidRequest, "the log of %s-%d does not support DeleteRecords", topic, partition)
	}
	start, err := rd.DeleteRecordsBefore(before)
	if errors.Is(err, fetcher.ErrReadOnly) {
		return -1, admin.Errorf(admin.CodeInvalidClusterMirrorStates,
			"DeleteRecords of %s-%d refused: a mirror partition that is not STOPPED", topic, partition)
	}
	if err != nil {
		return -1, fmt.Errorf("mirror: delete records of %s-%d before %d: %w", topic, partition, before, err)
	}
	return start, nil
}
