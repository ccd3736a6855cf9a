package fetcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// Errors of the fetch loop.
var (
	// ErrCorruptBatch is the sentinel of every *CorruptBatchError.
	ErrCorruptBatch = errors.New("fetcher: corrupt batch from source")
	// ErrEpochFencing is the sentinel of every *EpochFencingError.
	ErrEpochFencing = errors.New("fetcher: batch leader epoch above destination leader epoch")
	// ErrDiverged is the sentinel of every *DivergedError.
	ErrDiverged = errors.New("fetcher: log diverged from the source")
	// ErrFetcherClosed is returned by a closed Fetcher.
	ErrFetcherClosed = errors.New("fetcher: fetcher closed")
	// ErrDuplicatePartition is returned by Add for a partition already fetched.
	ErrDuplicatePartition = errors.New("fetcher: partition already added")
)

// CorruptBatchError says why and where a fetched batch was refused. It is
// Is(ErrCorruptBatch) and wraps the records error when there is one.
type CorruptBatchError struct {
	TopicPartition
	Offset int64 // base offset of the bad batch, or the expected offset when unknown
	Reason string
	Err    error
}

// Error names the partition, the offset and the reason.
func (e *CorruptBatchError) Error() string {
	return fmt.Sprintf("fetcher: corrupt batch from source %s at offset %d: %s", e.TopicPartition, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorruptBatch.
func (e *CorruptBatchError) Is(target error) bool { return target == ErrCorruptBatch }

// Unwrap returns the underlying error.
func (e *CorruptBatchError) Unwrap() error { return e.Err }

// EpochFencingError reports spec §7.3 rule 1: a batch's PartitionLeaderEpoch is
// above the destination leader epoch. It is Is(ErrEpochFencing).
type EpochFencingError struct {
	TopicPartition
	Offset     int64
	BatchEpoch int32
	LocalEpoch int32
}

// Error names the partition, the batch and both leader epochs.
func (e *EpochFencingError) Error() string {
	return fmt.Sprintf("fetcher: %s batch at offset %d has leader epoch %d above the destination leader epoch %d",
		e.TopicPartition, e.Offset, e.BatchEpoch, e.LocalEpoch)
}

// Is reports whether target is ErrEpochFencing.
func (e *EpochFencingError) Is(target error) bool { return target == ErrEpochFencing }

// DivergedError is the Status.Err of a partition stopped after a divergence
// truncation because Config.StopOnDivergence is set. It is Is(ErrDiverged).
type DivergedError struct {
	TopicPartition
	Divergence  epoch.Divergence
	TruncatedTo int64
}

// Error names the partition, the divergence and the truncation offset.
func (e *DivergedError) Error() string {
	return fmt.Sprintf("fetcher: %s diverged from the source (epoch %d, end offset %d); truncated to %d",
		e.TopicPartition, e.Divergence.Epoch, e.Divergence.EndOffset, e.TruncatedTo)
}

// Is reports whether target is ErrDiverged.
func (e *DivergedError) Is(target error) bool { return target == ErrDiverged }

// Config configures a Fetcher. The zero value is usable with a Source.
type Config struct {
	// PartitionMaxBytes bounds each partition's share of a response; default 8 MiB.
	PartitionMaxBytes int32
	// Events receives partition events; default NopEvents.
	Events Events
	// Logger receives log lines; default NopLogger.
	Logger Logger
	// DivergenceViaOffsetForLeaderEpoch makes the loop probe with
	// OffsetForLeaderEpoch before the first fetch after every leader change,
	// for sources that never return DivergingEpoch. It is also on when the
	// Source implements EpochProber and says so.
	DivergenceViaOffsetForLeaderEpoch bool
	// StopOnDivergence stops a partition right after it truncated for a
	// divergence (its Status.Err is then a *DivergedError), so the reconciler
	// can run ULE_LOG_TRUNCATION before fetching again (spec §7.4 with
	// mirror.support.unclean.leader.election=true). By default the loop
	// truncates and goes on fetching (spec §7.4 rule 2).
	StopOnDivergence bool
	// IdleWait is how long the loop pauses after a fetch that brought no
	// data for any partition (sources without long polling, such as
	// LocalSource, would otherwise spin); default 10 ms.
	IdleWait time.Duration
	// NewBackOff makes the per-partition retry policy; default exponential
	// from 50 ms to 2 s with no time limit.
	NewBackOff func() backoff.BackOff
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.PartitionMaxBytes < 0 || c.IdleWait < 0 {
		return fmt.Errorf("fetcher: negative PartitionMaxBytes %d or IdleWait %v", c.PartitionMaxBytes, c.IdleWait)
	}
	return nil
}

func (c *Config) defaults() {
	if c.PartitionMaxBytes == 0 {
		c.PartitionMaxBytes = 8 << 20
	}
	if c.Events == nil {
		c.Events = NopEvents{}
	}
	if c.Logger == nil {
		c.Logger = NopLogger{}
	}
	if c.IdleWait == 0 {
		c.IdleWait = 10 * time.Millisecond
	}
	if c.NewBackOff == nil {
		c.NewBackOff = func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval = 50 * time.Millisecond
			b.MaxInterval = 2 * time.Second
			b.MaxElapsedTime = 0
			return b
		}
	}
}

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
// fetch state and is the only writer of their Logs; it keeps one
// multi-partition Fetch in flight (a KafkaSource fans it out to one request
// per source broker), sending the next one while the previous response is
// checked and appended, and dropping that early answer if the partitions
// ended somewhere else than it assumed. A host wanting independent sessions
// per source broker runs one Fetcher per broker. Methods are safe for
// concurrent use; Close returns when the goroutines are gone.
type Fetcher struct {
	src    Source
	cfg    Config
	probe  bool
	cancel context.CancelFunc
	done   chan struct{}

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
	needInfo    bool  // metadata refresh before the next fetch
	needProbe   bool  // OffsetForLeaderEpoch probe before the next fetch
	maxBytes    int32
	hw          int64
	bo          backoff.BackOff
	retryAt     time.Time
}

// NewFetcher starts a Fetcher reading from src. Close stops it.
func NewFetcher(src Source, cfg Config) (*Fetcher, error) {
	if src == nil {
		return nil, errors.New("fetcher: nil source")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	probe := cfg.DivergenceViaOffsetForLeaderEpoch
	if p, ok := src.(EpochProber); ok && p.DivergenceViaOffsetForLeaderEpoch() {
		probe = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fetcher{
		src: src, cfg: cfg, probe: probe, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1), status: make(map[TopicPartition]Status),
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
	if f.cancelQ != nil {
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
	return nil
}

func (f *Fetcher) run(ctx context.Context) {
	defer close(f.done)
	parts := make(map[TopicPartition]*partState)
	var order []TopicPartition // deterministic fetch order
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var pf *prefetch // the fetch sent ahead, if any
	defer func() {
		if pf != nil {
			f.endPrefetch(pf)
		}
	}()
	for {
		// 1. Apply adds and removes.
		f.mu.Lock()
		ops := f.ops
		f.ops = nil
		f.mu.Unlock()
		if len(ops) > 0 && pf != nil {
			f.endPrefetch(pf)
			pf = nil
		}
		removed := false
		for _, o := range ops {
			removed = removed || o.add == nil
			o.done <- f.apply(o, parts, &order)
		}
		if removed {
			// once per batch of ops, not per remove: stopping n partitions stays O(n)
			order = compact(order, parts)
		}
		if ctx.Err() != nil {
			f.failPending()
			return
		}
		// 2. Prepare partitions whose backoff has expired.
		now := time.Now()
		var ready []*partState
		var next time.Time
		for _, tp := range order {
			ps := parts[tp]
			if ps == nil {
				continue
			}
			if now.Before(ps.retryAt) {
				if next.IsZero() || ps.retryAt.Before(next) {
					next = ps.retryAt
				}
				continue
			}
			if !f.prepare(ctx, ps) {
				f.settle(ps, parts, &order)
				if ps.retryAt.After(now) && (next.IsZero() || ps.retryAt.Before(next)) {
					next = ps.retryAt
				}
				continue
			}
			ready = append(ready, ps)
		}
		order = compact(order, parts)
		if len(ready) == 0 {
			if pf != nil {
				f.endPrefetch(pf)
				pf = nil
			}
			f.idle(ctx, timer, next)
			continue
		}
		// 3. One fetch for every ready partition: the prefetched one when it
		// asked for exactly what the partitions need now, else a new one.
		var reqs []FetchPartition
		var res []FetchResult
		if pf != nil {
			<-pf.done
			if pf.err == nil && pf.matches(ready) {
				reqs, res = pf.reqs, pf.res
			}
			f.endPrefetch(pf)
			pf = nil
		}
		if res == nil {
			var err error
			reqs, res, err = f.fetch(ctx, ready)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					continue // closing, or interrupted by an op
				}
				f.cfg.Logger.Warn("fetch failed", "err", err, "partitions", len(reqs))
				for _, ps := range ready {
					ps.needInfo = true
					f.retryLater(ps)
				}
				continue
			}
		}
		if len(res) != len(reqs) {
			f.cfg.Logger.Error("source answered the wrong number of partitions", "want", len(reqs), "got", len(res))
			for _, ps := range ready {
				f.retryLater(ps)
			}
			continue
		}
		// While this response is checked and appended, the next fetch (from
		// where this one will leave the logs) is already on its way.
		if spec := speculate(reqs, res); spec != nil {
			pf = f.startPrefetch(ctx, ready, spec)
		}
		busy := false
		for i, ps := range ready {
			if len(res[i].Records) > 0 || res[i].ErrorCode != CodeNone || res[i].DivergingEpoch != nil {
				busy = true
			}
			f.handle(ctx, ps, reqs[i], res[i])
			f.settle(ps, parts, &order)
		}
		order = compact(order, parts)
		if !busy {
			f.idle(ctx, timer, time.Now().Add(f.cfg.IdleWait))
		}
	}
}

// fetch sends one Fetch for ready, interruptible by Add/Remove.
func (f *Fetcher) fetch(ctx context.Context, ready []*partState) ([]FetchPartition, []FetchResult, error) {
	reqs := make([]FetchPartition, len(ready))
	for i, ps := range ready {
		reqs[i] = FetchPartition{
			Topic: ps.tp.Topic, TopicID: ps.topicID, Partition: ps.tp.Partition,
			FetchOffset: ps.log.LogEndOffset(), LastFetchedEpoch: ps.log.LatestEpoch(),
			CurrentLeaderEpoch: ps.sourceEpoch, MaxBytes: ps.maxBytes,
		}
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !f.setCancelQ(cancel) {
		return reqs, nil, context.Canceled
	}
	res, err := f.src.Fetch(fctx, reqs)
	f.setCancelQ(nil)
	return reqs, res, err
}

// setCancelQ installs the cancel function of the fetch in flight; it returns
// false (and installs nothing) when an op is already waiting.
func (f *Fetcher) setCancelQ(cancel context.CancelFunc) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cancel != nil && len(f.ops) > 0 {
		return false
	}
	f.cancelQ = cancel
	return true
}

// prefetch is a Fetch sent before the previous response was appended.
type prefetch struct {
	parts  []*partState
	reqs   []FetchPartition
	res    []FetchResult
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// speculate returns the requests that will follow once res is appended (the
// offset after the last whole batch below the high watermark, the highest
// batch epoch), or nil when res holds no data or anything but plain data.
func speculate(reqs []FetchPartition, res []FetchResult) []FetchPartition {
	out := make([]FetchPartition, len(reqs))
	data := false
	for i := range reqs {
		r := res[i]
		if r.ErrorCode != CodeNone || r.DivergingEpoch != nil {
			return nil
		}
		out[i] = reqs[i]
		it := records.NewIterator(r.Records)
		for it.Next() {
			b := it.Batch()
			if r.HighWatermark >= 0 && b.BaseOffset() >= r.HighWatermark {
				break
			}
			if b.NextOffset() <= out[i].FetchOffset {
				continue
			}
			out[i].FetchOffset = b.NextOffset()
			out[i].LastFetchedEpoch = max(out[i].LastFetchedEpoch, b.PartitionLeaderEpoch())
			data = true
		}
	}
	if !data {
		return nil
	}
	return out
}

func (f *Fetcher) startPrefetch(ctx context.Context, ready []*partState, reqs []FetchPartition) *prefetch {
	fctx, cancel := context.WithCancel(ctx)
	pf := &prefetch{parts: append([]*partState(nil), ready...), reqs: reqs, cancel: cancel, done: make(chan struct{})}
	if !f.setCancelQ(cancel) {
		cancel()
	}
	go func() {
		defer close(pf.done)
		pf.res, pf.err = f.src.Fetch(fctx, reqs)
	}()
	return pf
}

// endPrefetch cancels pf and waits for its goroutine.
func (f *Fetcher) endPrefetch(pf *prefetch) {
	pf.cancel()
	<-pf.done
	f.setCancelQ(nil)
}

// matches reports whether pf asked for exactly what ready needs now.
func (pf *prefetch) matches(ready []*partState) bool {
	if len(ready) != len(pf.parts) {
		return false
	}
	for i, ps := range ready {
		r := pf.reqs[i]
		if ps != pf.parts[i] || ps.log == nil || ps.log.LogEndOffset() != r.FetchOffset ||
			ps.log.LatestEpoch() != r.LastFetchedEpoch || ps.sourceEpoch != r.CurrentLeaderEpoch || ps.maxBytes != r.MaxBytes {
			return false
		}
	}
	return true
}

func compact(order []TopicPartition, parts map[TopicPartition]*partState) []TopicPartition {
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

func (f *Fetcher) idle(ctx context.Context, timer *time.Timer, next time.Time) {
	d := time.Hour
	if !next.IsZero() {
		d = max(time.Until(next), 0)
	}
	timer.Reset(d)
	select {
	case <-ctx.Done():
	case <-f.wake:
	case <-timer.C:
	}
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
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
		// a remove earlier in this batch left a stale entry; drop it before re-adding
		*order = compact(*order, parts)
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
			tp: tp, topicID: p.TopicID, log: p.Log, sourceEpoch: epoch.UndefinedEpoch,
			needInfo: true, needProbe: f.probe, maxBytes: f.cfg.PartitionMaxBytes, hw: -1,
			bo: f.cfg.NewBackOff(),
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
func (f *Fetcher) settle(ps *partState, parts map[TopicPartition]*partState, _ *[]TopicPartition) {
	if ps.log == nil {
		delete(parts, ps.tp)
	}
}

// fail stops ps with err, reports it and logs it.
func (f *Fetcher) fail(ps *partState, err error) {
	f.cfg.Logger.Error("partition failed", "partition", ps.tp.String(), "err", err)
	f.publish(ps, err)
	f.cfg.Events.OnFailed(ps.tp, err)
	ps.log = nil
}

func (f *Fetcher) retryLater(ps *partState) {
	d := ps.bo.NextBackOff()
	if d == backoff.Stop {
		d = 2 * time.Second
	}
	ps.retryAt = time.Now().Add(d)
}

func (f *Fetcher) succeeded(ps *partState) {
	ps.bo.Reset()
	ps.retryAt = time.Time{}
}

// prepare refreshes metadata and runs the OffsetForLeaderEpoch probe when
// needed. It returns false when ps must not be fetched now.
func (f *Fetcher) prepare(ctx context.Context, ps *partState) bool {
	if ps.needInfo {
		info, err := f.src.PartitionInfo(ctx, ps.tp.Topic, ps.tp.Partition, true)
		if err != nil {
			if ctx.Err() == nil {
				f.cfg.Logger.Warn("source metadata unavailable", "partition", ps.tp.String(), "err", err)
			}
			f.retryLater(ps)
			return false
		}
		if info.LeaderEpoch != ps.sourceEpoch && f.probe {
			ps.needProbe = true
		}
		ps.sourceEpoch = info.LeaderEpoch
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

// probeEpoch finds divergence with OffsetForLeaderEpoch as a pre-v12 Kafka
// follower did (AbstractFetcherThread.getOffsetTruncationState). Where the
// source does not know the latest local epoch at all, answering (-1, -1) (a
// Kafka leader whose log never had the epoch, or kfake's gap for old epochs),
// the local latest epoch is dropped and the probe repeated: that can only
// remove data the source will serve again, never keep divergent data. It
// returns false when ps must not be fetched now.
func (f *Fetcher) probeEpoch(ctx context.Context, ps *partState) bool {
	le := ps.log.LatestEpoch()
	if le == epoch.UndefinedEpoch {
		ps.needProbe = false
		return true
	}
	res, err := f.src.OffsetForLeaderEpoch(ctx, []EpochQuery{{
		Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, LeaderEpoch: le,
	}})
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: OffsetForLeaderEpoch returned %d results", ErrProtocol, len(res))
	}
	if err != nil {
		if ctx.Err() == nil {
			f.cfg.Logger.Warn("OffsetForLeaderEpoch failed", "partition", ps.tp.String(), "err", err)
		}
		f.retryLater(ps)
		return false
	}
	r := res[0]
	if r.ErrorCode != CodeNone {
		f.sourceError(ps, "OffsetForLeaderEpoch", r.ErrorCode)
		return false
	}
	leo := ps.log.LogEndOffset()
	var off int64
	if r.EndOffset == epoch.UndefinedOffset || r.LeaderEpoch == epoch.UndefinedEpoch {
		latest, _ := ps.log.Epochs().Latest()
		off = latest.StartOffset
		f.cfg.Logger.Warn("source does not know the latest local epoch; dropping it and probing again",
			"partition", ps.tp.String(), "epoch", le, "truncateTo", off)
	} else {
		off = epoch.FollowerTruncationOffset(ps.log.Epochs(), leo, epoch.Divergence{Epoch: r.LeaderEpoch, EndOffset: r.EndOffset})
	}
	if off >= leo {
		ps.needProbe = false
		return true
	}
	if err := truncateLog(ps.log, off); err != nil {
		f.fail(ps, fmt.Errorf("fetcher: %s truncate to %d: %w", ps.tp, off, err))
		return false
	}
	f.cfg.Logger.Warn("truncated after OffsetForLeaderEpoch", "partition", ps.tp.String(),
		"epoch", r.LeaderEpoch, "endOffset", r.EndOffset, "from", leo, "to", ps.log.LogEndOffset())
	d := epoch.Divergence{Epoch: r.LeaderEpoch, EndOffset: r.EndOffset}
	f.cfg.Events.OnDivergence(ps.tp, d, ps.log.LogEndOffset())
	if f.stopDiverged(ps, d) {
		return false
	}
	// Probe again with the new latest epoch; it ends when nothing changes.
	return f.probeEpoch(ctx, ps)
}

// sourceError handles a partition-level error code.
func (f *Fetcher) sourceError(ps *partState, op string, code int16) {
	if !retriableFetchCode(code) {
		f.cfg.Logger.Warn("source error", "op", op, "partition", ps.tp.String(), "code", code)
	}
	ps.needInfo = true
	f.retryLater(ps)
}

// handle processes one partition's fetch result.
func (f *Fetcher) handle(ctx context.Context, ps *partState, req FetchPartition, r FetchResult) {
	switch {
	case r.ErrorCode == CodeOffsetOutOfRange:
		f.outOfRange(ctx, ps, req.FetchOffset)
	case r.ErrorCode != CodeNone:
		f.sourceError(ps, "Fetch", r.ErrorCode)
	case r.DivergingEpoch != nil:
		f.diverged(ps, *r.DivergingEpoch)
	default:
		f.appendRecords(ps, req, r)
	}
	if ps.log != nil {
		f.publish(ps, nil)
	}
}

func (f *Fetcher) diverged(ps *partState, d epoch.Divergence) {
	leo, le := ps.log.LogEndOffset(), ps.log.LatestEpoch()
	off := epoch.FollowerTruncationOffset(ps.log.Epochs(), leo, d)
	if off < leo {
		if err := truncateLog(ps.log, off); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s truncate to %d: %w", ps.tp, off, err))
			return
		}
	}
	f.cfg.Logger.Warn("diverging epoch from source; truncated", "partition", ps.tp.String(),
		"epoch", d.Epoch, "endOffset", d.EndOffset, "from", leo, "to", ps.log.LogEndOffset())
	f.cfg.Events.OnDivergence(ps.tp, d, ps.log.LogEndOffset())
	if f.stopDiverged(ps, d) {
		return
	}
	if ps.log.LogEndOffset() == leo && ps.log.LatestEpoch() == le {
		// Nothing changed: the next fetch would diverge the same way.
		f.retryLater(ps)
		return
	}
	f.succeeded(ps)
}

// stopDiverged stops ps after a divergence truncation when so configured.
func (f *Fetcher) stopDiverged(ps *partState, d epoch.Divergence) bool {
	if !f.cfg.StopOnDivergence {
		return false
	}
	f.publish(ps, &DivergedError{TopicPartition: ps.tp, Divergence: d, TruncatedTo: ps.log.LogEndOffset()})
	ps.log = nil
	return true
}

// outOfRange follows AbstractFetcherThread.fetchOffsetAndTruncate.
func (f *Fetcher) outOfRange(ctx context.Context, ps *partState, fetchOffset int64) {
	res, err := f.src.ListOffsets(ctx, []OffsetQuery{
		{Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, Timestamp: LatestTimestamp},
		{Topic: ps.tp.Topic, Partition: ps.tp.Partition, CurrentLeaderEpoch: ps.sourceEpoch, Timestamp: EarliestTimestamp},
	})
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("%w: ListOffsets returned %d results", ErrProtocol, len(res))
	}
	if err != nil {
		if ctx.Err() == nil {
			f.cfg.Logger.Warn("ListOffsets failed", "partition", ps.tp.String(), "err", err)
		}
		f.retryLater(ps)
		return
	}
	for _, r := range res {
		if r.ErrorCode != CodeNone {
			f.sourceError(ps, "ListOffsets", r.ErrorCode)
			return
		}
	}
	latest, earliest := res[0].Offset, res[1].Offset
	leo := ps.log.LogEndOffset()
	switch {
	case latest < leo:
		// The source is behind us (unclean election there): keep its end.
		if err := truncateLog(ps.log, latest); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s truncate to %d: %w", ps.tp, latest, err))
			return
		}
		f.cfg.Logger.Warn("source end below destination end; truncated", "partition", ps.tp.String(),
			"from", leo, "to", ps.log.LogEndOffset())
		d := epoch.Divergence{Epoch: epoch.UndefinedEpoch, EndOffset: latest}
		f.cfg.Events.OnDivergence(ps.tp, d, ps.log.LogEndOffset())
		if f.stopDiverged(ps, d) {
			return
		}
		ps.needProbe = f.probe
		f.succeeded(ps)
	case earliest > leo:
		gap := earliest - leo
		if err := ps.log.TruncateFullyAndStartAt(earliest); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s truncate fully at %d: %w", ps.tp, earliest, err))
			return
		}
		f.cfg.Logger.Warn("fetch offset below source log start: offsets were never mirrored",
			"partition", ps.tp.String(), "fetchOffset", fetchOffset, "sourceLogStart", earliest, "gap", gap)
		f.cfg.Events.OnOutOfRange(ps.tp, fetchOffset, earliest, gap)
		f.succeeded(ps)
	default:
		// The offset is inside the source log, so the source did not know
		// the last fetched epoch: find the divergence with the probe.
		ps.needProbe = true
		f.retryLater(ps)
	}
}

// appendRecords checks each fetched batch (CRC, header sanity, leader epochs)
// and appends the good ones to the log unchanged.
func (f *Fetcher) appendRecords(ps *partState, req FetchPartition, r FetchResult) {
	ps.hw = r.HighWatermark
	next := req.FetchOffset
	start, end := -1, 0
	var stopErr error
	it := records.NewIterator(r.Records)
	for it.Next() {
		b := it.Batch()
		pos := it.Pos()
		bstart := pos - len(b)
		if start < 0 && b.NextOffset() <= req.FetchOffset {
			continue // a whole batch below the fetch offset (compacted source)
		}
		if b.BaseOffset() < next {
			stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(),
				Reason: fmt.Sprintf("base offset %d overlaps the expected offset %d", b.BaseOffset(), next)}
			break
		}
		if r.HighWatermark >= 0 && b.BaseOffset() >= r.HighWatermark {
			break // never above the high watermark
		}
		if err := b.VerifyCRC(); err != nil {
			stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(), Reason: "CRC mismatch", Err: err}
			break
		}
		if b.LastOffsetDelta() < 0 || b.NumRecords() < 0 {
			stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(),
				Reason: fmt.Sprintf("invalid header: lastOffsetDelta %d, records %d", b.LastOffsetDelta(), b.NumRecords())}
			break
		}
		if ple := b.PartitionLeaderEpoch(); ple > ps.log.LeaderEpoch() {
			stopErr = &EpochFencingError{TopicPartition: ps.tp, Offset: b.BaseOffset(), BatchEpoch: ple, LocalEpoch: ps.log.LeaderEpoch()}
			break
		} else if ps.sourceEpoch >= 0 && ple > ps.sourceEpoch {
			// Stale source metadata (spec §7.3 rule 3): refresh, then refetch.
			ps.needInfo = true
			break
		}
		if start < 0 {
			start = bstart
		}
		end = pos
		next = b.NextOffset()
	}
	if stopErr == nil && it.Err() != nil {
		stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: next, Reason: "malformed batch", Err: it.Err()}
	}
	var appended int64
	if start >= 0 && end > start {
		if err := appendVerified(ps.log, r.Records[start:end]); err != nil {
			f.fail(ps, fmt.Errorf("fetcher: %s append at %d: %w", ps.tp, req.FetchOffset, err))
			return
		}
		appended = int64(end - start)
	}
	switch e := stopErr.(type) {
	case nil:
	case *EpochFencingError:
		f.cfg.Logger.Warn("epoch fencing: stopping partition", "partition", ps.tp.String(),
			"offset", e.Offset, "batchEpoch", e.BatchEpoch, "localEpoch", e.LocalEpoch)
		f.publish(ps, e)
		f.cfg.Events.OnEpochFencing(ps.tp, e.BatchEpoch, e.LocalEpoch)
		ps.log = nil
		return
	default:
		f.fail(ps, stopErr)
		return
	}
	if appended == 0 && it.Partial() && len(r.Records) > 0 {
		// Only a partial batch came back: allow a larger answer next time.
		ps.maxBytes = min(ps.maxBytes*2, 1<<30)
	}
	leo := ps.log.LogEndOffset()
	f.cfg.Events.OnProgress(ps.tp, Progress{
		Lag: max(0, r.HighWatermark-leo), Bytes: appended, SourceHighWatermark: r.HighWatermark, LogEndOffset: leo,
	})
	if ps.needInfo {
		f.retryLater(ps)
		return
	}
	f.succeeded(ps)
}

// preverifiedAppender is implemented by this package's logs: Append for
// batches whose CRCs the caller has just verified, skipping only that check
// (each batch's CRC is computed once on the mirror path).
type preverifiedAppender interface {
	appendPreverified(batches []byte) error
}

var (
	_ preverifiedAppender = (*FileLog)(nil)
	_ preverifiedAppender = (*MemoryLog)(nil)
)

// appendVerified appends batches the loop has CRC-checked to l. Only this
// package's own log types take the short path (matched by concrete type, so
// a host type embedding one and overriding Append still gets its Append
// called); every other Log gets Append.
func appendVerified(l Log, batches []byte) error {
	switch l := l.(type) {
	case *FileLog:
		return l.appendPreverified(batches)
	case *MemoryLog:
		return l.appendPreverified(batches)
	}
	return l.Append(batches)
}

// truncateLog truncates l as Kafka's UnifiedLog.truncateTo does: a batch that
// contains offset is removed whole (Kafka cuts the segment at the position of
// the batch holding the offset), so the log end becomes that batch's base
// offset and the next fetch re-reads it. Log.Truncate keeps such a batch, which
// would keep divergent records after a truncation inside a batch.
func truncateLog(l Log, offset int64) error {
	if offset < l.LogEndOffset() && offset > l.LogStartOffset() {
		buf, err := l.Read(offset, 1)
		if err != nil {
			return err
		}
		if b, err := records.ParseBatch(buf); err == nil && b.BaseOffset() < offset {
			offset = b.BaseOffset()
		}
	}
	return l.Truncate(offset)
}
