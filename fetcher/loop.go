package fetcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/internal/logsample"
	"github.com/kmirror/kmirror/records"
)

// PartitionSpec is a partition handed to a Fetcher: the source partition and
// the destination Log it is mirrored into. The Fetcher becomes the Log's only
// writer until Remove returns. The Log's LeaderEpoch must already be above the
// source's batch epochs (spec §7.5): a fetched batch with a higher epoch stops
// the partition with an *EpochFencingError (spec §7.3 rule 1).
type PartitionSpec struct {
	Topic     string
	TopicID   records.UUID // optional: looked up in source metadata when zero
	Partition int32
	Log       Log
	// Answered, when set, receives the Unix nanoseconds of every answer of
	// the source that covered the partition, those that carried nothing new
	// (FetchResult.Unchanged, not reported as Events.OnProgress) included:
	// how fresh the partition's source offsets are.
	Answered *atomic.Int64
}

// Status is a snapshot of one partition of a Fetcher.
type Status struct {
	TopicPartition
	FetchOffset         int64
	LastFetchedEpoch    int32
	SourceLeaderEpoch   int32
	SourceHighWatermark int64
	Err                 error // non-nil once the partition failed or was fenced (it is then removed)
}

// Fetcher mirrors a set of source partitions into destination Logs. One
// goroutine (started by NewFetcher, stopped by Close) owns every partition's
// fetch state. It keeps one multi-partition Fetch in flight per source leader
// (PartitionInfo.Leader), each on a goroutine of its own, so a slow broker
// never holds back the others. A leader's next Fetch is sent as soon as its
// previous answer arrives (once the answer before that one is appended), from
// where that answer will leave the logs, and dropped for the partitions that
// ended somewhere else; at most two answers per leader are held in memory. The owner goroutine
// checks and appends each answer, the partitions of one answer in parallel
// (Config.Appenders; each Log still has one writer at a time), and reports
// events in order. Methods are safe for concurrent use; Close returns when
// the goroutines are gone.
type Fetcher struct {
	src    Source
	cfg    Config
	probe  bool
	cancel context.CancelFunc
	done   chan struct{}
	// sessions are the loop's incremental fetch sessions, one per source
	// broker (KIP-227), put in the context of each of its fetches.
	sessions FetchSessions
	// sampled logs the failures of partitions, which a source outage makes
	// together, within a bounded number of lines per second (nil: cfg.Logger).
	sampled *logsample.Sampler

	mu      sync.Mutex // guards the fields below
	ops     []op
	wake    chan struct{}
	closed  bool
	status  map[TopicPartition]Status
	cancelQ context.CancelFunc // cancels the fetch in flight so ops are seen promptly
}

type op struct {
	add    []PartitionSpec
	remove TopicPartition
	done   chan error
}

// partState is one partition's fetch state, owned by the loop goroutine.
type partState struct {
	tp          TopicPartition
	topicID     records.UUID
	log         Log
	sourceEpoch int32 // CurrentLeaderEpoch; -1 unknown
	leader      int32 // source leader the partition is fetched from; -1 unknown
	inFlight    bool  // part of a fetch in flight
	needInfo    bool  // metadata refresh before the next fetch
	needProbe   bool  // OffsetForLeaderEpoch probe before the next fetch
	maxBytes    int32
	hw          int64
	bo          backoff.BackOff
	retryAt     time.Time
	// failingSince is when the current run of failed attempts started (zero
	// after a success); lastErr the last failure of that run.
	failingSince time.Time
	lastErr      error
	// lastOK is when the source last answered this partition (or when it was
	// added): a failing run counts from there, so a request that hung before
	// failing is part of it.
	lastOK time.Time
	// answered is PartitionSpec.Answered (nil when not given).
	answered *atomic.Int64
}

// NewFetcher starts a Fetcher reading from src. Close stops it.
func NewFetcher(src Source, cfg Config) (*Fetcher, error) {
	if src == nil {
		return nil, errors.New("fetcher: nil source")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	probe := cfg.DivergenceViaOffsetForLeaderEpoch
	if p, ok := src.(EpochProber); ok && p.DivergenceViaOffsetForLeaderEpoch() {
		probe = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fetcher{
		src: src, cfg: cfg, probe: probe, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1), status: make(map[TopicPartition]Status),
		sampled: logsample.New(cfg.Logger, failedLogBurst, time.Second),
	}
	go f.run(ctx)
	return f, nil
}

// Add starts mirroring each p at the end of p.Log with LastFetchedEpoch =
// p.Log.LatestEpoch(). It returns once the loop owns the partitions. Adding
// several at once lets their first fetch be one request. On error (a nil Log,
// a partition already present) none of ps is added.
func (f *Fetcher) Add(ps ...PartitionSpec) error {
	if len(ps) == 0 {
		return nil
	}
	for _, p := range ps {
		if p.Log == nil {
			return errors.New("fetcher: nil log")
		}
	}
	return f.submit(op{add: append([]PartitionSpec(nil), ps...)})
}

// Remove stops mirroring topic/partition and returns when the loop will no
// longer write to its Log. Removing an unknown partition is not an error.
func (f *Fetcher) Remove(topic string, partition int32) error {
	return f.submit(op{remove: TopicPartition{topic, partition}})
}

func (f *Fetcher) submit(o op) error {
	o.done = make(chan error, 1)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrFetcherClosed
	}
	f.ops = append(f.ops, o)
	if f.cancelQ != nil && o.add != nil {
		// A new partition joins a fetch at once rather than after the long
		// polls in flight. A remove cancels nothing: the loop drops the
		// partition from its answers (current) and the fetches keep their
		// sessions, which a cancelled fetch resets (the next fetch then names
		// every partition of the broker again).
		f.cancelQ()
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-o.done:
		return err
	case <-f.done:
		return ErrFetcherClosed
	}
}

// Status returns a snapshot of every partition the Fetcher has, including
// partitions that failed (with Err set) until they are removed.
func (f *Fetcher) Status() []Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Status, 0, len(f.status))
	for _, s := range f.status {
		out = append(out, s)
	}
	return out
}

// Close stops the loop and waits for it. The Logs are not closed.
func (f *Fetcher) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		<-f.done
		return ErrFetcherClosed
	}
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	<-f.done
	if c, ok := f.src.(FetchSessionCloser); ok {
		ctx, cancel := context.WithTimeout(context.Background(), sessionCloseTimeout)
		c.CloseFetchSessions(ctx, &f.sessions)
		cancel()
	}
	return nil
}

// sessionCloseTimeout bounds Close's goodbye to the source's fetch sessions.
const sessionCloseTimeout = 2 * time.Second

func (f *Fetcher) run(ctx context.Context) {
	defer close(f.done)
	if f.sampled != nil {
		defer f.sampled.Close()
	}
	parts := make(map[TopicPartition]*partState)
	var order []TopicPartition // deterministic fetch order
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	fs := &flights{byLeader: make(map[int32]*flight), arrived: make(chan *flight, 16), waiting: make(map[int32]bool)}
	defer fs.drain()
	// next is the earliest retry time dispatch left (zero: none); stale says
	// that something since the last dispatch may have made a partition due:
	// an answer, an add, new fetches in flight cancelled. Removes alone make
	// nothing due, so a stop of thousands of partitions, one Remove at a
	// time, does not walk every partition of the loop after each of them.
	var next time.Time
	stale := true
	for {
		// 1. Apply adds and removes. A response is never applied to a
		// partition removed after it was sent: land keeps only the
		// partitions still in parts (current), and an added partition is a
		// new partState.
		var added bool
		order, added = f.applyOps(fs, parts, order)
		stale = stale || added
		if ctx.Err() != nil {
			f.failPending()
			return
		}
		if fs.gen == nil || fs.gen.Err() != nil {
			fs.drain()
			fs.gen, fs.cancel = context.WithCancel(ctx)
			stale = true
			if !f.setCancelQ(fs.cancel) {
				continue // an op is waiting: apply it first
			}
		}
		// 2. Prepare the partitions that are due and send the fetches.
		if stale || (!next.IsZero() && !time.Now().Before(next)) {
			next = f.dispatch(ctx, fs, parts, order)
			order = compact(order, parts)
			stale = false
		}
		// 3. Wait for a response, an op or the next retry, and process the
		// response while the next fetch to the same leader is on its way.
		if fl := f.await(ctx, timer, next, fs); fl != nil {
			f.land(ctx, fs, fl, parts)
			order = compact(order, parts)
			stale = true
		}
	}
}

// applyOps applies the adds and removes submitted since the last call and
// returns the new fetch order. Adds drain the fetches in flight first (Add
// cancelled them), so the new partitions join the next fetch of their leader.
// Removes wait for nothing: a flight that holds a removed partition ends its
// chain (flights.prune), its answer for that partition is dropped, and the
// next fetch to the leader leaves the partition out (so its session forgets
// it). A stop of thousands of partitions therefore costs their fetchers no
// refetch, where a drain per batch of removes reset every session. added
// reports whether any op was an add.
func (f *Fetcher) applyOps(fs *flights, parts map[TopicPartition]*partState, order []TopicPartition) (_ []TopicPartition, added bool) {
	f.mu.Lock()
	ops := f.ops
	f.ops = nil
	f.mu.Unlock()
	for _, o := range ops {
		if o.add != nil {
			fs.drain()
			added = true
			break
		}
	}
	for _, o := range ops {
		if ps := parts[o.remove]; o.add == nil && ps != nil && ps.inFlight {
			fs.prune(ps.leader)
		}
		o.done <- f.apply(o, parts, &order)
	}
	return order, added
}

// dispatch prepares the partitions that are due and not in a fetch, and sends
// one Fetch per source leader that has none in flight. It returns the
// earliest retry time of the partitions not due yet (zero for none).
func (f *Fetcher) dispatch(ctx context.Context, fs *flights, parts map[TopicPartition]*partState, order []TopicPartition) time.Time {
	now := time.Now()
	var next time.Time
	earlier := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	var leaders []int32
	groups := make(map[int32][]*partState)
	clear(fs.waiting)
	for _, tp := range order {
		ps := parts[tp]
		if ps == nil || ps.inFlight {
			continue
		}
		if now.Before(ps.retryAt) {
			earlier(ps.retryAt)
			continue
		}
		if !f.prepare(ctx, ps) {
			f.settle(ps, parts)
			if ps.retryAt.After(now) {
				earlier(ps.retryAt)
			}
			continue
		}
		if fs.byLeader[ps.leader] != nil {
			fs.waiting[ps.leader] = true // joins after the fetch in flight
			continue
		}
		if groups[ps.leader] == nil {
			leaders = append(leaders, ps.leader)
		}
		groups[ps.leader] = append(groups[ps.leader], ps)
	}
	for _, l := range leaders {
		f.launch(fs, l, groups[l], f.requests(groups[l]))
		fs.allowChain(l) // no answer of l is held
	}
	return next
}

// compact drops from order the partitions no longer in parts once they are
// as many as those left. order holds each partition of parts once plus the
// removed ones (dispatch skips those), so it has nothing to drop when it is
// as long as parts: the loop calls it after every dispatch and answer, and a
// walk of 10,000 partitions each time was a seventh of the CPU of a stop of
// 10,000 partitions (BenchmarkStopFailover in mirror). Waiting for the
// removed to be half keeps a stop of n partitions, removed a few at a time,
// O(n) in all.
func compact(order []TopicPartition, parts map[TopicPartition]*partState) []TopicPartition {
	if len(order) <= 2*len(parts) {
		return order
	}
	return compactNow(order, parts)
}

// compactNow drops from order the partitions no longer in parts.
func compactNow(order []TopicPartition, parts map[TopicPartition]*partState) []TopicPartition {
	out := order[:0]
	for _, tp := range order {
		if _, ok := parts[tp]; ok {
			out = append(out, tp)
		}
	}
	return out
}

func (f *Fetcher) failPending() {
	f.mu.Lock()
	ops := f.ops
	f.ops = nil
	f.mu.Unlock()
	for _, o := range ops {
		o.done <- ErrFetcherClosed
	}
}

func (f *Fetcher) apply(o op, parts map[TopicPartition]*partState, order *[]TopicPartition) error {
	if o.add == nil {
		delete(parts, o.remove) // order is compacted by the caller after the batch
		f.mu.Lock()
		delete(f.status, o.remove)
		f.mu.Unlock()
		return nil
	}
	if len(*order) > len(parts) {
		// a remove left a stale entry in order, which an add of the same
		// partition would make a second entry of it: drop them first
		*order = compactNow(*order, parts)
	}
	seen := make(map[TopicPartition]bool, len(o.add))
	for _, p := range o.add {
		tp := TopicPartition{p.Topic, p.Partition}
		if _, ok := parts[tp]; ok || seen[tp] {
			return fmt.Errorf("%w: %s", ErrDuplicatePartition, tp)
		}
		seen[tp] = true
	}
	for _, p := range o.add {
		tp := TopicPartition{p.Topic, p.Partition}
		ps := &partState{
			tp: tp, topicID: p.TopicID, log: p.Log, sourceEpoch: epoch.UndefinedEpoch, leader: -1,
			needInfo: true, needProbe: f.probe, maxBytes: f.cfg.PartitionMaxBytes, hw: -1,
			bo: f.cfg.NewBackOff(), lastOK: time.Now(), answered: p.Answered,
		}
		parts[tp] = ps
		*order = append(*order, tp)
		f.publish(ps, nil)
	}
	return nil
}

// publish records ps in the status map.
func (f *Fetcher) publish(ps *partState, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[ps.tp] = Status{
		TopicPartition: ps.tp, FetchOffset: ps.log.LogEndOffset(), LastFetchedEpoch: ps.log.LatestEpoch(),
		SourceLeaderEpoch: ps.sourceEpoch, SourceHighWatermark: ps.hw, Err: err,
	}
}

// settle removes a partition whose state says it is done.
func (f *Fetcher) settle(ps *partState, parts map[TopicPartition]*partState) {
	if ps.log == nil && parts[ps.tp] == ps {
		delete(parts, ps.tp)
	}
}

// failedLogBurst is how many "partition failed" lines a Fetcher logs per
// second before it folds the rest into a summary line.
const failedLogBurst = 10

// fail stops ps with err, reports it and logs it.
func (f *Fetcher) fail(ps *partState, err error) {
	if f.sampled != nil {
		f.sampled.Log(context.Background(), slog.LevelError, "partition failed", "partition failed", "partition", ps.tp.String(), "err", err)
	} else {
		f.cfg.Logger.Error("partition failed", "partition", ps.tp.String(), "err", err)
	}
	f.publish(ps, err)
	f.cfg.Events.OnFailed(ps.tp, err)
	ps.log = nil
}

// retryLater schedules the next attempt of ps after its backoff, or fails ps with a
// *SourceUnreachableError when its attempts kept failing for longer than
// Config.UnreachableTimeout.
func (f *Fetcher) retryLater(ps *partState) {
	if f.noteFailure(ps, nil) {
		return
	}
	d := ps.bo.NextBackOff()
	if d == backoff.Stop {
		d = defaultBackOffMax
	}
	ps.retryAt = time.Now().Add(d)
}

func (f *Fetcher) succeeded(ps *partState) {
	ps.failingSince, ps.lastErr, ps.lastOK = time.Time{}, nil, time.Now()
	ps.bo.Reset()
	ps.retryAt = time.Time{}
	if ps.answered != nil {
		ps.answered.Store(ps.lastOK.UnixNano())
	}
}

// quiet reports whether r, an answer for ps, only says that nothing moved
// while ps is healthy: the session did not name it (FetchResult.Unchanged),
// its high watermark is the one the loop knows, and ps is neither failing
// nor waiting for metadata or a probe. Such an answer needs no
// append, no event and no status change, only its time (land): an idle
// site's answers then cost what changed, not every partition of a session.
func quiet(ps *partState, r FetchResult) bool {
	return r.Unchanged && r.ErrorCode == CodeNone && r.DivergingEpoch == nil && len(r.Records) == 0 &&
		r.HighWatermark == ps.hw && ps.log != nil && !ps.needInfo && !ps.needProbe &&
		ps.failingSince.IsZero() && ps.lastErr == nil
}

// prepare refreshes metadata and runs the OffsetForLeaderEpoch probe when
// needed. It returns false when ps must not be fetched now.
func (f *Fetcher) prepare(ctx context.Context, ps *partState) bool {
	if ps.needInfo {
		qctx, cancel := f.requestContext(ctx)
		info, err := f.src.PartitionInfo(qctx, ps.tp.Topic, ps.tp.Partition, true)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				f.cfg.Logger.Warn("source metadata unavailable", "partition", ps.tp.String(), "err", err)
				f.partitionError(ps, err)
			}
			ps.lastErr = err
			f.retryLater(ps)
			return false
		}
		if info.LeaderEpoch != ps.sourceEpoch && f.probe {
			ps.needProbe = true
		}
		ps.sourceEpoch = info.LeaderEpoch
		ps.leader = info.Leader
		if ps.topicID == (records.UUID{}) {
			ps.topicID = info.TopicID
		}
		ps.needInfo = false
	}
	if ps.needProbe {
		if !f.probeEpoch(ctx, ps) {
			return false
		}
	}
	return ps.log != nil
}

// sourceError handles a partition-level error code.
func (f *Fetcher) sourceError(ps *partState, op string, code int16) {
	if !retriableFetchCode(code) {
		f.cfg.Logger.Warn("source error", "op", op, "partition", ps.tp.String(), "code", code)
	}
	f.partitionError(ps, &SourceError{TopicPartition: ps.tp, Op: op, Code: code})
	ps.needInfo = true
	f.retryLater(ps)
}

// handle processes one partition's fetch result; out is what appendAll did
// with a data answer.
func (f *Fetcher) handle(ctx context.Context, ps *partState, req FetchPartition, r FetchResult, out appendOutcome) {
	switch {
	case r.ErrorCode == CodeOffsetOutOfRange:
		f.outOfRange(ctx, ps, req.FetchOffset)
	case r.ErrorCode != CodeNone:
		f.sourceError(ps, "Fetch", r.ErrorCode)
	case r.DivergingEpoch != nil:
		f.diverged(ps, *r.DivergingEpoch)
	default:
		f.appended(ps, req, r, out)
	}
	if ps.log != nil {
		f.publish(ps, nil)
	}
}

// partitionError reports a retried failure of ps to a FetchObserver.
func (f *Fetcher) partitionError(ps *partState, err error) {
	if o, ok := f.cfg.Events.(FetchObserver); ok {
		o.OnPartitionError(ps.tp, err)
	}
}
