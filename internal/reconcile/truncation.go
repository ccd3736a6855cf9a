package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
)

// newFullTruncation fills the lost range of a full truncation of [start, end). An
// unknown source log start (-1) counts the whole range as lost: the report never
// understates a loss.
func newFullTruncation(p int32, start, end, srcStart int64) controller.FullTruncation {
	ft := controller.FullTruncation{Partition: p, LogStart: start, LogEnd: end, SourceLogStart: srcStart, LostFrom: start, LostTo: start}
	switch {
	case srcStart < 0:
		ft.LostTo = end
	case srcStart > start:
		ft.LostTo = min(end, srcStart)
	}
	return ft
}

// sourceLogStart asks the mirror's source for the log start offset of one partition,
// retrying transient failures (a retriable error code, a refused connection) for a few
// seconds.
func (mr *Runtime) sourceLogStart(ctx context.Context, topic string, partition int32) (int64, error) {
	src, _, err := mr.Sources()
	if err != nil {
		return -1, err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 50*time.Millisecond, time.Second, 5*time.Second
	return RetryTransient(ctx, backoff.WithContext(b, ctx), func() (int64, error) {
		res, err := src.ListOffsets(ctx, []fetcher.OffsetQuery{{Topic: topic, Partition: partition, CurrentLeaderEpoch: -1, Timestamp: fetcher.EarliestTimestamp}})
		if err != nil {
			return -1, err
		}
		if len(res) != 1 {
			return -1, fmt.Errorf("mirror: list the log start offset of source partition %s-%d: %d answers: %w", topic, partition, len(res), fetcher.ErrProtocol)
		}
		if res[0].ErrorCode != 0 {
			return -1, fmt.Errorf("mirror: list the log start offset of source partition %s-%d: %w", topic, partition, kerr.ErrorForCode(res[0].ErrorCode))
		}
		return res[0].Offset, nil
	})
}

// predictFullTruncation returns the full truncation PREPARING will do on the
// destination log l of one partition, or false when it keeps some of the log (an LME is
// known) or the log is empty. The LME is looked up once, without retries: a failed
// lookup returns its error (PREPARING retries it, and logs what it truncates).
func (mr *Runtime) predictFullTruncation(ctx context.Context, topic string, partition int32, l fetcher.Log) (controller.FullTruncation, bool, error) {
	start, end := l.LogStartOffset(), l.LogEndOffset()
	if end <= start {
		return controller.FullTruncation{}, false, nil
	}
	lme, err := mr.lookupLME(ctx, topic, partition, backoff.WithContext(&backoff.StopBackOff{}, ctx))
	if err != nil {
		return controller.FullTruncation{}, false, err
	}
	if _, full := epoch.LMETruncationOffset(l.Epochs(), start, end, lme); !full {
		return controller.FullTruncation{}, false, nil
	}
	srcStart, err := mr.sourceLogStart(ctx, topic, partition)
	if err != nil {
		return newFullTruncation(partition, start, end, -1), true, err
	}
	return newFullTruncation(partition, start, end, srcStart), true, nil
}

// ReportFullTruncations is StartMirrorTopics' warning, before the desired state
// changes: for every partition of topic with data, what PREPARING will truncate fully
// and what of it the source no longer has. Problems asking are logged, not fatal (the
// partition's PREPARING logs the truncation it does).
func (mr *Runtime) ReportFullTruncations(ctx context.Context, topic string) []controller.FullTruncation {
	spec, ok := mr.e.dest.Topic(topic)
	if !ok {
		return nil
	}
	var out []controller.FullTruncation
	for p := int32(0); p < spec.Partitions; p++ {
		l, err := mr.e.dest.Log(topic, p)
		if err != nil {
			continue // the reconciler fails the partition with the cause; nothing is truncated
		}
		ft, full, err := mr.predictFullTruncation(ctx, topic, p, l)
		if err != nil {
			mr.e.log.Warn("mirror: cannot tell what the start will truncate", "mirror", mr.name, "topic", topic, "partition", p, "err", err)
		}
		if !full {
			continue
		}
		out = append(out, ft)
		mr.e.logFullTruncation("mirror: start will truncate the destination log fully", mr.name, topic, ft)
	}
	return out
}

// logFullTruncation logs a full truncation: a warning naming the offsets lost for good
// when there are any.
func (e *Engine) logFullTruncation(msg, mirror, topic string, ft controller.FullTruncation) {
	attrs := []any{"mirror", mirror, "topic", topic, "partition", ft.Partition, "logStart", ft.LogStart, "logEnd", ft.LogEnd,
		"sourceLogStart", ft.SourceLogStart, "lostFrom", ft.LostFrom, "lostTo", ft.LostTo, "lost", ft.Lost()}
	if ft.Lost() > 0 {
		e.log.Warn(msg+"; the source no longer has some of these offsets: they are discarded for good", attrs...)
		return
	}
	e.log.Info(msg, attrs...)
}

// lookupLME asks the other cluster for the LME of one partition, in its mirrors that
// mirror from this cluster, retrying transient failures with bo: -1 when there is none
// or no peer. A mirror there that still mirrors the partition (neither STOPPED nor
// UNKNOWN) is a mirror loop (ErrMirrorLoop).
func (mr *Runtime) lookupLME(ctx context.Context, topic string, partition int32, bo backoff.BackOffContext) (int32, error) {
	lme, _, err := mr.findLME(ctx, topic, partition, bo)
	return lme, err
}
