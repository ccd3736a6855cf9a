package admin

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/semaphore"
)

// deadline returns now+d, or the zero time (no deadline) when d is 0.
func deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	if tc, ok := c.(*tls.Conn); ok {
		_ = c.SetDeadline(deadline(s.cfg.ReadTimeout))
		if err := tc.HandshakeContext(s.ctx); err != nil {
			s.report(fmt.Errorf("admin: TLS handshake with %s: %w", c.RemoteAddr(), err))
			return
		}
		_ = c.SetDeadline(time.Time{})
	}
	remote := c.RemoteAddr().String()
	auth := s.newConnAuth(c, s.cfg.Principal(c))
	defer s.endConnAuth(auth, remote)
	var frame []byte
	for {
		var ok bool
		if frame, ok = s.serveOne(c, frame, auth, remote); !ok {
			return
		}
		if cap(frame) > 64<<10 {
			frame = nil // do not pin a large buffer for the connection's life
		}
	}
}

// serveOne reads, handles and answers one request of c, reusing buf for the
// frame; false closes the connection. Every wait for the budgets ends at the
// request's read deadline; the memory charged is what the frame holds as it
// arrives, then its decode bound (see ServerConfig.MaxInFlightBytes).
func (s *Server) serveOne(c net.Conn, buf []byte, auth *connAuth, remote string) ([]byte, bool) {
	size, err := s.readSize(c)
	if err != nil {
		s.reportTimeout(err, remote, "between requests or in a size prefix")
		return buf, false // EOF or closed: nothing else to report
	}
	readBy := deadline(s.cfg.ReadTimeout)
	if limit := s.frameLimit(auth); size < 8 || size > limit {
		s.report(fmt.Errorf("admin: request of %d bytes from %s (limit %d)", size, remote, limit))
		return buf, false
	}
	// The API key (the first two bytes) says what the frame may cost.
	buf = append(buf[:0], 0, 0)
	if _, err := io.ReadFull(c, buf); err != nil {
		s.reportTimeout(err, remote, "in a request header")
		return buf, false
	}
	key := int16(binary.BigEndian.Uint16(buf))
	limit, known := s.keyLimit(key)
	if !known {
		s.report(fmt.Errorf("admin: closing %s: unsupported request key %d", remote, key))
		return buf, false
	}
	if size > limit {
		s.report(fmt.Errorf("admin: closing %s: key %d request of %d bytes (limit %d for the key)", remote, key, size, limit))
		return buf, false
	}
	ctx, cancel := s.waitContext(readBy)
	defer cancel()
	ch := &charge{s: s, ctx: ctx, pool: s.bytes}
	defer ch.release()
	frame, err := readFrame(c, buf, int(size), ch.ensure)
	if err != nil {
		if ch.err != nil {
			s.report(fmt.Errorf("admin: closing %s: key %d request of %d bytes: %w", remote, key, size, ch.err))
		} else {
			s.reportTimeout(err, remote, "in a request body")
		}
		return frame, false
	}
	decoded, err := s.decodeCharge(frame, remote)
	if err != nil {
		s.report(err)
		return frame, false
	}
	dch := &charge{s: s, ctx: ctx, pool: s.decoded}
	defer dch.release()
	if err := dch.add(decoded); err != nil {
		s.report(fmt.Errorf("admin: closing %s: key %d request of %d bytes: %w", remote, key, size, err))
		return frame, false
	}
	if err := s.requests.Acquire(ctx, 1); err != nil {
		s.report(fmt.Errorf("admin: closing %s: key %d request: no request slot (MaxInFlightRequests %d) within the read timeout: %w", remote, key, s.cfg.MaxInFlightRequests, err))
		return frame, false
	}
	defer s.requests.Release(1)
	out, keep, err := s.handleConnFrame(frame, auth, remote)
	defer out.finish()
	if err != nil {
		s.report(err)
	}
	if out.bufs != nil {
		_ = c.SetWriteDeadline(deadline(s.cfg.WriteTimeout))
		if werr := writeBuffers(c, out.bufs); werr != nil {
			s.report(fmt.Errorf("admin: write to %s: %w", remote, werr))
			return frame, false
		}
	}
	return frame, keep
}

// writeBuffers writes a response frame: one buffer with Write, several (a
// Fetch response holding the log's record slices) with writev through
// net.Buffers. One buffer keeps Write, whose race annotations order the
// server's last touch of a response before the peer's read of it.
func writeBuffers(c net.Conn, out net.Buffers) error {
	if len(out) == 1 {
		_, err := c.Write(out[0])
		return err
	}
	_, err := out.WriteTo(c)
	return err
}

// readSize reads a request's size prefix: its first byte within the idle
// timeout, the other three within the read timeout.
func (s *Server) readSize(c net.Conn) (int32, error) {
	var b [4]byte
	_ = c.SetReadDeadline(deadline(s.cfg.IdleTimeout))
	if _, err := io.ReadFull(c, b[:1]); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(deadline(s.cfg.ReadTimeout))
	if _, err := io.ReadFull(c, b[1:]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b[:])), nil
}

// reportTimeout reports a connection cut by the idle or read timeout.
func (s *Server) reportTimeout(err error, remote, where string) {
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		s.report(fmt.Errorf("admin: closing %s: timed out %s: %w", remote, where, err))
	}
}

// waitContext is the server's context ending at readBy too (when set).
func (s *Server) waitContext(readBy time.Time) (context.Context, context.CancelFunc) {
	if readBy.IsZero() {
		return context.WithCancel(s.ctx)
	}
	return context.WithDeadline(s.ctx, readBy)
}

// charge is what one request holds of one half of the byte budget (pool:
// frame buffers or decoded forms); every wait for more ends with ctx (the
// request's read deadline). A request waits for decode memory while holding
// its frame, never the other way round, so the two halves cannot deadlock.
type charge struct {
	s    *Server
	ctx  context.Context
	pool *semaphore.Weighted
	held int64
	err  error // why the last wait failed
}

// ensure holds at least n bytes, waiting for the difference.
func (ch *charge) ensure(n int) error {
	if more := int64(n) - ch.held; more > 0 {
		return ch.add(more)
	}
	return nil
}

// add holds n more bytes, refusing what MaxRequestCharge never allows.
func (ch *charge) add(n int64) error {
	if n <= 0 {
		return nil
	}
	if ch.held+n > ch.s.cfg.MaxRequestCharge {
		ch.err = fmt.Errorf("%w: %d bytes over MaxRequestCharge %d", ErrBudget, ch.held+n, ch.s.cfg.MaxRequestCharge)
		return ch.err
	}
	if err := ch.pool.Acquire(ch.ctx, n); err != nil {
		ch.err = fmt.Errorf("%w: %d more bytes not free (MaxInFlightBytes %d) within the read timeout: %w", ErrBudget, n, ch.s.cfg.MaxInFlightBytes, err)
		return ch.err
	}
	ch.held += n
	return nil
}

func (ch *charge) release() {
	if ch.held > 0 {
		ch.pool.Release(ch.held)
		ch.held = 0
	}
}

// ErrBudget is wrapped by the reported error of a request closed because the
// memory it needed was over MaxRequestCharge or not free in time.
var ErrBudget = errors.New("admin: request memory budget")

// keyLimit is the largest frame key may send (false: a key the server does
// not serve, closed before its body is read). A frame's bytes and, apart,
// its decoded form must each fit MaxRequestCharge: a mirror RPC decodes to
// at most its size, an Extra key of a schema to its scanned bound, an Extra
// key without one to fallbackDecodeFactor times its size.
func (s *Server) keyLimit(key int16) (int32, bool) {
	capped := func(factor int64) int32 {
		return int32(min(int64(s.cfg.MaxRequestSize), s.cfg.MaxRequestCharge/factor))
	}
	switch _, extra := s.extra[key]; {
	case key == apiVersionsKey:
		return min(maxAPIVersionsSize, capped(fallbackDecodeFactor)), true
	case s.servesSASLKey(key): // decoded by kmsg with a schema, like an Extra key
		return capped(1), true
	case extra && extraSchemas[key] != nil:
		return capped(1), true
	case extra:
		return min(s.cfg.MaxExtraRequestSize, capped(fallbackDecodeFactor)), true
	}
	if _, ok := LookupAPI(key); ok {
		return capped(1), true
	}
	return 0, false
}

// servesSASLKey reports whether key is SaslHandshake or SaslAuthenticate and the
// server authenticates (ServerConfig.SASL): the two keys it decodes with kmsg itself.
func (s *Server) servesSASLKey(key int16) bool {
	return s.cfg.SASL != nil && (key == saslHandshakeKey || key == saslAuthenticateKey)
}

// maxAPIVersionsSize bounds an ApiVersions frame (a client's name and
// version: Kafka's clients send under 100 bytes).
const maxAPIVersionsSize = 64 << 10

// fallbackDecodeFactor bounds what kmsg allocates per frame byte for an
// Extra key or version without a schema (and ApiVersions): a struct's
// unknown tags decode to a map costing up to 160 bytes per 2-byte tag, empty
// array elements to 21 times their size (TestFallbackDecodeFactor).
const fallbackDecodeFactor = 100

// decodeCharge is what decoding frame will allocate beyond its bytes: for a
// mirror RPC its size (the element limit bounds the rest), for an Extra key
// with a schema the pre-scan's bound (an error closes the connection: over
// the element or tag limits, or malformed), else fallbackDecodeFactor-1
// times its size.
func (s *Server) decodeCharge(frame []byte, remote string) (int64, error) {
	r := kbin.Reader{Src: frame}
	key, version := r.Int16(), r.Int16()
	r.Int32()
	r.NullableString()
	e, extra := s.extra[key]
	if s.servesSASLKey(key) { // the server's own kmsg-decoded keys, pre-scanned as Extra keys are
		e, extra = ExtraAPI{Key: key, MinVersion: 0, MaxVersion: kmsg.RequestForKey(key).MaxVersion()}, true
	}
	sch := extraSchemas[key]
	switch {
	case !r.Ok():
		return 0, &errClose{fmt.Sprintf("truncated request header from %s", remote)}
	case key == apiVersionsKey:
		return (fallbackDecodeFactor - 1) * int64(len(frame)), nil
	case !extra:
		return int64(len(frame)), nil
	case version < e.MinVersion || version > e.MaxVersion:
		return 0, nil // refused by handleExtra, nothing decoded
	case sch == nil || version < sch.minVersion || version > sch.maxVersion:
		return (fallbackDecodeFactor - 1) * int64(len(frame)), nil
	}
	if sch.flexibleFrom >= 0 && version >= sch.flexibleFrom {
		kmsg.SkipTags(&r)
	}
	res, err := scanExtra(sch, version, r.Src, scanLimits{maxElements: s.cfg.MaxDecodedElements, maxTags: s.cfg.MaxDecodedElements})
	if err != nil {
		return 0, fmt.Errorf("admin: closing %s: key %d v%d request refused before decoding: %w", remote, key, version, err)
	}
	return res.decoded + decodeBase, nil
}

// readFrame reads n bytes into buf, growing it as data arrives so that a
// peer announcing a large frame without sending it cannot make the server
// allocate the announced size up front: once full, by doubling (from 512
// bytes) up to 1 MiB, then to the whole frame at once (one copy of at most
// 1 MiB), so a frame holds at most twice what its peer sent.
// hold is called with each new capacity before it is allocated; its error
// stops the read.
func readFrame(r io.Reader, buf []byte, n int, hold func(int) error) ([]byte, error) {
	const minGrow = 512
	const exactFrom = 1 << 20
	if err := hold(cap(buf)); err != nil {
		return buf, err
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			// The buffer grows only once it is full, so what a frame holds is at most
			// twice what its peer has sent (a peer that stalls after the key holds the
			// few bytes of its header buffer); from 1 MiB on it grows to the frame's size.
			grow := min(n, max(2*cap(buf), minGrow))
			if len(buf) >= exactFrom {
				grow = n
			}
			// The old buffer (at most 1 MiB) is garbage once copied.
			if err := hold(grow); err != nil {
				return buf, err
			}
			grown := make([]byte, len(buf), grow)
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}
