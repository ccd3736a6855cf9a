package fetcher

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/records"
)

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
	// pruned (loop-owned) is set once a partition of parts was removed: the
	// flight and a successor it already chained may chain no more.
	pruned bool
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
		if fl.pruned {
			n.pruned = true
			n.mayChain.Store(false)
		}
		fs.own(n)
	}
}

// prune ends the chain of leader's flight in flight, which holds a partition
// just removed: once its answer (and that of a successor it chained already)
// is in, the loop sends the leader a fetch of its current partitions.
func (fs *flights) prune(leader int32) {
	if fl := fs.byLeader[leader]; fl != nil {
		fl.pruned = true
		fl.mayChain.Store(false)
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
		fl.mayChain.Store(!fs.waiting[leader] && !fl.pruned)
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
		fctx, cancel := f.requestContext(ctx)
		fl.res, fl.err = f.src.Fetch(WithFetchSessions(fctx, &f.sessions), fl.reqs)
		cancel()
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
			if parts[ps.tp] != ps {
				continue // removed since: no event after Remove returned
			}
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
			if parts[ps.tp] == ps {
				f.retryLater(ps)
				f.settle(ps, parts)
			}
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
	// Partitions answered unchanged while healthy only note the answer's
	// time (quiet); the others are handled.
	now, n := time.Now(), 0
	for i, ps := range ready {
		if quiet(ps, res[i]) {
			ps.lastOK = now
			if ps.answered != nil {
				ps.answered.Store(now.UnixNano())
			}
			continue
		}
		ready[n], reqs[n], res[n] = ps, reqs[i], res[i]
		n++
	}
	if n == 0 {
		return
	}
	ready, reqs, res = ready[:n], reqs[:n], res[:n]
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
