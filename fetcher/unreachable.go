package fetcher

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrSourceUnreachable is the sentinel of every *SourceUnreachableError.
var ErrSourceUnreachable = errors.New("fetcher: source unreachable")

// SourceUnreachableError stops a partition that had no successful fetch for longer
// than Config.UnreachableTimeout: every metadata request and fetch since Since failed
// or was answered with an error. Last is the last failure seen, when there was one. It
// is Is(ErrSourceUnreachable) and unwraps to Last.
type SourceUnreachableError struct {
	TopicPartition
	Since   time.Time
	Timeout time.Duration
	Last    error
}

func (e *SourceUnreachableError) Error() string {
	msg := fmt.Sprintf("fetcher: source unreachable: %s had no successful fetch for %v (more than %v)",
		e.TopicPartition, time.Since(e.Since).Round(time.Millisecond), e.Timeout)
	if e.Last != nil {
		msg += ": " + e.Last.Error()
	}
	return msg
}

// Is matches ErrSourceUnreachable.
func (e *SourceUnreachableError) Is(target error) bool { return target == ErrSourceUnreachable }

// Unwrap returns the last failure.
func (e *SourceUnreachableError) Unwrap() error { return e.Last }

// noteFailure records a failed attempt of ps: the start of the failing period and the
// cause. It returns true when ps was failed because the period outlived
// Config.UnreachableTimeout.
func (f *Fetcher) noteFailure(ps *partState, cause error) bool {
	now := time.Now()
	if ps.failingSince.IsZero() {
		ps.failingSince = now
		if !ps.lastOK.IsZero() && ps.lastOK.Before(now) {
			ps.failingSince = ps.lastOK // the failed request may have hung since then
		}
	}
	if cause != nil {
		ps.lastErr = cause
	}
	if f.cfg.UnreachableTimeout <= 0 || now.Sub(ps.failingSince) <= f.cfg.UnreachableTimeout {
		return false
	}
	f.fail(ps, &SourceUnreachableError{TopicPartition: ps.tp, Since: ps.failingSince,
		Timeout: f.cfg.UnreachableTimeout, Last: ps.lastErr})
	return true
}

// requestContext bounds one source request of the loop by Config.UnreachableTimeout,
// so that a source that accepts connections but never answers (frozen) fails the
// request, and its partitions, within that time instead of holding them.
func (f *Fetcher) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.cfg.UnreachableTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, f.cfg.UnreachableTimeout)
}
