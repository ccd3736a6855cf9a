package reconcile

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// nonRetryable reports whether a failure must not be retried automatically (stored as
// RetryAttempt -1): retrying cannot help until an operator acts (breaks a mirror loop,
// disables tiered storage, restores or restarts the topic, repairs a destination log
// that differs from the source).
func nonRetryable(cause error) bool {
	return errors.Is(cause, ErrMirrorLoop) || errors.Is(cause, ErrTieredStorage) || errors.Is(cause, ErrTruncationRefused) || errors.Is(cause, fetcher.ErrFidelityMismatch) ||
		errors.Is(cause, metasync.ErrSourceTopicMissing) || errors.Is(cause, metasync.ErrSourceTopicRecreated)
}

// retryGate is the FAILED-retry backoff of one mirror, shared by all its partitions, so
// that a source that is down is not hit by one retry per partition per backoff (a retry
// storm). Retries happen in rounds: the first partition to fail after the last round
// opens the next one, Initial·2^level later (capped at Max, level = rounds since the
// mirror was last healthy, or the partition's own attempts if more); a partition that
// fails while a round is pending joins it. Each partition's retry lands at a random
// point of the round's window (the round time plus up to half its backoff), so even a
// round is spread out.
type retryGate struct {
	mu     sync.Mutex
	level  int       // rounds opened since the mirror last had a healthy partition
	next   time.Time // the pending round, zero when none
	spread time.Duration
	now    func() time.Time
	jitter func(n int64) int64 // uniform in [0, n)
	// waiting are woken (backWaiter.sourceIsBackWake) when the source answers
	// again a partition it had been failing (sourceBack): the FAILED partitions
	// waiting for a round then retry at once, spread over backSpread, instead
	// of at their round, which a long outage pushed up to the maximum backoff
	// away.
	waiting map[backWaiter]struct{}
}

// backWaiter is woken by retryGate.sourceBack.
type backWaiter interface {
	// wakeSourceBack is called once per waitBack, from the goroutine that saw the
	// source answer; it must not block.
	wakeSourceBack()
}

// backSpread is the window over which the FAILED partitions of a mirror
// retry once its source answers again.
const backSpread = 500 * time.Millisecond

func newRetryGate() *retryGate {
	return &retryGate{now: time.Now, jitter: rand.Int64N}
}

// delay returns how long a partition that already retried attempts times waits for its
// next retry under rc.
func (g *retryGate) delay(rc RetryConfig, attempts int) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !now.Before(g.next) {
		exp := min(max(g.level, attempts), 40)
		g.level = exp + 1
		initial := rc.Initial
		if initial <= 0 {
			initial = DefaultRetryInitialBackoff
		}
		d := initial << exp
		if d <= 0 || (rc.Max > 0 && d > rc.Max) {
			d = max(rc.Max, initial)
		}
		g.next, g.spread = now.Add(d), d/2
	}
	d := g.next.Sub(now)
	if g.spread > 0 {
		d += time.Duration(g.jitter(int64(g.spread)))
	}
	return max(d, time.Millisecond)
}

// healthy resets the backoff: a partition of the mirror fetched again.
func (g *retryGate) healthy() {
	g.mu.Lock()
	g.level, g.next = 0, time.Time{}
	g.mu.Unlock()
}

// sourceBack resets the backoff and wakes the partitions waiting on
// waitBack: the source answered a partition it had been failing.
func (g *retryGate) sourceBack() {
	g.mu.Lock()
	g.level, g.next = 0, time.Time{}
	waiting := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	for w := range waiting {
		w.wakeSourceBack()
	}
}

// waitBack registers w to be woken by the next sourceBack (once, however often it is
// registered before it).
func (g *retryGate) waitBack(w backWaiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waiting == nil {
		g.waiting = map[backWaiter]struct{}{}
	}
	g.waiting[w] = struct{}{}
}

// forget removes w from the waiters (a partition that ended).
func (g *retryGate) forget(w backWaiter) {
	g.mu.Lock()
	delete(g.waiting, w)
	g.mu.Unlock()
}

// backDelay is a FAILED partition's retry delay once the source is back.
func (g *retryGate) backDelay() time.Duration {
	return time.Duration(g.jitter(int64(backSpread))) + time.Millisecond
}

// failureFinal reports whether a FAILED partition stays FAILED until an operator acts:
// its failure is non-retryable, the automatic retry is off, or its attempts ran out.
func (r *Partition) FailureFinal() bool {
	ra := r.pubRetry.Load()
	rc := r.mr.retryConfig()
	return ra == int32(records.NonRetryable) || rc.MaxAttempts == 0 || int(ra) >= rc.MaxAttempts
}

// maybeScheduleFailedRetry arms the automatic retry of a FAILED partition: after the
// mirror's shared backoff (retryGate), unless the failure is non-retryable or the
// attempts ran out.
func (r *Partition) maybeScheduleFailedRetry() {
	rc := r.mr.retryConfig()
	if r.retryArmed || r.nonRetryable || rc.MaxAttempts == 0 || r.attempts >= rc.MaxAttempts {
		return
	}
	d := r.mr.gate.delay(rc, r.attempts)
	r.attempts++
	r.retryEvent = retryEvent(r.prevState)
	r.schedule(d)
	r.backArmed = true
	r.mr.gate.waitBack(r)
}

// wakeSourceBack implements backWaiter: a turn handles it (sourceIsBack).
func (r *Partition) wakeSourceBack() {
	r.backFired.Store(true)
	r.kick()
}

// sourceIsBack runs in a turn when the mirror's source answered a
// partition it had been failing: a FAILED partition still waiting for its
// retry round retries now (within backSpread).
func (r *Partition) sourceIsBack() {
	if r.retryArmed && r.retryEvent != nil && r.state == statemachine.Failed {
		r.schedule(r.mr.gate.backDelay())
	}
}

// retryConfig is the FAILED retry of the mirror: the engine's Config.Retry with each of
// the mirror's own mirror.failed.retry.* configs over it. The initial back-off never
// exceeds the maximum: a mirror's initial above the host's maximum raises the maximum.
func (mr *Runtime) retryConfig() RetryConfig {
	rc := mr.e.cfg.Retry
	cfg, err := mr.config()
	if err != nil {
		return rc
	}
	fr := cfg.FailedRetry
	if fr.InitialBackoff > 0 {
		rc.Initial = fr.InitialBackoff
	}
	if fr.MaxBackoff > 0 {
		rc.Max = fr.MaxBackoff
	}
	if fr.MaxAttemptsSet {
		rc.MaxAttempts = fr.MaxAttempts
	}
	if rc.Max > 0 && rc.Max < rc.Initial {
		rc.Max = rc.Initial
	}
	return rc
}

// retryEvent is the event that restarts a FAILED partition whose state before FAILED
// was prev: back to MIRRORING (no truncation: what was mirrored stays) when it failed
// while mirroring or fencing an epoch, else from PREPARING.
func retryEvent(prev statemachine.State) statemachine.Event {
	switch prev {
	case statemachine.Mirroring, statemachine.EpochFencing:
		return statemachine.RetryMirroring{}
	}
	return statemachine.Retry{}
}

// retryAttemptFor is the RetryAttempt stored with a write of state to: -1 for a
// non-retryable failure, 0 once MIRRORING again, else the retries so far. It updates
// the retry bookkeeping of the turns.
func (r *Partition) retryAttemptFor(to statemachine.State, cause error) int16 {
	switch {
	case to == statemachine.Failed && cause != nil:
		r.nonRetryable = nonRetryable(cause)
	case to != statemachine.Failed:
		r.nonRetryable = false
	}
	if r.nonRetryable {
		return records.NonRetryable
	}
	return int16(min(r.attempts, 32767))
}

// applyRecover runs in a turn when ev is the Retry of RecoverMirrorTopics:
// the attempts start again from zero and a non-retryable failure becomes retryable. It
// reports false for an automatic retry that came too late: a timer armed by a retryable
// failure that fires after a later failure made the partition non-retryable (the source
// topic was deleted meanwhile); only RecoverMirrorTopics restarts such a partition, so
// the event is dropped.
func (r *Partition) applyRecover(ev statemachine.Event) bool {
	switch ev.(type) {
	case statemachine.Retry, statemachine.RetryMirroring:
		if r.recoverReq.Swap(false) {
			r.attempts, r.nonRetryable = 0, false
			return true
		}
		if r.nonRetryable && r.state == statemachine.Failed {
			return false
		}
	}
	return true
}

// recover asks the turns to restart the partition if it is FAILED (a no-op in
// any other state), resetting its retry attempts.
func (r *Partition) recover() {
	r.recoverReq.Store(true)
	r.pubRetry.Store(0) // no longer final for waiters; the next turn publishes the rest
	r.push(retryEvent(statemachine.State(r.pubPrev.Load())))
}

// onHealthy is called by the fetcher events on a successful fetch: the partition's
// retries are over, and the mirror's shared backoff starts again from Initial.
func (r *Partition) onHealthy() {
	if r.pubRetry.Load() != 0 && r.healthyReq.CompareAndSwap(false, true) {
		r.mr.gate.healthy()
		r.kick()
	}
}

// resetRetries stores RetryAttempt 0 for a MIRRORING partition that fetched again
// after retries (re-asserting MIRRORING). It runs in a turn.
func (r *Partition) resetRetries() {
	if !r.healthyReq.Swap(false) || r.state != statemachine.Mirroring || r.attempts == 0 {
		return
	}
	r.attempts = 0
	if r.write(statemachine.Mirroring, nil) == writeOK {
		r.publish(r.state, "")
		return
	}
	r.known = false // re-read; the next MIRRORING write stores 0
}
