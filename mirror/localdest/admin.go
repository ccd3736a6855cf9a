package localdest

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
)

var _ dest.ClientAdmin = (*LocalDestination)(nil)

// guardMirrorTopicLocked refuses op on topic while one of its partitions is read-only:
// a mirror partition is read-only in every state but STOPPED.
func (d *LocalDestination) guardMirrorTopicLocked(op, topic string, t *fileTopic) error {
	for p := int32(0); p < t.Partitions; p++ {
		if d.readOnlyLocked(roKey(topic, p)) {
			return admin.Errorf(admin.CodeInvalidClusterMirrorStates,
				"%s of topic %q refused: partition %d is a mirror partition that is not STOPPED; stop the mirror topic first", op, topic, p)
		}
	}
	return nil
}

// ClientCreatePartitions implements dest.ClientAdmin. The guard and the growth happen
// under one hold of the destination's lock, which SetReadOnly takes too, so a mirror
// start racing with the call never finds a topic grown by a client after it was made
// read-only.
func (d *LocalDestination) ClientCreatePartitions(ctx context.Context, topic string, count int32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.meta.Topics[topic]
	if !ok {
		return admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown topic %q", topic)
	}
	if err := d.guardMirrorTopicLocked("CreatePartitions", topic, t); err != nil {
		return err
	}
	if count < t.Partitions {
		return admin.Errorf(admin.CodeInvalidRequest, "topic %q has %d partitions; cannot shrink to %d", topic, t.Partitions, count)
	}
	if count == t.Partitions {
		return nil
	}
	prev := t.Partitions
	t.Partitions = count
	if err := d.saveLocked(); err != nil {
		t.Partitions = prev
		return err
	}
	return nil
}

// DeleteTopic implements dest.ClientAdmin: the topic's logs are closed and, for a file
// destination, their directories removed before the topic leaves the metadata, so a
// later topic of the same name never finds the old data.
func (d *LocalDestination) DeleteTopic(ctx context.Context, topic string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waitOpensLocked(topic) // no open of its logs is under way from here on
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
		tp := dest.TopicPartition{Topic: topic, Partition: p}
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

// DeleteRecords implements dest.ClientAdmin through the log's fetcher.RecordDeleter. The
// log's own read-only flag refuses too, under the log's lock, so a stop or start racing
// with the call never lets a mirror partition lose records.
func (d *LocalDestination) DeleteRecords(ctx context.Context, topic string, partition int32, before int64) (int64, error) {
	d.mu.Lock()
	t, ok := d.meta.Topics[topic]
	var err error
	if ok && d.readOnlyLocked(roKey(topic, partition)) {
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
