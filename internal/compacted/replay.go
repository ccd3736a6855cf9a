package compacted

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/IBM/sarama"
)

// Fetch budgets of a replay.
const (
	// maxFetchBytes bounds the growth of the fetch budget for a batch larger than it.
	maxFetchBytes = 1 << 30
)

// Replay calls fn for every committed record of partition, in offset order, from the log
// start up to the last stable offset observed when Replay starts; value is nil for a
// tombstone. Control batches and aborted transactions are skipped. Errors of fn are
// returned wrapped, with the record's offset.
//
// Leader errors, network errors and OFFSET_OUT_OF_RANGE are retried after a metadata
// refresh with a bounded backoff (Config.RetryTimeout per stalled step); an
// OFFSET_OUT_OF_RANGE whose log start is past the fetch offset moves on to the log start
// (the records below it are gone for every reader, as if the replay had started later).
// Batches without records, which the log cleaner keeps for producer state, are passed
// over; a replica that answers without any batch below the end is retried like a leader
// error (the replay never ends on a guess).
func (l *Log) Replay(ctx context.Context, partition int32, fn func(offset int64, key, value []byte) error) error {
	if err := l.checkOpen(); err != nil {
		return err
	}
	if partition < 0 || partition >= l.cfg.Partitions {
		return fmt.Errorf("%w: partition %d of %q out of range [0,%d)", ErrReplay, partition, l.cfg.Topic, l.cfg.Partitions)
	}
	rp := &replay{l: l, partition: partition, retry: newRetrier(l.cfg.RetryTimeout), maxBytes: l.cfg.FetchMaxBytes}
	start, end, err := rp.bounds(ctx)
	if err != nil {
		return err
	}
	return rp.run(ctx, start, end, fn)
}

// replay is the state of one Replay.
type replay struct {
	l         *Log
	partition int32
	retry     *retrier
	maxBytes  int32
}

func (rp *replay) where(offset int64) string {
	return fmt.Sprintf("%s-%d@%d", rp.l.cfg.Topic, rp.partition, offset)
}

// run replays [start, end).
func (rp *replay) run(ctx context.Context, start, end int64, fn func(int64, []byte, []byte) error) error {
	for next := start; next < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		blk, err := rp.fetch(ctx, next)
		if err != nil {
			return err
		}
		if errors.Is(blk.Err, sarama.ErrOffsetOutOfRange) {
			if next, err = rp.outOfRange(ctx, blk, next); err != nil {
				return err
			}
			continue
		}
		advanced, partial, err := replayBatches(blk, next, end, fn)
		if err != nil {
			return fmt.Errorf("compacted: %s: %w", rp.where(next), err)
		}
		if advanced > next {
			next = advanced
			rp.retry.reset()
			continue
		}
		if next, err = rp.noProgress(ctx, blk, next, end, partial || blk.Partial); err != nil {
			return err
		}
	}
	return nil
}

// outOfRange handles an OFFSET_OUT_OF_RANGE at next: it returns the log start when the
// log start moved past next, and next again after a backoff otherwise (a new leader
// whose high watermark is behind).
func (rp *replay) outOfRange(ctx context.Context, blk *sarama.FetchResponseBlock, next int64) (int64, error) {
	if blk.LogStartOffset > next {
		rp.retry.reset()
		return blk.LogStartOffset, nil
	}
	rp.refresh()
	if err := rp.retry.wait(ctx, blk.Err); err != nil {
		return 0, fmt.Errorf("%w: fetch %s: %w", ErrReplay, rp.where(next), err)
	}
	return next, nil
}

// noProgress handles a fetch at next that passed no whole batch below end. It grows the
// budget for a truncated batch; it moves past batches without records (sarama decodes
// them but leaves them out of RecordsSet; the log cleaner keeps them for producer state);
// and it retries, within the retry budget, a replica that returned nothing although its
// last stable offset is past next, or that has not reached end yet. It never ends the
// replay on a guess: the next offset it returns is one the response accounts for.
func (rp *replay) noProgress(ctx context.Context, blk *sarama.FetchResponseBlock, next, end int64, partial bool) (int64, error) {
	stable := blk.LastStableOffset
	if stable < 0 {
		stable = blk.HighWaterMarkOffset
	}
	if partial {
		if rp.maxBytes >= maxFetchBytes {
			return 0, fmt.Errorf("%w: %s: a batch is larger than %d bytes", ErrReplay, rp.where(next), maxFetchBytes)
		}
		rp.maxBytes = min(2*max(rp.maxBytes, 1), maxFetchBytes)
		return next, nil
	}
	if after, ok := decodedEnd(blk); ok && after > next {
		rp.retry.reset()
		return after, nil
	}
	cause := fmt.Errorf("no batch at %d below the last stable offset %d", next, stable)
	if stable < end {
		cause = fmt.Errorf("the replica's last stable offset %d is below %d", stable, end)
	}
	rp.refresh()
	if err := rp.retry.wait(ctx, cause); err != nil {
		return 0, fmt.Errorf("%w: fetch %s: %w", ErrReplay, rp.where(next), err)
	}
	return next, nil
}

// decodedEnd returns the offset after the last whole batch sarama decoded in blk,
// counting the batches without records it leaves out of RecordsSet (sarama keeps it in
// an unexported field, read here by reflection). ok is false when blk held no batch, or
// when sarama no longer has the field; the replay then retries rather than guess.
func decodedEnd(blk *sarama.FetchResponseBlock) (int64, bool) {
	f := reflect.ValueOf(blk).Elem().FieldByName("recordsNextOffset")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.Int64 {
		return 0, false
	}
	return f.Elem().Int(), true
}

// fetch fetches from offset, retrying retriable errors; the block it returns has no
// error or OFFSET_OUT_OF_RANGE.
func (rp *replay) fetch(ctx context.Context, offset int64) (*sarama.FetchResponseBlock, error) {
	for {
		blk, err := rp.fetchOnce(offset)
		if err == nil {
			return blk, nil
		}
		if !retriable(err) {
			return nil, fmt.Errorf("%w: fetch %s: %w", ErrReplay, rp.where(offset), err)
		}
		rp.refresh()
		if werr := rp.retry.wait(ctx, err); werr != nil {
			return nil, fmt.Errorf("%w: fetch %s: %w", ErrReplay, rp.where(offset), werr)
		}
	}
}

func (rp *replay) fetchOnce(offset int64) (*sarama.FetchResponseBlock, error) {
	b, err := rp.leader()
	if err != nil {
		return nil, err
	}
	topic := rp.l.cfg.Topic
	req := &sarama.FetchRequest{Version: 11, MaxWaitTime: int32(rp.l.cfg.FetchMaxWait / time.Millisecond),
		MinBytes: 1, MaxBytes: rp.maxBytes, Isolation: sarama.ReadCommitted}
	req.AddBlock(topic, rp.partition, offset, rp.maxBytes, -1)
	resp, err := b.Fetch(req)
	if err != nil {
		_ = b.Close() // reopened by the next leader lookup
		return nil, err
	}
	blk := resp.GetBlock(topic, rp.partition)
	switch {
	case blk == nil:
		return nil, errors.New("no partition in the fetch response")
	case errors.Is(blk.Err, sarama.ErrNoError), errors.Is(blk.Err, sarama.ErrOffsetOutOfRange):
		return blk, nil
	default:
		return nil, blk.Err
	}
}

// bounds returns the log start and the last stable offset, retrying retriable errors.
func (rp *replay) bounds(ctx context.Context) (start, end int64, err error) {
	rp.refresh()
	for {
		start, end, err = rp.boundsOnce()
		if err == nil {
			return start, end, nil
		}
		if !retriable(err) {
			return 0, 0, fmt.Errorf("%w: list offsets of %s-%d: %w", ErrReplay, rp.l.cfg.Topic, rp.partition, err)
		}
		rp.refresh()
		if werr := rp.retry.wait(ctx, err); werr != nil {
			return 0, 0, fmt.Errorf("%w: list offsets of %s-%d: %w", ErrReplay, rp.l.cfg.Topic, rp.partition, werr)
		}
	}
}

func (rp *replay) boundsOnce() (start, end int64, err error) {
	b, err := rp.leader()
	if err != nil {
		return 0, 0, err
	}
	if start, err = rp.listOffset(b, sarama.OffsetOldest, sarama.ReadUncommitted); err != nil {
		return 0, 0, err
	}
	if end, err = rp.listOffset(b, sarama.OffsetNewest, sarama.ReadCommitted); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

func (rp *replay) listOffset(b *sarama.Broker, ts int64, iso sarama.IsolationLevel) (int64, error) {
	topic := rp.l.cfg.Topic
	req := sarama.NewOffsetRequest(rp.l.base.Version)
	req.IsolationLevel = iso
	req.AddBlock(topic, rp.partition, ts, 1)
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		_ = b.Close()
		return 0, err
	}
	blk := resp.GetBlock(topic, rp.partition)
	switch {
	case blk == nil:
		return 0, errors.New("no partition in the list offsets response")
	case !errors.Is(blk.Err, sarama.ErrNoError):
		return 0, blk.Err
	}
	return blk.Offset, nil
}

func (rp *replay) leader() (*sarama.Broker, error) {
	b, err := rp.l.client.Leader(rp.l.cfg.Topic, rp.partition)
	if err != nil {
		return nil, err
	}
	if err := b.Open(rp.l.client.Config()); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
		return nil, err
	}
	return b, nil
}

// refresh refreshes the topic's metadata; a failure shows in the next leader lookup.
func (rp *replay) refresh() { _ = rp.l.client.RefreshMetadata(rp.l.cfg.Topic) }
