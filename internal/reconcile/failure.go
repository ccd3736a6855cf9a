package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
)

// ErrPeerUnreachable is wrapped by the failure of a PREPARING partition whose LME lookup
// on the source cluster kept failing with transient errors (the source or its admin
// endpoint unreachable, closed or not yet serving) for longer than the retry budget.
var ErrPeerUnreachable = errors.New("mirror: source cluster unreachable for the LME lookup")

// transient reports whether err is worth retrying unchanged: a network failure, a closed
// or reset connection, or a protocol error Kafka marks retriable. Everything else (a
// mirror loop, an authorization failure, an unknown mirror) is permanent.
func transient(err error) bool {
	if err == nil || errors.Is(err, ErrMirrorLoop) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	var ae *admin.Error
	var ke *kerr.Error
	switch {
	case errors.As(err, &ae):
		return ae.Retriable()
	case errors.As(err, &ke):
		return ke.Retriable
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, fetcher.ErrSourceClosed),
		errors.Is(err, ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return false
}

// peerRetry is the backoff of the LME lookup: exponential from 100 ms to 5 s with
// jitter, for at most 2 minutes, then the partition fails with ErrPeerUnreachable (and
// the FAILED retry path takes over).
func peerRetry(ctx context.Context) backoff.BackOffContext {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 5*time.Second, 2*time.Minute
	return backoff.WithContext(b, ctx)
}

// RetryTransient runs op until it succeeds, fails permanently, or the backoff gives up;
// a transient error that outlived the budget is returned wrapped in ErrPeerUnreachable.
func RetryTransient[T any](ctx context.Context, bo backoff.BackOffContext, op func() (T, error)) (T, error) {
	var last error
	v, err := backoff.RetryWithData(func() (T, error) {
		v, err := op()
		if err != nil && !transient(err) {
			return v, backoff.Permanent(err)
		}
		last = err
		return v, err
	}, bo)
	if err != nil && last != nil && errors.Is(err, last) && ctx.Err() == nil {
		return v, fmt.Errorf("%w: %w", ErrPeerUnreachable, err)
	}
	return v, err
}
