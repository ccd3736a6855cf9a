package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/sync/errgroup"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// ErrMirrorLoop is wrapped by the failure of a PREPARING partition whose topic is still
// mirrored, in the other direction, by a mirror on the source cluster (spec §6.3 step 3).
var ErrMirrorLoop = errors.New("mirror: mirror loop")

// reconciler drives the state machine of one mirror partition. Its turns (turn, run by
// the engine's scheduler on one worker at a time) own the partition's actual state: a
// turn is queued by desired-state changes (kick), fetcher events (queued in pending),
// retry timers and the source coming back; between turns the partition holds no
// goroutine. Each step reads the actual state from the
// coordinator (raising the highest-seen leader epoch to the log's), picks the next state
// (statemachine.Transition for an event, statemachine.Next for the desired state),
// writes it fenced with (LeaderEpoch, StateEpoch) and, only once the write is durable,
// carries out the state's actions in Phase order (the lanes of a phase in parallel),
// then feeds their completion back as the next event.
type Partition struct {
	e         *Engine
	mr        *Runtime
	mirror    string
	topic     string
	topicID   records.UUID
	partition int32
	log       fetcher.Log // set by run before the first step (openLog); nil until then
	logReady  atomic.Bool // log is set: readers on other goroutines may use it

	prev     *Partition // the previous owner of the partition, stopping; waited for
	ctx      context.Context
	cancelFn context.CancelFunc
	done     chan struct{} // closed when the partition has ended (end)
	sched    atomic.Int32  // schedIdle, schedQueued, … (sched.go)

	retryFired atomic.Uint64 // generation of the retry timer that fired (schedule)
	backFired  atomic.Bool   // the mirror's source answered again (retryGate.sourceBack)

	mu      sync.Mutex // guards pending and stale
	pending []statemachine.Event
	stale   bool // re-read the actual state before the next step

	// Published for readers (describe, WaitForStates).
	pubState  atomic.Int32
	pubReason atomic.Pointer[string]
	pubRetry  atomic.Int32 // RetryAttempt, -1 non-retryable
	pubPrev   atomic.Int32 // PreviousState
	srcHW     atomic.Int64
	health    partitionHealth   // source health, lag and metrics hooks (health.go)
	fid       partitionFidelity // fidelity check and last source end (fidelity.go)

	recoverReq atomic.Bool // RecoverMirrorTopics asked for a restart (retry.go)
	healthyReq atomic.Bool // a fetch succeeded after retries (retry.go)

	// Owned by the turns (one at a time).
	started      bool                        // the previous owner has stopped and the log is open
	openBO       *backoff.ExponentialBackOff // retries of a log that does not open (openLog)
	openFailed   bool                        // FAILED was written for a log that does not open
	known        bool
	state        statemachine.State
	stateEpoch   int32
	asserted     bool
	bumped       int32
	retryAt      *time.Timer // fires a turn after schedule's delay
	retryGen     uint64      // generation of the armed timer; retryFired catches up when it fires
	retryArmed   bool        // a retry timer is armed and has not fired into a turn yet
	backArmed    bool        // waiting for the mirror's source to come back (retryGate.waitBack)
	retryBO      time.Duration
	attempts     int  // automatic FAILED retries so far (RetryAttempt)
	nonRetryable bool // the FAILED state is not retried (RetryAttempt -1)
	// prepFrom is the state the partition entered PREPARING from (for FAILED, the state
	// before it; PREPARING after a restart in it): whether its log may still hold this
	// site's writes (guardsLocalWrites).
	prepFrom      statemachine.State
	prevState     statemachine.State // PreviousState: the state before FAILED
	retryEvent    statemachine.Event // delivered when the retry timer fires
	pendingReason string             // failure reason of the last write, published after act
	lme           int32              // stored LastMirrorEpoch, as last read or written
	lmo           int64              // stored LastMirrorOffset
	stopProg      stopProgress       // of the STOPPING whose actions run (see readStopProgress)
	acting        statemachine.State // the state whose entry actions run (act)
	failCause     error              // typed cause of the last FAILED write (nil after a restart)
}

// newPartition makes the reconciler of one partition; run opens its log.
func newPartition(e *Engine, mr *Runtime, topic string, id records.UUID, partition int32) *Partition {
	ctx, cancel := context.WithCancel(e.ctx)
	r := &Partition{e: e, mr: mr, mirror: mr.name, topic: topic, topicID: id, partition: partition,
		ctx: ctx, cancelFn: cancel, done: make(chan struct{}), state: statemachine.Unknown}
	r.pubState.Store(int32(statemachine.Unknown))
	r.pubPrev.Store(int32(statemachine.Unknown))
	r.prevState = statemachine.Unknown
	r.prepFrom = statemachine.Preparing // until a transition says otherwise: guarded
	r.srcHW.Store(-1)
	r.health.init()
	r.fid.init()
	return r
}

// kick queues a turn to re-evaluate the desired state and handle what is pending; it
// never blocks. A kick while a turn runs makes it run once more.
func (r *Partition) kick() { r.e.sched.kick(r) }

// schedState implements turner.
func (r *Partition) schedState() *atomic.Int32 { return &r.sched }

// start makes the partition run: at once, or once its previous owner has stopped.
func (r *Partition) start() {
	if r.prev == nil {
		r.kick()
		return
	}
	// A goroutine only while an owner change is under way (the old owner's turns
	// end at once once cancelled).
	prev := r.prev
	r.e.wg.Add(1)
	go func() {
		defer r.e.wg.Done()
		select {
		case <-prev.done:
		case <-r.ctx.Done():
		}
		r.kick()
	}()
}

// push queues an event for the turns; it never blocks.
func (r *Partition) push(ev statemachine.Event) {
	r.mu.Lock()
	r.pending = append(r.pending, ev)
	r.mu.Unlock()
	r.kick()
}

// Invalidate makes the next step re-read the actual state (someone else wrote it).
func (r *Partition) Invalidate() {
	r.mu.Lock()
	r.stale = true
	r.mu.Unlock()
	r.kick()
}

// cancel stops the partition without waiting: its next turn ends it.
func (r *Partition) cancel() {
	r.cancelFn()
	r.kick()
}

// stop stops the partition and waits until it has ended.
func (r *Partition) stop() {
	r.cancel()
	<-r.done
}

// Mirror is the name of the mirror the reconciler belongs to.
func (r *Partition) Mirror() string { return r.mirror }

// Current returns the last published state and failure reason.
func (r *Partition) Current() (statemachine.State, string) {
	s := statemachine.State(r.pubState.Load()) // first: publish stores the reason before the state
	var reason string
	if p := r.pubReason.Load(); p != nil {
		reason = *p
	}
	return s, reason
}

// Offsets returns the source high watermark of the last fetch (-1 when not mirroring)
// and the destination log end offset (-1 while the log is not open).
func (r *Partition) Offsets() (int64, int64) {
	if !r.logReady.Load() {
		return r.srcHW.Load(), -1
	}
	return r.srcHW.Load(), r.log.LogEndOffset()
}

func (r *Partition) onEpochFencing(batchEpoch, localEpoch int32) {
	r.push(statemachine.EpochExceeded{BatchEpoch: batchEpoch, LocalEpoch: localEpoch})
}

func (r *Partition) onFetchFailed(err error) {
	if errors.Is(err, fetcher.ErrEpochFencing) || errors.Is(err, fetcher.ErrDiverged) {
		return // reported by OnEpochFencing / OnDivergence
	}
	r.push(statemachine.Error{Reason: err.Error(), Cause: r.storageCause("fetch and append", err)})
}

// turn is one run of the partition on a scheduler worker: it waits for nothing, opens
// the log the first time, delivers what fired since the last turn (the retry timer, the
// source's return) and steps until nothing is left to do. It reports whether the
// partition has ended (cancelled, or its destination closed); the worker then calls end.
func (r *Partition) turn() (ended bool) {
	if r.ctx.Err() != nil {
		return true
	}
	if !r.started {
		if r.prev != nil {
			select {
			case <-r.prev.done:
				r.prev = nil
			default:
				return false // start kicks again once it has stopped
			}
		}
		switch r.openLog() {
		case logOpen:
			r.started = true
		case logRetry:
			return false // the retry timer queues the next turn
		case logGone:
			return true
		}
	}
	if r.backArmed && r.backFired.Swap(false) {
		r.backArmed = false
		r.sourceIsBack()
	}
	if r.retryArmed && r.retryFired.Load() == r.retryGen {
		r.retryArmed, r.backArmed = false, false
		if ev := r.retryEvent; ev != nil {
			r.retryEvent = nil
			r.push(ev)
		}
	}
	r.step()
	return r.ctx.Err() != nil
}

// end releases what the partition holds once its last turn ran: the retry timer, its
// metrics; done is closed and the engine counts it out.
func (r *Partition) end() {
	if r.retryAt != nil {
		r.retryAt.Stop()
	}
	r.observeGone()
	r.mr.gate.forget(r)
	close(r.done)
	r.e.wg.Done()
}

// schedule arms the retry timer: a turn after d, in which the retry is delivered
// (retryEvent) unless the timer was armed again since.
func (r *Partition) schedule(d time.Duration) {
	if r.retryAt != nil {
		r.retryAt.Stop()
	}
	r.retryGen++
	gen := r.retryGen
	r.retryArmed = true
	r.retryAt = time.AfterFunc(d, func() {
		r.retryFired.Store(gen)
		r.kick()
	})
}

// disarmRetry forgets the armed retry (a trace test delivers it by hand).
func (r *Partition) disarmRetry() {
	if r.retryAt != nil {
		r.retryAt.Stop()
	}
	r.retryArmed = false
}

// transientRetry schedules a retry after a coordinator problem, with exponential
// backoff from 10 ms to 1 s.
func (r *Partition) transientRetry() {
	if r.retryBO == 0 {
		r.retryBO = 10 * time.Millisecond
	} else {
		r.retryBO = min(2*r.retryBO, time.Second)
	}
	r.schedule(r.retryBO)
}

func (r *Partition) pop() statemachine.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		return nil
	}
	ev := r.pending[0]
	r.pending = r.pending[1:]
	return ev
}

func (r *Partition) pushFront(ev statemachine.Event) {
	r.mu.Lock()
	r.pending = append([]statemachine.Event{ev}, r.pending...)
	r.mu.Unlock()
}

func (r *Partition) takeStale() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stale
	r.stale = false
	return s
}

// writeOutcome classifies a WriteMirrorStates answer.
type writeOutcome int

const (
	writeOK      writeOutcome = iota
	writeFenced               // FENCED_* or invalid move: re-read, retry once
	writeRetry                // coordinator unavailable: retry later
	writeAborted              // context cancelled
)

// step runs transitions until there is nothing left to do.
func (r *Partition) step() {
	fenceRetried := false
	for r.ctx.Err() == nil {
		if !r.known || r.takeStale() {
			if !r.read() {
				return
			}
		}
		r.resetRetries()
		ev := r.pop()
		if ev == nil {
			ev = r.tieredStorageCheck()
		}
		if !r.applyRecover(ev) {
			continue // a stale automatic retry of a non-retryable failure
		}
		to, acts, reassert, ok := r.decide(ev)
		if !ok {
			if ev != nil {
				continue
			}
			return
		}
		resume := reassert || r.state == statemachine.Failed // a STOPPING that may have run before
		if reassert {
			if err := r.reassertReadOnly(); err != nil {
				r.pushFront(statemachine.Error{Reason: fmt.Sprintf("%s: %v", r.state, err), Cause: r.storageCause("set read-only", err)})
				continue
			}
		}
		if !reassert {
			switch r.write(to, ev) {
			case writeOK:
			case writeFenced:
				r.known = false
				if fenceRetried {
					r.e.log.Warn("mirror: partition state write fenced twice; another owner holds it",
						"mirror", r.mirror, "topic", r.topic, "partition", r.partition)
					return
				}
				fenceRetried = true
				if ev != nil {
					r.pushFront(ev)
				}
				continue
			case writeRetry:
				r.known = false
				if ev != nil {
					r.pushFront(ev)
				}
				r.transientRetry()
				return
			case writeAborted:
				return
			}
		}
		r.retryBO = 0
		next := r.act(to, acts, resume)
		r.asserted = true // this owner has run the current state's actions
		if !reassert {
			// Published once the entry actions ran: a waiter for STOPPED finds the
			// partition writable.
			r.publish(r.state, r.pendingReason)
		}
		if next != nil {
			r.pushFront(next)
		}
	}
}

// decide returns the next state and its actions. reassert is true when the state does
// not change and only its actions are re-run (after gaining leadership); ok is false when
// there is nothing to do.
func (r *Partition) decide(ev statemachine.Event) (to statemachine.State, acts []statemachine.Action, reassert, ok bool) {
	if ex, stale := ev.(statemachine.EpochExceeded); stale && ex.BatchEpoch <= r.log.LeaderEpoch() {
		// From an earlier fetcher incarnation: the leader epoch is already above it.
		return r.state, nil, false, false
	}
	if ev != nil {
		to, acts, err := statemachine.Transition(r.state, ev)
		if err != nil {
			r.e.log.Debug("mirror: event ignored", "mirror", r.mirror, "topic", r.topic, "partition", r.partition,
				"state", r.state, "event", ev.String(), "err", err)
			return r.state, nil, false, false
		}
		return to, acts, false, true
	}
	ts, found := r.e.ctrl.Topic(r.topic)
	if !found || ts.Mirror != r.mirror || ts.TopicID != r.topicID {
		return r.state, nil, false, false
	}
	latest := r.log.LatestEpoch()
	mode := statemachine.StopAbortOpenTxns
	if cfg, err := r.mr.config(); err == nil {
		mode = cfg.StopMode
	}
	to, acts, err := statemachine.Next(ts.Desired, r.state, latest, mode)
	if err != nil {
		r.e.log.Error("mirror: no transition", "mirror", r.mirror, "topic", r.topic, "partition", r.partition, "err", err)
		return r.state, nil, false, false
	}
	if to != r.state {
		return to, acts, false, true
	}
	if r.state == statemachine.Failed && ts.Desired == statemachine.DesiredMirroring {
		r.maybeScheduleFailedRetry()
	}
	if r.asserted {
		return r.state, nil, false, false
	}
	r.asserted = true
	to, acts, err = statemachine.Transition(r.state, statemachine.LeaderGained{LatestLocalEpoch: latest, StopMode: mode})
	if err != nil || len(acts) == 0 {
		return r.state, nil, false, false
	}
	if to == statemachine.Failed {
		// Keep the stored reason: re-run only the cleanup.
		acts = []statemachine.Action{statemachine.StopFetcher{}}
	}
	return to, acts, true, true
}

// read loads the actual state from the coordinator, raising the highest-seen leader
// epoch to the log's leader epoch. It returns false when the step must stop (a retry is
// scheduled when the coordinator was unavailable).
func (r *Partition) read() bool {
	for attempt := 0; ; attempt++ {
		res, err := r.mr.batch.read(r.ctx, coordinator.ReadPartition{TopicID: r.topicID, Partition: r.partition, LeaderEpoch: r.leaderEpoch()})
		if err != nil {
			if r.ctx.Err() == nil {
				r.transientRetry()
			}
			return false
		}
		switch res.ErrorCode {
		case admin.CodeNone:
			r.state, r.stateEpoch, r.known = res.State, res.StateEpoch, true
			r.lme, r.lmo = res.LastMirrorEpoch, res.LastMirrorOffset
			r.attempts, r.nonRetryable = max(0, int(res.RetryAttempt)), res.RetryAttempt == records.NonRetryable
			r.prevState = res.PreviousState
			reason := ""
			if res.ErrorMessage != nil {
				reason = *res.ErrorMessage
			}
			r.publish(res.State, reason)
			return true
		case admin.CodeCoordinatorLoadInProgress:
			if attempt == 0 {
				p := r.e.coord.PartitionFor(r.mirror, r.topicID, r.partition)
				if err := r.e.coord.WaitLoaded(r.ctx, p); err == nil {
					continue
				}
			}
		}
		r.transientRetry()
		return false
	}
}

// write stores state to, fenced with the log's leader epoch and the last read state
// epoch. ev is the event that caused the move (its reason is stored for FAILED).
func (r *Partition) write(to statemachine.State, ev statemachine.Event) writeOutcome {
	wp := coordinator.WritePartition{TopicID: r.topicID, Partition: r.partition, State: to,
		LeaderEpoch: r.leaderEpoch(), StateEpoch: r.stateEpoch, LastMirrorEpoch: epoch.UndefinedEpoch, LastMirrorOffset: -1}
	reason := ""
	var cause error
	if e, ok := ev.(statemachine.Error); ok && to == statemachine.Failed {
		reason, cause = e.Reason, e.Cause
		wp.ErrorMessage = &reason
	}
	wasNonRetryable := r.nonRetryable
	wp.RetryAttempt = r.retryAttemptFor(to, cause)
	res, err := r.mr.batch.write(r.ctx, wp)
	if err != nil {
		if r.ctx.Err() != nil {
			return writeAborted
		}
		return writeRetry
	}
	switch res.ErrorCode {
	case admin.CodeNone:
	case admin.CodeFencedLeaderEpoch, admin.CodeFencedStateEpoch, admin.CodeInvalidClusterMirrorStates:
		r.e.log.Info("mirror: partition state write refused; re-reading", "mirror", r.mirror, "topic", r.topic,
			"partition", r.partition, "to", to, "code", res.ErrorCode.String())
		return writeFenced
	default:
		r.nonRetryable = wasNonRetryable
		return writeRetry
	}
	from := r.state
	if to == statemachine.Preparing {
		r.prepFrom = from
		if from == statemachine.Failed {
			r.prepFrom = r.prevState
		}
	}
	switch {
	case to != statemachine.Failed:
		r.prevState = statemachine.Unknown
	case from != statemachine.Failed:
		r.prevState = from
	}
	r.state, r.stateEpoch = to, res.StateEpoch
	r.pendingReason = reason
	if to == statemachine.Failed && cause != nil {
		r.failCause = cause
	}
	if from != to {
		r.observeTransition(from, to)
		r.e.events(StateChange{Mirror: r.mirror, Topic: r.topic, Partition: r.partition, From: from, To: to, Reason: reason, Cause: cause})
		if to == statemachine.Failed {
			r.e.sampled.Log(r.ctx, slog.LevelWarn, "failed/"+r.mirror, "mirror: partition FAILED", "mirror", r.mirror, "topic", r.topic, "partition", r.partition, "reason", reason)
		} else {
			r.e.log.Debug("mirror: partition state", "mirror", r.mirror, "topic", r.topic, "partition", r.partition, "from", from, "to", to)
		}
	}
	return writeOK
}

// publish makes the state visible to readers and wakes waiters.
func (r *Partition) publish(s statemachine.State, reason string) {
	ra := int32(r.attempts)
	if r.nonRetryable {
		ra = int32(records.NonRetryable)
	}
	r.pubRetry.Store(ra)
	r.pubPrev.Store(int32(r.prevState))
	r.pubReason.Store(&reason) // before the state: a reader that sees s sees its reason
	r.pubState.Store(int32(s))
	r.observeState(s)
	r.e.notifyChange()
}

// act carries out the actions of entering state to and returns the event that reports
// their completion (nil for steady states), or an Error event. resume is true when an
// earlier run of the same STOPPING may have done some of its steps: the state was already
// STOPPING (a restart or a leader change) or the stop failed and is retried from FAILED.
// A resumed STOPPING skips the steps its earlier run finished (readStopProgress).
func (r *Partition) act(to statemachine.State, acts []statemachine.Action, resume bool) statemachine.Event {
	r.stopProg = stopProgress{}
	r.acting = to
	if to == statemachine.Stopping && resume {
		p, err := r.readStopProgress()
		if err != nil {
			return statemachine.Error{Reason: fmt.Sprintf("%s: %v", to, err), Cause: r.storageCause(to.String(), err)}
		}
		r.stopProg = p
	}
	for _, phase := range statemachine.Phases(acts) {
		var err error
		if len(phase) == 1 {
			err = r.lane(phase[0])
		} else {
			var g errgroup.Group
			for _, lane := range phase {
				g.Go(func() error { return r.lane(lane) })
			}
			err = g.Wait()
		}
		if r.ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if to == statemachine.Failed {
				r.e.log.Warn("mirror: cleanup of a FAILED partition", "mirror", r.mirror, "topic", r.topic, "partition", r.partition, "err", err)
				continue
			}
			return statemachine.Error{Reason: fmt.Sprintf("%s: %v", to, err), Cause: r.storageCause(to.String(), err)}
		}
	}
	switch to {
	case statemachine.Preparing:
		return statemachine.TruncationDone{}
	case statemachine.EpochFencing:
		return statemachine.EpochBumped{NewEpoch: r.bumped}
	case statemachine.ULELogTruncation:
		return statemachine.ReplicasConverged{}
	case statemachine.Pausing:
		return statemachine.FetcherRemoved{}
	case statemachine.Stopping:
		return statemachine.StopTasksDone{}
	}
	return nil
}

// lane runs the actions of one lane in order.
func (r *Partition) lane(acts []statemachine.Action) error {
	for _, a := range acts {
		if err := r.do(a); err != nil {
			return err
		}
	}
	return nil
}

// do carries out one action.
func (r *Partition) do(a statemachine.Action) error {
	switch a := a.(type) {
	case statemachine.StartFetcher:
		return r.startFetcher()
	case statemachine.StopFetcher:
		r.srcHW.Store(-1)
		defer r.fetcherStopped() // again once Remove returned: no late progress event
		return r.removeFromFetchers(nil)
	case statemachine.FindLMEAndTruncate:
		defer r.fidelityTruncated()
		return r.findLMEAndTruncate()
	case statemachine.Truncate:
		if a.Offset >= 0 && a.Offset < r.log.LogEndOffset() {
			defer r.fidelityTruncated()
			return r.log.Truncate(a.Offset)
		}
		return nil
	case statemachine.TruncateToLSO:
		if lso := r.log.LastStableOffset(); lso < r.log.LogEndOffset() {
			defer r.fidelityTruncated()
			return r.log.Truncate(lso)
		}
		return nil
	case statemachine.PersistLME:
		if r.stopProg.lmePersisted {
			return nil
		}
		return r.persistLME()
	case statemachine.BumpLeaderEpoch:
		if r.stopProg.bumped {
			r.bumped = r.log.LeaderEpoch()
			return nil
		}
		before := r.log.LeaderEpoch()
		bump := r.log.BumpLeaderEpoch
		if ub, ok := r.log.(fetcher.UnsyncedBumper); ok && r.acting == statemachine.Stopping {
			// Made durable by the barrier's sync (appendPIDReset), with the
			// barrier: one syncfs round per partition in a failover, not two.
			bump = ub.BumpLeaderEpochUnsynced
		}
		e, err := bump(a.Min)
		if err != nil {
			return fmt.Errorf("bump leader epoch: %w", err)
		}
		r.observeBump(EpochBumpState, before, e)
		r.bumped = e
		return nil
	case statemachine.AbortOpenTransactions:
		return r.abortOpenTransactions()
	case statemachine.AppendPIDReset:
		return r.appendPIDReset()
	case statemachine.ClearReadOnly:
		return r.e.dest.SetReadOnly(r.topic, r.partition, false)
	case statemachine.SetReadOnly:
		return r.e.dest.SetReadOnly(r.topic, r.partition, true)
	case statemachine.WaitReplicas:
		return r.waitReplicas(a)
	case statemachine.Fail:
		return nil // the reason was stored with the FAILED state
	}
	return fmt.Errorf("mirror: unknown action %s", a)
}

// waitReplicas waits for the destination's replicas (ReplicaWaiter), all of them when
// the action asks or the mirror supports unclean leader election.
func (r *Partition) waitReplicas(a statemachine.WaitReplicas) error {
	rw, ok := r.e.dest.(dest.ReplicaWaiter)
	if !ok {
		return nil // a single replica converges with the leader log itself
	}
	all := a.AllReplicas || r.uleEnabled()
	off := a.Offset
	if off < 0 {
		off = r.log.LogEndOffset()
	}
	if err := rw.WaitReplicas(r.ctx, r.topic, r.partition, off, all); err != nil {
		return fmt.Errorf("wait for the replicas at offset %d: %w", off, err)
	}
	return nil
}

// startFetcher adds the partition to its fetch loop: one that stops it after a
// divergence truncation when unclean leader election is supported for its topic
// (uleEnabled, decided now), one that truncates and goes on otherwise.
func (r *Partition) startFetcher() error {
	f, err := r.mr.fetcher(r.topic, r.partition, r.uleEnabled())
	if err != nil {
		return err
	}
	if err := r.removeFromFetchers(f); err != nil { // the setting changed since the last start
		return err
	}
	spec := fetcher.PartitionSpec{Topic: r.topic, TopicID: r.topicID, Partition: r.partition, Log: r.log,
		Answered: &r.health.lastFetch} // answers that moved nothing are not reported as progress
	r.health.fetchStart.Store(r.e.clock().UnixNano())
	err = f.Add(spec)
	if errors.Is(err, fetcher.ErrDuplicatePartition) {
		if err = f.Remove(r.topic, r.partition); err == nil {
			err = f.Add(spec)
		}
	}
	return err
}

// removeFromFetchers removes the partition from every fetch loop of the mirror but keep.
func (r *Partition) removeFromFetchers(keep *fetcher.Fetcher) error {
	for _, f := range r.mr.currentFetchers(r.topic, r.partition) {
		if f == keep {
			continue
		}
		if err := f.Remove(r.topic, r.partition); err != nil && !errors.Is(err, fetcher.ErrFetcherClosed) {
			return err
		}
	}
	return nil
}

// persistLME stores the latest epoch of the log as the partition's LME, with the log end
// offset, without changing the state (spec §8.1 step 2).
func (r *Partition) persistLME() error {
	lme := r.log.LatestEpoch()
	if lme == epoch.UndefinedEpoch {
		return nil // empty log: nothing was mirrored
	}
	lmo := r.log.LogEndOffset()
	res, err := r.mr.batch.write(r.ctx, coordinator.WritePartition{TopicID: r.topicID, Partition: r.partition, State: statemachine.Unknown,
		LeaderEpoch: r.log.LeaderEpoch(), StateEpoch: r.stateEpoch, LastMirrorEpoch: lme, LastMirrorOffset: lmo})
	if err != nil {
		return fmt.Errorf("persist LME: %w", err)
	}
	if res.ErrorCode != admin.CodeNone {
		return fmt.Errorf("persist LME: %w", admin.NewError(res.ErrorCode, res.ErrorMessage))
	}
	r.lme, r.lmo = lme, lmo
	return nil
}

// findLMEAndTruncate is PREPARING's work (spec §6.3): find the last mirrored epoch of
// this partition on the source cluster, refuse a mirror loop, and truncate the local log
// after the end of that epoch (everything when the LME is unknown).
func (r *Partition) findLMEAndTruncate() error {
	lme, err := r.lookupLME()
	if err != nil {
		return err
	}
	st := PlanState{State: statemachine.Stopped, LastMirrorOffset: r.lmo}
	if r.lmo < 0 {
		st.State = statemachine.Unknown
	}
	pl, err := planTruncation(r.log, r.partition, lme, st)
	if err != nil {
		return err
	}
	start, end := pl.LogStart, pl.LogEnd
	off, full := epoch.LMETruncationOffset(r.log.Epochs(), start, end, lme)
	ref := PartitionRef{Mirror: r.mirror, Topic: r.topic, Partition: r.partition}
	ap, approved := r.approval()
	if pl.RemovesRecords() && r.guardsLocalWrites() && !(approved && ap.Covers(pl.Removed)) {
		// No start approved this removal durably (it was planned without it, the LME
		// found now differs, the log changed since, or the topic was started by
		// auto-discovery): refuse it, so that no record written here goes without the
		// operator's word. The partition fails non-retryably with the plan; a recover
		// with AllowTruncation approves it.
		pl.StateNow, pl.StateAfter = statemachine.Preparing, statemachine.Failed
		r.e.log.Warn("mirror: PREPARING refused to remove records written on this site that no start approved",
			"mirror", r.mirror, "topic", r.topic, "partition", r.partition, "removedFrom", pl.Removed.From, "removedTo", pl.Removed.To,
			"removedRecords", pl.Removed.Records, "localFrom", pl.LocalWrites.From, "localTo", pl.LocalWrites.To, "localRecords", pl.LocalWrites.Records,
			"approved", approved, "approvedFrom", ap.From, "approvedTo", ap.To)
		r.e.metrics.TruncationRefused(ref, pl.LocalWrites.Records)
		return &TruncationRefusedError{Mirror: r.mirror, Topic: r.topic, Plan: []controller.PartitionPlan{pl}, AtPrepare: true}
	}
	fully := full && (end > start || r.log.LatestEpoch() != epoch.UndefinedEpoch)
	cuts := fully || (!full && off < end)
	// At Debug for an empty log it leaves as it is: a start of thousands of
	// new partitions logs no line per partition.
	level := slog.LevelInfo
	if !cuts && end == start {
		level = slog.LevelDebug
	}
	r.e.log.Log(r.ctx, level, "mirror: LME truncation", "mirror", r.mirror, "topic", r.topic, "partition", r.partition,
		"lme", lme, "offset", off, "full", full, "logEnd", end)
	switch {
	case fully:
		if end > start {
			srcStart, err := r.mr.sourceLogStart(r.ctx, r.topic, r.partition)
			if err != nil {
				r.e.log.Warn("mirror: cannot read the source log start", "mirror", r.mirror, "topic", r.topic, "partition", r.partition, "err", err)
				srcStart = -1
			}
			r.e.logFullTruncation("mirror: PREPARING truncates the destination log fully", r.mirror, r.topic, newFullTruncation(r.partition, start, end, srcStart))
		}
		if err := r.log.TruncateFullyAndStartAt(off); err != nil {
			return err
		}
	case !full && off < end:
		if err := r.log.Truncate(off); err != nil {
			return err
		}
	}
	if approved {
		// Used (or not needed: nothing of this site's to remove any more): an approval
		// licenses one removal. Cleared before the report, so a restart after it finds
		// none; a failed clear fails PREPARING, whose retry finds nothing left to remove.
		if err := r.e.clearApproval(r.ctx, r.mirror, r.topic, r.partition); err != nil {
			return fmt.Errorf("clear the removal approval: %w", err)
		}
	}
	r.reportRemoved(ref, pl)
	return r.raiseEpochToSource()
}

// guardsLocalWrites reports whether this PREPARING may remove records written on
// this site, so needs an approval to (GuardsLocalWrites of the state it entered from).
func (r *Partition) guardsLocalWrites() bool { return GuardsLocalWrites(r.prepFrom) }

// approval is the durable approval (controller.TopicState.Approvals) of this
// partition's removal of records written on this site, if any.
func (r *Partition) approval() (controller.Approval, bool) {
	ts, ok := r.e.ctrl.Topic(r.topic)
	if !ok || ts.Mirror != r.mirror || ts.TopicID != r.topicID {
		return controller.Approval{}, false
	}
	return ts.Approval(r.partition)
}

// reportRemoved announces a truncation that removed records: a warning naming the
// offsets, the Truncation metric (cause start, the records written on this site as
// lost) and a Removal event.
func (r *Partition) reportRemoved(ref PartitionRef, pl controller.PartitionPlan) {
	if pl.Removed.Records == 0 {
		return
	}
	r.e.log.Warn("mirror: PREPARING removed records from the destination log", "mirror", r.mirror, "topic", r.topic, "partition", r.partition,
		"removedFrom", pl.Removed.From, "removedTo", pl.Removed.To, "removedRecords", pl.Removed.Records,
		"localFrom", pl.LocalWrites.From, "localTo", pl.LocalWrites.To, "lost", pl.LocalWrites.Records)
	r.e.metrics.Truncation(ref, TruncationStart, pl.LocalWrites.Records)
	r.e.removals(Removal{Ref: ref, Removed: pl.Removed, LocalWrites: pl.LocalWrites})
}

// lookupLME asks the Peer for the LME of this partition (Runtime.lookupLME),
// retrying transient failures.
func (r *Partition) lookupLME() (int32, error) {
	return r.mr.lookupLME(r.ctx, r.topic, r.partition, peerRetry(r.ctx))
}
