package compacted

import (
	"context"
	"fmt"
)

// Fetch budgets of a replay.
const (
	// maxFetchBytes bounds the growth of the fetch budget for a batch larger than it.
	maxFetchBytes = 1 << 30
)

// Replay calls fn for every committed record of partition, in offset order, from the log
// start up to the last stable offset observed when Replay starts; value is nil for a
// tombstone. Control batches and aborted transactions are skipped. Errors of fn are
// returned wrapped, with the record's offset. key and value alias the fetch response of
// their batch (uncompressed batches): fn may keep them, the replay never reuses them.
//
// The replay sends read_committed Fetch requests (franz-go kmsg, through a kgo client
// with the connection settings of Config.Sarama) to the partition's leader and walks the
// raw record batches of each answer; a corrupt batch, or one the broker cut short
// although the budget covered it, fails the replay with an error matching ErrReplay and
// records.ErrCorrupt. Batches without records, which the log cleaner keeps for producer
// state, are passed by their last offset.
//
// Leader errors, network errors and OFFSET_OUT_OF_RANGE are retried after a metadata
// refresh with a bounded backoff (Config.RetryTimeout per stalled step). An
// OFFSET_OUT_OF_RANGE whose log start is past the fetch offset means records were
// deleted under the replay: it fails with a *LostError naming the range, unless
// Config.OnLost accepts the loss (then the replay goes on from the log start).
// A replica that answers without any batch below the end is retried like a leader error
// (the replay never ends on a guess).
//
// The end is the last stable offset: a transaction whose commit was acknowledged to its
// producer can still be past it until the coordinator has written its COMMIT marker. A
// reader that must see the writes of a transactional id fences it first (NewProducer
// with that id: InitProducerId waits for the markers of its last transaction).
func (l *Log) Replay(ctx context.Context, partition int32, fn func(offset int64, key, value []byte) error) error {
	if err := l.checkOpen(); err != nil {
		return err
	}
	if partition < 0 || partition >= l.cfg.Partitions {
		return fmt.Errorf("%w: partition %d of %q out of range [0,%d)", ErrReplay, partition, l.cfg.Topic, l.cfg.Partitions)
	}
	rp := &replay{l: l, partition: partition, retry: newRetrier(l.cfg.RetryTimeout), maxBytes: l.cfg.FetchMaxBytes, leaderID: -1}
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

	leaderID int32    // the partition's leader, -1 until looked up (again)
	topicID  [16]byte // of the topic, from the metadata (fetch v13+ names topics by id)
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
		ans, err := rp.fetch(ctx, next)
		if err != nil {
			return err
		}
		if ans.outOfRange {
			if next, err = rp.outOfRange(ctx, ans, next); err != nil {
				return err
			}
			continue
		}
		p, err := replayBatches(ans.fetched, next, end, fn)
		if err != nil {
			return fmt.Errorf("compacted: %s: %w", rp.where(next), err)
		}
		if p.Next > next {
			next = p.Next
			rp.retry.reset()
			continue
		}
		if next, err = rp.noProgress(ctx, ans, next, end, p); err != nil {
			return err
		}
	}
	return nil
}

// outOfRange handles an OFFSET_OUT_OF_RANGE at next: when the log start moved past
// next it refuses the loss (*LostError) or, with Config.OnLost, reports it and returns
// the log start; otherwise it returns next again after a backoff (a new leader whose
// high watermark is behind).
func (rp *replay) outOfRange(ctx context.Context, ans fetchAnswer, next int64) (int64, error) {
	if ans.logStart > next {
		lost := &LostError{Topic: rp.l.cfg.Topic, Partition: rp.partition, From: next, To: ans.logStart}
		if rp.l.cfg.OnLost == nil {
			return 0, lost
		}
		rp.l.cfg.OnLost(rp.partition, lost.From, lost.To)
		rp.retry.reset()
		return ans.logStart, nil
	}
	rp.refresh()
	if err := rp.retry.wait(ctx, &KafkaError{Op: "Fetch", Code: codeOffsetOutOfRange}); err != nil {
		return 0, fmt.Errorf("%w: fetch %s: %w", ErrReplay, rp.where(next), err)
	}
	return next, nil
}

// noProgress handles a fetch at next that passed no whole batch below end. It grows the
// budget for a batch larger than it, and refuses a batch the broker cut short although
// the budget covered it (Kafka returns the first batch whole). Otherwise it retries,
// within the retry budget, a replica that returned nothing although its last stable
// offset is past next, or that has not reached end yet. It never ends the replay on a
// guess: the next offset it returns is one the response accounts for.
func (rp *replay) noProgress(ctx context.Context, ans fetchAnswer, next, end int64, p passed) (int64, error) {
	if p.Incomplete > 0 {
		switch {
		case p.Incomplete > maxFetchBytes:
			return 0, fmt.Errorf("%w: %s: a batch of %d bytes is larger than %d bytes: %w", ErrReplay, rp.where(next), p.Incomplete, maxFetchBytes, p.Truncated)
		case int(rp.maxBytes) >= p.Incomplete:
			return 0, fmt.Errorf("%w: %s: the broker cut a batch of %d bytes short although the budget was %d bytes: %w", ErrReplay, rp.where(next), p.Incomplete, rp.maxBytes, p.Truncated)
		}
		rp.maxBytes = int32(min(max(2*int(rp.maxBytes), p.Incomplete), maxFetchBytes))
		return next, nil
	}
	stable := ans.lso
	if stable < 0 {
		stable = ans.hw
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

// fetch fetches from offset, retrying retriable errors; the answer it returns has no
// error or OFFSET_OUT_OF_RANGE.
func (rp *replay) fetch(ctx context.Context, offset int64) (fetchAnswer, error) {
	for {
		ans, err := rp.fetchOnce(ctx, offset)
		if err == nil {
			return ans, nil
		}
		if !retriable(err) {
			return fetchAnswer{}, fmt.Errorf("%w: fetch %s: %w", ErrReplay, rp.where(offset), err)
		}
		rp.refresh()
		if werr := rp.retry.wait(ctx, err); werr != nil {
			return fetchAnswer{}, fmt.Errorf("%w: fetch %s: %w", ErrReplay, rp.where(offset), werr)
		}
	}
}

// bounds returns the log start and the last stable offset, retrying retriable errors.
func (rp *replay) bounds(ctx context.Context) (start, end int64, err error) {
	for {
		start, end, err = rp.boundsOnce(ctx)
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

// refresh forgets the leader: the next request looks it up again.
func (rp *replay) refresh() { rp.leaderID = -1 }
