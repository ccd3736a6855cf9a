package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kerr"

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

// logFullTruncation logs a full truncation: a warning naming the offsets the source no
// longer has (notOnSource: not re-mirrored) when there are any. What it removes of
// this site's records is logged by the plan (LogPlan, reportRemoved) as lost.
func (e *Engine) logFullTruncation(msg, mirror, topic string, ft controller.FullTruncation) {
	attrs := []any{"mirror", mirror, "topic", topic, "partition", ft.Partition, "logStart", ft.LogStart, "logEnd", ft.LogEnd,
		"sourceLogStart", ft.SourceLogStart, "notOnSourceFrom", ft.LostFrom, "notOnSourceTo", ft.LostTo, "notOnSource", ft.Lost()}
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
