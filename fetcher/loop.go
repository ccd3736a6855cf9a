package fetcher

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
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
	// PartitionMaxBytes bounds each partition's share of a response; default
	// DefaultPartitionMaxBytes.
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
	// Appenders is how many partitions of one response are checked and
	// appended at once, each on its own goroutine (every Log still has one
	// writer); default GOMAXPROCS. 1 appends one partition after another on
	// the loop goroutine.
	Appenders int
	// NewBackOff makes the per-partition retry policy; default exponential
	// from 50 ms to 2 s with no time limit.
	NewBackOff func() backoff.BackOff
	// UnreachableTimeout stops a partition with a *SourceUnreachableError when
	// it had no successful fetch for longer than this (the source down, or
	// answering only errors); 0 retries for ever.
	UnreachableTimeout time.Duration
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.UnreachableTimeout < 0 {
		return fmt.Errorf("fetcher: negative UnreachableTimeout %v", c.UnreachableTimeout)
	}
	if c.PartitionMaxBytes < 0 || c.IdleWait < 0 || c.Appenders < 0 {
		return fmt.Errorf("fetcher: negative PartitionMaxBytes %d, IdleWait %v or Appenders %d", c.PartitionMaxBytes, c.IdleWait, c.Appenders)
	}
	return nil
}

func (c *Config) defaults() {
	if c.PartitionMaxBytes == 0 {
		c.PartitionMaxBytes = DefaultPartitionMaxBytes
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
	if c.Appenders == 0 {
		c.Appenders = runtime.GOMAXPROCS(0)
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
	fs := &flights{byLeader: make(map[int32]*flight), arrived: make(chan *flight, 16), waiting: make(map[int32]bool)}
	defer fs.drain()
	for {
		// 1. Apply adds and removes, once no fetch is in flight: a response
		// is never applied to a partition removed after it was sent.
		f.mu.Lock()
		ops := f.ops
		f.ops = nil
		f.mu.Unlock()
		if len(ops) > 0 {
			fs.drain()
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
		if fs.gen == nil || fs.gen.Err() != nil {
			fs.drain()
			fs.gen, fs.cancel = context.WithCancel(ctx)
			if !f.setCancelQ(fs.cancel) {
				continue // an op is waiting: apply it first
			}
		}
		// 2. Prepare the partitions that are due and not in a fetch, and send
		// one Fetch per source leader that has none in flight.
		now := time.Now()
		var next time.Time
		var leaders []int32
		groups := make(map[int32][]*partState)
		clear(fs.waiting)
		for _, tp := range order {
			ps := parts[tp]
			if ps == nil || ps.inFlight {
				continue
			}
			if now.Before(ps.retryAt) {
				if next.IsZero() || ps.retryAt.Before(next) {
					next = ps.retryAt
				}
				continue
			}
			if !f.prepare(ctx, ps) {
				f.settle(ps, parts)
				if ps.retryAt.After(now) && (next.IsZero() || ps.retryAt.Before(next)) {
					next = ps.retryAt
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
		order = compact(order, parts)
		for _, l := range leaders {
			f.launch(fs, l, groups[l], f.requests(groups[l]))
			fs.allowChain(l) // no answer of l is held
		}
		// 3. Wait for a response, an op or the next retry, and process the
		// response while the next fetch to the same leader is on its way.
		if fl := f.await(ctx, timer, next, fs); fl != nil {
			f.land(ctx, fs, fl, parts)
			order = compact(order, parts)
		}
	}
}

// flights are the loop's fetches in flight, at most one per source leader, so
// a slow or idle broker never holds back the partitions led by the others
// (Kafka runs a replica fetcher per source broker for the same reason). All
// of them run under gen, which Add and Remove cancel.
//
// A fetch that answers with plain data sends the next one to its leader at
// once, from where that answer will leave the logs (a chained fetch), when
// the loop allowed it: the leader's fetches then never wait for the loop to
// append another leader's data. The loop checks every answer against the
// partitions' state before using it, so a wrong guess only costs a refetch.
// A flight may chain only once the loop has appended the answer before it,
// so at most two answers per leader are held at once (one being appended,
// the next arrived or in flight): memory stays bounded by 2 × leaders ×
// the response size.
type flights struct {
	byLeader map[int32]*flight
	arrived  chan *flight
	waiting  map[int32]bool // leaders with ready partitions not in their flight
	gen      context.Context
	cancel   context.CancelFunc
}

// flight is one Fetch in flight for partitions led by one source broker.
type flight struct {
	leader int32
	parts  []*partState
	reqs   []FetchPartition
	// mayChain allows the flight's goroutine to send the next fetch itself.
	// The loop sets it once no earlier answer of the leader is held and no
	// other partition of the leader is waiting to join.
	mayChain atomic.Bool
	// Set by the goroutine before the flight reaches arrived:
	res     []FetchResult
	err     error
	latency time.Duration // of the round trip
	next    *flight       // the chained fetch, already sent
}

// drain cancels every fetch in flight and waits for it; the answers are
// dropped and their partitions fetched again.
func (fs *flights) drain() {
	if fs.cancel != nil {
		fs.cancel()
	}
	for len(fs.byLeader) > 0 {
		fs.arrive(<-fs.arrived)
	}
}

// arrive takes fl off the flights in flight and puts its chained fetch, if
// any, in its place.
func (fs *flights) arrive(fl *flight) {
	delete(fs.byLeader, fl.leader)
	for _, ps := range fl.parts {
		ps.inFlight = false
	}
	if n := fl.next; n != nil {
		fs.own(n)
	}
}

// own records fl as its leader's flight.
func (fs *flights) own(fl *flight) {
	fs.byLeader[fl.leader] = fl
	for _, ps := range fl.parts {
		ps.inFlight = true
	}
}

// allowChain lets the leader's flight in flight, if any, chain its successor
// unless other partitions of the leader wait to join.
func (fs *flights) allowChain(leader int32) {
	if fl := fs.byLeader[leader]; fl != nil {
		fl.mayChain.Store(!fs.waiting[leader])
	}
}

// requests returns the Fetch of each partition from where its log ends.
func (f *Fetcher) requests(ready []*partState) []FetchPartition {
	reqs := make([]FetchPartition, len(ready))
	for i, ps := range ready {
		reqs[i] = FetchPartition{
			Topic: ps.tp.Topic, TopicID: ps.topicID, Partition: ps.tp.Partition,
			FetchOffset: ps.log.LogEndOffset(), LastFetchedEpoch: ps.log.LatestEpoch(),
			CurrentLeaderEpoch: ps.sourceEpoch, MaxBytes: ps.maxBytes,
		}
	}
	return reqs
}

// launch sends reqs for ready (led by leader).
func (f *Fetcher) launch(fs *flights, leader int32, ready []*partState, reqs []FetchPartition) {
	fl := &flight{leader: leader, parts: append([]*partState(nil), ready...), reqs: reqs}
	fs.own(fl)
	go f.fly(fs.gen, fs.arrived, fl)
}

// fly sends fl's Fetch and hands the answer to the loop; when fl may chain
// and the answer is plain data, it creates the chained fetch first and then
// sends it, and so on: one goroutine runs a whole chain, in a loop (its stack
// stays flat however long the chain).
func (f *Fetcher) fly(ctx context.Context, arrived chan<- *flight, fl *flight) {
	for fl != nil {
		sent := time.Now()
		fl.res, fl.err = f.src.Fetch(ctx, fl.reqs)
		fl.latency = time.Since(sent)
		if fl.err == nil && ctx.Err() == nil && fl.mayChain.Load() && len(fl.res) == len(fl.reqs) {
			if spec := speculate(fl.reqs, fl.res); spec != nil {
				fl.next = &flight{leader: fl.leader, parts: fl.parts, reqs: spec}
			}
		}
		next := fl.next // read before the loop owns fl
		arrived <- fl
		// The chained fetch is sent after fl reached the loop, so the loop
		// always sees fl first.
		fl = next
	}
}

// await blocks until a fetch answers (returned), an op is submitted, the
// Fetcher closes or next (a retry time; zero for none) comes.
func (f *Fetcher) await(ctx context.Context, timer *time.Timer, next time.Time, fs *flights) *flight {
	d := time.Hour
	if !next.IsZero() {
		d = max(time.Until(next), 0)
	}
	timer.Reset(d)
	defer func() {
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}()
	select {
	case fl := <-fs.arrived:
		fs.arrive(fl)
		return fl
	case <-ctx.Done():
	case <-f.wake:
	case <-timer.C:
	}
	return nil
}

// land processes one fetch's answer: it keeps the partitions whose request
// is still what they need (a speculative fetch may have guessed wrong, or a
// partition failed meanwhile), sends the next fetch to the same leader from
// where this answer leaves them, then checks, appends and reports.
func (f *Fetcher) land(ctx context.Context, fs *flights, fl *flight, parts map[TopicPartition]*partState) {
	defer fs.allowChain(fl.leader) // fl's answer is no longer held
	if fl.err != nil {
		if ctx.Err() != nil || errors.Is(fl.err, context.Canceled) {
			return // closing, or interrupted by an op
		}
		f.cfg.Logger.Warn("fetch failed", "err", fl.err, "partitions", len(fl.reqs))
		f.observeFetch(fl)
		for _, ps := range fl.parts {
			ps.needInfo = true
			f.partitionError(ps, fl.err)
			ps.lastErr = fl.err
			f.retryLater(ps)
			f.settle(ps, parts)
		}
		return
	}
	f.observeFetch(fl)
	if len(fl.res) != len(fl.reqs) {
		f.cfg.Logger.Error("source answered the wrong number of partitions", "want", len(fl.reqs), "got", len(fl.res))
		for _, ps := range fl.parts {
			f.retryLater(ps)
			f.settle(ps, parts)
		}
		return
	}
	var ready []*partState
	var reqs []FetchPartition
	var res []FetchResult
	for i, ps := range fl.parts {
		if current(ps, fl.reqs[i], parts) {
			ready = append(ready, ps)
			reqs = append(reqs, fl.reqs[i])
			res = append(res, fl.res[i])
		}
	}
	if len(ready) == 0 {
		return
	}
	if fl.next == nil && fs.byLeader[fl.leader] == nil && !fs.waiting[fl.leader] {
		if spec := speculate(reqs, res); spec != nil {
			f.launch(fs, fl.leader, ready, spec)
		}
	}
	// The data of every partition is checked and appended in parallel
	// (each Log still has one writer); errors, events and the other
	// answers are then handled here in fetch order.
	outs := f.appendAll(ready, reqs, res)
	busy := false
	for i, ps := range ready {
		if len(res[i].Records) > 0 || res[i].ErrorCode != CodeNone || res[i].DivergingEpoch != nil {
			busy = true
		}
		f.handle(ctx, ps, reqs[i], res[i], outs[i])
		f.settle(ps, parts)
	}
	if !busy {
		// Nothing came back: a source without long polling (LocalSource)
		// is asked again after IdleWait rather than at once.
		idleUntil := time.Now().Add(f.cfg.IdleWait)
		for _, ps := range ready {
			if ps.retryAt.Before(idleUntil) {
				ps.retryAt = idleUntil
			}
		}
	}
}

// setCancelQ installs the cancel function of the fetches in flight; it
// returns false (and installs nothing) when an op is already waiting.
func (f *Fetcher) setCancelQ(cancel context.CancelFunc) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cancel != nil && len(f.ops) > 0 {
		return false
	}
	f.cancelQ = cancel
	return true
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

// current reports whether r is exactly what ps needs now.
func current(ps *partState, r FetchPartition, parts map[TopicPartition]*partState) bool {
	return ps.log != nil && parts[ps.tp] == ps && !ps.needInfo && !ps.needProbe &&
		ps.log.LogEndOffset() == r.FetchOffset && ps.log.LatestEpoch() == r.LastFetchedEpoch &&
		ps.sourceEpoch == r.CurrentLeaderEpoch && ps.maxBytes == r.MaxBytes
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
			tp: tp, topicID: p.TopicID, log: p.Log, sourceEpoch: epoch.UndefinedEpoch, leader: -1,
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
func (f *Fetcher) settle(ps *partState, parts map[TopicPartition]*partState) {
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

// retryLater schedules the next attempt of ps after its backoff, or fails ps with a
// *SourceUnreachableError when its attempts kept failing for longer than
// Config.UnreachableTimeout.
func (f *Fetcher) retryLater(ps *partState) {
	if f.noteFailure(ps, nil) {
		return
	}
	d := ps.bo.NextBackOff()
	if d == backoff.Stop {
		d = 2 * time.Second
	}
	ps.retryAt = time.Now().Add(d)
}

func (f *Fetcher) succeeded(ps *partState) {
	ps.failingSince, ps.lastErr = time.Time{}, nil
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
			f.partitionError(ps, err)
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
	f.partitionError(ps, &SourceError{TopicPartition: ps.tp, Op: op, Code: code})
	ps.needInfo = true
	f.retryLater(ps)
}

// isData reports whether r carries records to append rather than an error
// or a divergence.
func isData(r FetchResult) bool { return r.ErrorCode == CodeNone && r.DivergingEpoch == nil }

// appendAll runs checkAndAppend for every data answer of res, on up to
// Config.Appenders goroutines at once (the loop goroutine included), and
// returns each partition's outcome. Each partState and Log is touched by
// exactly one goroutine; nothing here reports events or logs.
func (f *Fetcher) appendAll(ready []*partState, reqs []FetchPartition, res []FetchResult) []appendOutcome {
	outs := make([]appendOutcome, len(ready))
	var work []int
	for i := range ready {
		if isData(res[i]) {
			work = append(work, i)
		}
	}
	inParallel(len(work), f.cfg.Appenders, func(k int) {
		i := work[k]
		outs[i] = checkAndAppend(ready[i], reqs[i], res[i])
	})
	return outs
}

// inParallel calls fn(0) … fn(n-1) on up to workers goroutines, the caller's
// among them, and returns when every call has returned.
func inParallel(n, workers int, fn func(int)) {
	if workers <= 1 || n <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			fn(i)
		}
	}
	var wg sync.WaitGroup
	for range min(workers, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
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
			f.partitionError(ps, err)
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

// appendOutcome is what checkAndAppend did with one partition's data.
type appendOutcome struct {
	appended  int64 // bytes appended
	records   int64 // records in the appended batches
	maxTs     int64 // largest MaxTimestamp of the appended batches, -1 for none
	stopErr   error // *CorruptBatchError or *EpochFencingError at the first refused batch
	appendErr error // the Log refused the append
	partial   bool  // nothing whole came back, only the start of a batch
}

// checkAndAppend checks each fetched batch (CRC, header sanity, leader
// epochs) and appends the good ones, up to the first refused one, to the log
// unchanged. It touches only ps and its Log, so partitions run in parallel.
func checkAndAppend(ps *partState, req FetchPartition, r FetchResult) appendOutcome {
	ps.hw = r.HighWatermark
	next := req.FetchOffset
	start, end := -1, 0
	out := appendOutcome{maxTs: -1}
	var recs, maxTs int64 = 0, -1
	it := records.NewIterator(r.Records)
	for it.Next() {
		b := it.Batch()
		pos := it.Pos()
		bstart := pos - len(b)
		if start < 0 && b.NextOffset() <= req.FetchOffset {
			continue // a whole batch below the fetch offset (compacted source)
		}
		if b.BaseOffset() < next {
			if start >= 0 || !startsInsideFirstBatch(ps.log, next) {
				out.stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(),
					Reason: fmt.Sprintf("base offset %d overlaps the expected offset %d", b.BaseOffset(), next)}
				break
			}
			// The source's log start fell inside this batch (retention or DeleteRecords
			// cut mid-batch) and the log is empty at it: start the log at the batch's base
			// offset and keep the whole batch, as Kafka's follower does on an
			// UnexpectedAppendOffsetException. Nothing is dropped: the log held nothing.
			if err := ps.log.TruncateFullyAndStartAt(b.BaseOffset()); err != nil {
				out.appendErr = err
				return out
			}
			next = b.BaseOffset()
		}
		if r.HighWatermark >= 0 && b.BaseOffset() >= r.HighWatermark {
			break // never above the high watermark
		}
		if err := b.VerifyCRC(); err != nil {
			out.stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(), Reason: "CRC mismatch", Err: err}
			break
		}
		if b.LastOffsetDelta() < 0 || b.NumRecords() < 0 {
			out.stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: b.BaseOffset(),
				Reason: fmt.Sprintf("invalid header: lastOffsetDelta %d, records %d", b.LastOffsetDelta(), b.NumRecords())}
			break
		}
		if ple := b.PartitionLeaderEpoch(); ple > ps.log.LeaderEpoch() {
			out.stopErr = &EpochFencingError{TopicPartition: ps.tp, Offset: b.BaseOffset(), BatchEpoch: ple, LocalEpoch: ps.log.LeaderEpoch()}
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
		recs += int64(b.NumRecords())
		maxTs = max(maxTs, b.MaxTimestamp())
	}
	if out.stopErr == nil && it.Err() != nil {
		out.stopErr = &CorruptBatchError{TopicPartition: ps.tp, Offset: next, Reason: "malformed batch", Err: it.Err()}
	}
	if start >= 0 && end > start {
		if err := appendVerified(ps.log, r.Records[start:end]); err != nil {
			out.appendErr = err
			return out
		}
		out.appended = int64(end - start)
		out.records, out.maxTs = recs, maxTs
	}
	out.partial = out.appended == 0 && it.Partial() && len(r.Records) > 0
	return out
}

// startsInsideFirstBatch reports whether l is empty at offset next, so the first fetched
// batch may begin below it.
func startsInsideFirstBatch(l Log, next int64) bool {
	return l.LogStartOffset() == next && l.LogEndOffset() == next
}

// appended reports what checkAndAppend did with ps's data and sets the
// partition's next step.
func (f *Fetcher) appended(ps *partState, req FetchPartition, r FetchResult, out appendOutcome) {
	if out.appendErr != nil {
		f.fail(ps, fmt.Errorf("fetcher: %s append at %d: %w", ps.tp, req.FetchOffset, out.appendErr))
		return
	}
	switch e := out.stopErr.(type) {
	case nil:
	case *EpochFencingError:
		f.cfg.Logger.Warn("epoch fencing: stopping partition", "partition", ps.tp.String(),
			"offset", e.Offset, "batchEpoch", e.BatchEpoch, "localEpoch", e.LocalEpoch)
		f.publish(ps, e)
		f.cfg.Events.OnEpochFencing(ps.tp, e.BatchEpoch, e.LocalEpoch)
		ps.log = nil
		return
	default:
		f.fail(ps, out.stopErr)
		return
	}
	if out.partial {
		// Only a partial batch came back: allow a larger answer next time.
		ps.maxBytes = min(ps.maxBytes*2, 1<<30)
	}
	leo := ps.log.LogEndOffset()
	f.cfg.Events.OnProgress(ps.tp, Progress{
		Lag: max(0, r.HighWatermark-leo), Bytes: out.appended, SourceHighWatermark: r.HighWatermark, LogEndOffset: leo,
		Records: out.records, MaxTimestamp: out.maxTs,
	})
	if ps.needInfo {
		ps.failingSince, ps.lastErr = time.Time{}, nil // data came back: the source answers
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

// observeFetch reports fl's round trip to a FetchObserver.
func (f *Fetcher) observeFetch(fl *flight) {
	o, ok := f.cfg.Events.(FetchObserver)
	if !ok {
		return
	}
	r := FetchRound{Leader: fl.leader, Partitions: len(fl.reqs), Latency: fl.latency, Err: fl.err}
	for _, res := range fl.res {
		if res.ErrorCode != CodeNone {
			r.ErrorCodes = append(r.ErrorCodes, res.ErrorCode)
		}
	}
	o.OnFetch(r)
}

// partitionError reports a retried failure of ps to a FetchObserver.
func (f *Fetcher) partitionError(ps *partState, err error) {
	if o, ok := f.cfg.Events.(FetchObserver); ok {
		o.OnPartitionError(ps.tp, err)
	}
}
