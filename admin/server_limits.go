package admin

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults of the ServerConfig limits.
const (
	// DefaultIdleTimeout is Kafka's connections.max.idle.ms (10 minutes).
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultReadTimeout bounds reading one request (30 s, Kafka's
	// request.timeout.ms).
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds writing one response (30 s).
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxInFlightRequests is the default bound on requests in flight
	// over all connections (256).
	DefaultMaxInFlightRequests = 256
	// DefaultMaxInFlightBytes is the default bound on the memory of the
	// requests in flight over all connections (256 MiB); see
	// ServerConfig.MaxInFlightBytes for what a request is charged.
	DefaultMaxInFlightBytes = 256 << 20
	// DefaultMaxExtraRequestSize is the default frame limit of Extra keys
	// that have no pre-scan schema (1 MiB), decoded under the fallback bound
	// of 100 times their size.
	DefaultMaxExtraRequestSize = 1 << 20
)

// Accept backoff after a temporary error, as net/http: 5 ms doubling to 1 s.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// validate checks cfg as given, zero fields standing for their defaults (a negative
// timeout disables it). It never changes cfg: withDefaults does that, on a copy.
func (cfg ServerConfig) validate() error {
	switch {
	case cfg.Handler == nil:
		return errors.New("admin: ServerConfig.Handler is nil")
	case cfg.MaxRequestSize < 0:
		return fmt.Errorf("admin: negative MaxRequestSize %d", cfg.MaxRequestSize)
	case cfg.MaxInFlightRequests < 0:
		return fmt.Errorf("admin: negative MaxInFlightRequests %d", cfg.MaxInFlightRequests)
	case cfg.MaxInFlightBytes < 0:
		return fmt.Errorf("admin: negative MaxInFlightBytes %d", cfg.MaxInFlightBytes)
	case cfg.MaxDecodedElements < 0:
		return fmt.Errorf("admin: negative MaxDecodedElements %d", cfg.MaxDecodedElements)
	case cfg.MaxExtraRequestSize < 0:
		return fmt.Errorf("admin: negative MaxExtraRequestSize %d", cfg.MaxExtraRequestSize)
	case cfg.MaxRequestCharge < 0:
		return fmt.Errorf("admin: negative MaxRequestCharge %d", cfg.MaxRequestCharge)
	}
	if cfg.SASL != nil {
		return cfg.SASL.validate()
	}
	return nil
}

// withDefaults returns cfg with every zero field set to its default and every negative
// timeout to 0 (disabled): the one place the defaults of a ServerConfig live. The byte
// budget is raised, when needed, so that the largest frame always fits (it would wait
// forever otherwise).
func (cfg ServerConfig) withDefaults() ServerConfig {
	dur := func(d *time.Duration, def time.Duration) {
		switch {
		case *d == 0:
			*d = def
		case *d < 0:
			*d = 0 // disabled
		}
	}
	dur(&cfg.IdleTimeout, DefaultIdleTimeout)
	dur(&cfg.ReadTimeout, DefaultReadTimeout)
	dur(&cfg.WriteTimeout, DefaultWriteTimeout)
	if cfg.MaxRequestSize == 0 {
		cfg.MaxRequestSize = DefaultMaxRequestSize
	}
	if cfg.Principal == nil {
		cfg.Principal = DefaultPrincipal
	}
	if cfg.MaxInFlightRequests == 0 {
		cfg.MaxInFlightRequests = DefaultMaxInFlightRequests
	}
	if cfg.MaxDecodedElements == 0 {
		cfg.MaxDecodedElements = DefaultMaxDecodedElements
	}
	if cfg.MaxExtraRequestSize == 0 {
		cfg.MaxExtraRequestSize = DefaultMaxExtraRequestSize
	}
	if cfg.MaxInFlightBytes == 0 {
		cfg.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if cfg.SASL != nil { // a copy: the caller's later changes do not reach the server
		sasl := *cfg.SASL
		sasl.Mechanisms = append([]string(nil), sasl.Mechanisms...)
		if sasl.Timeout == 0 {
			sasl.Timeout = DefaultAuthTimeout
		}
		cfg.SASL = &sasl
	}
	cfg.MaxInFlightBytes = max(cfg.MaxInFlightBytes, 2*int64(cfg.MaxRequestSize))
	if cfg.MaxRequestCharge == 0 {
		cfg.MaxRequestCharge = cfg.MaxInFlightBytes / 2
	}
	cfg.MaxRequestCharge = min(cfg.MaxRequestCharge, cfg.MaxInFlightBytes/2)
	return cfg
}

// temporaryAcceptError reports whether Accept failed for a reason that
// passes: out of descriptors or buffers (EMFILE, ENFILE, ENOBUFS, ENOMEM), a
// connection aborted before it was accepted, an interrupted call, or a
// timeout. Anything else (the listener closed) ends Serve.
func temporaryAcceptError(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS,
		syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// acceptBackoff is the delay before the next Accept after a temporary error.
type acceptBackoff struct{ d time.Duration }

// next doubles the delay (from acceptBackoffMin, up to acceptBackoffMax) and
// returns it.
func (b *acceptBackoff) next() time.Duration {
	b.d = min(max(2*b.d, acceptBackoffMin), acceptBackoffMax)
	return b.d
}

// wait sleeps for the current delay; false when ctx ended first.
func (b *acceptBackoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// reset forgets the delay after a successful Accept.
func (b *acceptBackoff) reset() { b.d = 0 }

// limitedReader is implemented by every generated request type.
type limitedReader interface {
	ReadFromLimit(src []byte, maxElements int) error
}

// decodeRequest decodes a mirror RPC request with the element limit.
func decodeRequest(req kmsg.Request, src []byte, maxElements int) error {
	if lr, ok := req.(limitedReader); ok {
		return lr.ReadFromLimit(src, maxElements)
	}
	return req.ReadFrom(src)
}
