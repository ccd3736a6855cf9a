package dataplane

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// DestinationWriter returns the Writer over d: it refuses a partition that
// d.ReadOnly reports read-only with READ_ONLY_TOPIC, and otherwise appends
// each batch with Log.AppendAsLeader (a partition whose leader epoch was
// never set gets epoch 0 first).
//
// MERGE NOTE (lead): this adapter stands in for the client write path of the
// failover-safety work, mirror.Destination.Produce(ctx, topic, partition,
// batches) (int64, error). Once that method exists, replace the body with
// `return d.Produce(ctx, topic, partition, batches)` (or pass the Destination
// itself as Config.Writer): the check here and the append are two steps, so
// a SetReadOnly(true) racing with a Produce can let one batch through, which
// Destination.Produce closes by checking and appending under one lock.
func DestinationWriter(d mirror.Destination) Writer { return destinationWriter{d} }

type destinationWriter struct{ d mirror.Destination }

// Produce implements Writer.
func (w destinationWriter) Produce(_ context.Context, topic string, partition int32, batches []byte) (int64, error) {
	if w.d.ReadOnly(topic, partition) {
		return -1, admin.Errorf(admin.CodeReadOnlyTopic, "partition %s-%d is read-only", topic, partition)
	}
	l, err := w.d.Log(topic, partition)
	if err != nil {
		return -1, err
	}
	if l.LeaderEpoch() < 0 {
		if _, err := l.BumpLeaderEpoch(-1); err != nil {
			return -1, err
		}
	}
	first := int64(-1)
	it := records.NewIterator(batches)
	for it.Next() {
		base, err := l.AppendAsLeader(it.Batch())
		if err != nil {
			if first >= 0 {
				return first, fmt.Errorf("dataplane: %s-%d: batches from offset %d appended, then: %w", topic, partition, first, err)
			}
			return -1, err
		}
		if first < 0 {
			first = base
		}
	}
	if err := it.Err(); err != nil || it.Partial() || first < 0 {
		return -1, fmt.Errorf("dataplane: %s-%d: not whole batches (validated before, so a bug): %v", topic, partition, err)
	}
	return first, nil
}
