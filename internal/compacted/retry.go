package compacted

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/IBM/sarama"
	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Backoff between retries: exponential from retryInitial up to retryMax, randomised.
const (
	retryInitial = 20 * time.Millisecond
	retryMax     = time.Second
)

// retrier bounds the retries of one stalled step with an exponential backoff; reset
// starts a new budget after progress.
type retrier struct {
	b       *backoff.ExponentialBackOff
	timeout time.Duration
	tries   int
}

func newRetrier(timeout time.Duration) *retrier {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = retryInitial
	b.MaxInterval = retryMax
	b.MaxElapsedTime = timeout
	b.Reset()
	return &retrier{b: b, timeout: timeout}
}

// reset starts a new budget.
func (r *retrier) reset() {
	r.b.Reset()
	r.tries = 0
}

// wait sleeps before the next try of a step that failed with cause. It returns an error
// wrapping cause when the budget is spent, or the context's error when ctx ends first.
func (r *retrier) wait(ctx context.Context, cause error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := r.b.NextBackOff()
	if d == backoff.Stop {
		return fmt.Errorf("%w (gave up after %d retries in %v)", cause, r.tries, r.timeout)
	}
	r.tries++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retriable reports whether err is worth another try after a metadata refresh: the
// partition's leadership moved or is moving, or the connection to the leader failed.
// A *KafkaError matches through the sarama error of its code.
func retriable(err error) bool {
	for _, kerr := range []sarama.KError{
		sarama.ErrNotLeaderForPartition, sarama.ErrLeaderNotAvailable, sarama.ErrReplicaNotAvailable,
		sarama.ErrFencedLeaderEpoch, sarama.ErrUnknownLeaderEpoch, sarama.ErrUnknownTopicOrPartition,
		sarama.ErrRequestTimedOut, sarama.ErrKafkaStorageError, sarama.ErrNotEnoughReplicas,
		sarama.ErrOffsetNotAvailable, sarama.ErrBrokerNotAvailable,
	} {
		if errors.Is(err, kerr) {
			return true
		}
	}
	var nerr net.Error
	return errors.As(err, &nerr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		kgo.IsRetryableBrokerErr(err) || errors.Is(err, sarama.ErrNotConnected) || errors.Is(err, sarama.ErrOutOfBrokers)
}
