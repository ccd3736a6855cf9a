package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// partitionHealth is what the fetcher told a reconciler about its source, published
// for DescribeClusterMirrors and Metrics. The atomics are written on the fetcher's
// event goroutine and read anywhere; stoppingSince is owned by the turns.
type partitionHealth struct {
	lastFetch  atomic.Int64 // Unix nanoseconds of the last processed fetch response; 0 = none
	fetchStart atomic.Int64 // Unix nanoseconds of the last start of the partition's fetcher; 0 = none
	lastTs     atomic.Int64 // largest batch MaxTimestamp (Unix ms) this owner mirrored; -1 = none
	problem    atomic.Pointer[sourceProblem]
	// reported is the lag last passed to Metrics.Lag (reportedLag), so that an
	// idle partition's responses, the same lag each time, do not report it again.
	reported atomic.Pointer[reportedLag]

	stoppingSince time.Time // when this owner wrote STOPPING; zero otherwise
}

// sourceProblem is the source failing for a partition: since the first failure after
// the last processed response, with the latest error.
type sourceProblem struct {
	since time.Time
	err   error
}

// reportedLag is one Metrics.Lag call's arguments.
type reportedLag struct {
	offsets int64
	upTo    time.Time
}

func (h *partitionHealth) init() { h.lastTs.Store(-1) }

// timeLag is the age of the oldest source record not yet mirrored: 0 when lag is 0,
// now − the newest mirrored batch's MaxTimestamp otherwise, -1 when unknown.
func (h *partitionHealth) timeLag(lag int64, now time.Time) time.Duration {
	switch {
	case lag < 0:
		return -1
	case lag == 0:
		return 0
	}
	ts := h.lastTs.Load()
	if ts < 0 {
		return -1
	}
	return max(0, now.Sub(time.UnixMilli(ts)))
}

// ref names the reconciler's partition for Metrics.
func (r *Partition) ref() PartitionRef {
	return PartitionRef{Mirror: r.mirror, Topic: r.topic, Partition: r.partition}
}

func (r *Partition) metrics() Metrics { return r.e.metrics }

// observeProgress records a processed fetch response (fetcher goroutine).
func (r *Partition) observeProgress(p fetcher.Progress) {
	now := r.e.clock()
	h := &r.health
	h.lastFetch.Store(now.UnixNano())
	if h.problem.Swap(nil) != nil && r.mr != nil {
		r.mr.gate.sourceBack() // the source answers again: its FAILED partitions retry now
	}
	for ts := h.lastTs.Load(); p.MaxTimestamp > ts; ts = h.lastTs.Load() {
		if h.lastTs.CompareAndSwap(ts, p.MaxTimestamp) {
			break
		}
	}
	mt := r.metrics()
	if p.Bytes > 0 || p.Records > 0 {
		mt.Mirrored(r.ref(), p.Bytes, p.Records)
	}
	var upTo time.Time
	if ts := h.lastTs.Load(); ts >= 0 {
		upTo = time.UnixMilli(ts)
	}
	if last := h.reported.Load(); last != nil && last.offsets == p.Lag && last.upTo.Equal(upTo) {
		return // what the metrics hold: an idle partition's answers cost no metrics call
	}
	h.reported.Store(&reportedLag{offsets: p.Lag, upTo: upTo})
	mt.Lag(r.ref(), p.Lag, upTo)
}

// observeSourceError records a failed, retried fetch attempt (fetcher goroutine). The
// problem counts from the last processed response (the failed request may have hung
// since then), or from now when there was none.
func (r *Partition) observeSourceError(err error) {
	since := r.e.clock()
	if ns := r.health.lastFetch.Load(); ns > 0 && time.Unix(0, ns).Before(since) {
		since = time.Unix(0, ns)
	}
	old := r.health.problem.Load()
	if old != nil {
		since = old.since
	}
	r.health.problem.Store(&sourceProblem{since: since, err: err})
	if old == nil {
		r.e.notifyChange() // wakes waiters on the partition's health (tests, CLI)
	}
}

// fetcherStopped forgets the source's high watermark when the partition leaves the
// fetcher. A source problem is kept: a partition failed (and retried) because its
// source is unreachable stays shown as such until a fetch, or a fidelity check of a
// PAUSED partition, reaches the source again, or the partition stops.
func (r *Partition) fetcherStopped() {
	r.srcHW.Store(-1)
	r.health.reported.Store(&reportedLag{offsets: -1})
	r.metrics().Lag(r.ref(), -1, time.Time{})
}

// observeState reports a published state.
func (r *Partition) observeState(s statemachine.State) { r.metrics().PartitionState(r.ref(), s) }

// observeGone reports that the reconciler stopped.
func (r *Partition) observeGone() { r.metrics().PartitionGone(r.ref()) }

// observeTransition reports a durable state change and times STOPPING (a turn).
func (r *Partition) observeTransition(from, to statemachine.State) {
	r.metrics().StateTransition(r.ref(), from, to)
	if to == statemachine.Stopping || to == statemachine.Stopped {
		r.health.problem.Store(nil) // the source is no longer needed
	}
	switch {
	case to == statemachine.Stopping:
		r.health.stoppingSince = r.e.clock()
	case to == statemachine.Stopped && from == statemachine.Stopping && !r.health.stoppingSince.IsZero():
		r.metrics().StoppingDuration(r.ref(), r.e.clock().Sub(r.health.stoppingSince))
		r.health.stoppingSince = time.Time{}
	default:
		r.health.stoppingSince = time.Time{}
	}
}

// observeBump reports a raised destination leader epoch.
func (r *Partition) observeBump(cause EpochBumpCause, from, to int32) {
	if to > from {
		r.metrics().LeaderEpochBump(r.ref(), cause, from, to)
	}
}

// Health returns the lag and source health of the partition at now; lag is its offset
// lag (-1 unknown). The source is reported unreachable (SourceUnreachableSince set)
// once it has failed for at least Config.UnreachableAfter: every fetch attempt since
// then failed, or — a source that keeps connections open but never answers — a
// MIRRORING partition got no fetch response for that long. It stays reported in every
// state but STOPPING and STOPPED (through FAILED and its retries) until the source
// answers again; the time lag is then unknown (-1), never a stale 0.
func (r *Partition) Health(lag int64, now time.Time) Health {
	h := Health{TimeLag: r.health.timeLag(lag, now)}
	if ns := r.health.lastFetch.Load(); ns > 0 {
		h.LastFetch = time.Unix(0, ns)
	}
	st, _ := r.Current()
	if st == statemachine.Stopping || st == statemachine.Stopped || st == statemachine.Unknown {
		return h
	}
	p := r.health.problem.Load()
	if p == nil && st == statemachine.Mirroring {
		p = r.silentSource(now)
	}
	if p == nil || now.Sub(p.since) < r.e.cfg.UnreachableAfter {
		return h
	}
	h.TimeLag = -1
	h.SourceErrorCode = sourceErrorCode(p.err)
	h.SourceErrorMessage = p.err.Error()
	h.SourceUnreachableSince = p.since
	return h
}

// ErrNoFetchResponse is the problem of a MIRRORING partition whose source accepted its
// fetches but answered none for Config.UnreachableAfter (a frozen source).
var ErrNoFetchResponse = errors.New("mirror: no fetch response from the source")

// silentSource is the problem of a MIRRORING partition that had no fetch response
// since its last one (or since its fetcher started), or nil when it had one within
// Config.UnreachableAfter. A fetch long-polls for at most fetch.wait.max.ms, so a
// longer silence means the source does not answer.
func (r *Partition) silentSource(now time.Time) *sourceProblem {
	last := max(r.health.lastFetch.Load(), r.health.fetchStart.Load())
	if last <= 0 || r.e.cfg.UnreachableAfter <= 0 {
		return nil
	}
	since := time.Unix(0, last)
	if d := now.Sub(since); d >= r.e.cfg.UnreachableAfter {
		return &sourceProblem{since: since, err: fmt.Errorf("%w for %v", ErrNoFetchResponse, d.Round(time.Millisecond))}
	}
	return nil
}

// sourceErrorCode is the Kafka error code of a fetch failure: the source's own
// partition error code, the code of a Kafka or admin error, REQUEST_TIMED_OUT for a
// timeout, UNKNOWN_TOPIC_OR_PARTITION and LEADER_NOT_AVAILABLE for missing metadata,
// NETWORK_EXCEPTION for anything else (the connection failed).
func sourceErrorCode(err error) admin.Code {
	var se *fetcher.SourceError
	var ke *kerr.Error
	var ae *admin.Error
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return admin.Code(se.Code)
	case errors.As(err, &ke):
		return admin.Code(ke.Code)
	case errors.As(err, &ae):
		return ae.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrNoFetchResponse), errors.As(err, &ne) && ne.Timeout():
		return admin.CodeRequestTimedOut
	case errors.Is(err, fetcher.ErrUnknownPartition):
		return admin.CodeUnknownTopicOrPartition
	case errors.Is(err, fetcher.ErrNoLeader):
		return admin.CodeLeaderNotAvailable
	}
	return admin.CodeNetworkException
}

// OnFetch implements fetcher.FetchObserver.
func (e fetchEvents) OnFetch(r fetcher.FetchRound) {
	e.mr.e.metrics.Fetch(e.mr.name, r.Leader, r.Latency, r.Err, r.ErrorCodes)
}

// OnPartitionError implements fetcher.FetchObserver.
func (e fetchEvents) OnPartitionError(tp fetcher.TopicPartition, err error) {
	if r := e.reconciler(tp); r != nil {
		r.observeSourceError(err)
	}
}

var _ fetcher.FetchObserver = fetchEvents{}

// SourceHighWatermarks asks the mirror's source, in one ListOffsets, for the high
// watermark (latest offset) of partitions that are in no fetcher (PAUSED), so that a
// describe shows their lag. A partition the source did not answer is absent.
func (mr *Runtime) SourceHighWatermarks(ctx context.Context, tps []fetcher.TopicPartition) (map[fetcher.TopicPartition]int64, error) {
	if len(tps) == 0 {
		return nil, nil
	}
	src, _, err := mr.Sources()
	if err != nil {
		return nil, err
	}
	qs := make([]fetcher.OffsetQuery, len(tps))
	for i, tp := range tps {
		qs[i] = fetcher.OffsetQuery{Topic: tp.Topic, Partition: tp.Partition, CurrentLeaderEpoch: -1, Timestamp: -1}
	}
	rs, err := src.ListOffsets(ctx, qs)
	if err != nil {
		return nil, err
	}
	out := make(map[fetcher.TopicPartition]int64, len(rs))
	for _, r := range rs {
		if r.ErrorCode == 0 && r.Offset >= 0 {
			out[fetcher.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset
		}
	}
	return out, nil
}
