package dataplane

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// DestinationWriter returns the Writer over d: each batch goes through
// d.Produce, the Destination's client write path, which refuses a read-only
// partition with READ_ONLY_TOPIC under the log's own lock (so a SetReadOnly
// never races a write through). A partition whose leader epoch was never set
// gets epoch 0 first.
func DestinationWriter(d mirror.Destination) Writer { return destinationWriter{d} }

type destinationWriter struct{ d mirror.Destination }

// Produce implements Writer.
func (w destinationWriter) Produce(ctx context.Context, topic string, partition int32, batches []byte) (int64, error) {
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
		base, err := w.d.Produce(ctx, topic, partition, it.Batch())
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
