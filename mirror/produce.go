package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// ProduceToLog is the client write path of one destination partition, for Destination
// implementations (LocalDestination uses it): it checks that batch is exactly one whole,
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
