package admin

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"
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
		if cap(frame) > 1<<20 {
			frame = nil // do not pin a large buffer for the connection's life
		}
	}
}

// serveOne reads, handles and answers one request of c, reusing buf for the
// frame; false closes the connection.
func (s *Server) serveOne(c net.Conn, buf []byte, auth *connAuth, remote string) ([]byte, bool) {
	size, err := s.readSize(c)
	if err != nil {
		s.reportTimeout(err, remote, "between requests or in a size prefix")
		return buf, false // EOF or closed: nothing else to report
	}
	if limit := s.frameLimit(auth); size < 8 || size > limit {
		s.report(fmt.Errorf("admin: request of %d bytes from %s (limit %d)", size, remote, limit))
		return buf, false
	}
	// The API key (the first two bytes) says what decoding may cost.
	buf = append(buf[:0], 0, 0)
	if _, err := io.ReadFull(c, buf); err != nil {
		s.reportTimeout(err, remote, "in a request header")
		return buf, false
	}
	_, extra := s.extra[int16(binary.BigEndian.Uint16(buf))]
	release, err := s.acquire(frameCharge(size, extra))
	if err != nil {
		return buf, false // server closing
	}
	defer release()
	_ = c.SetReadDeadline(deadline(s.cfg.ReadTimeout))
	frame, err := readFrame(c, buf, int(size))
	if err != nil {
		s.reportTimeout(err, remote, "in a request body")
		return frame, false
	}
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

// extraDecodeFactor bounds what kmsg's decoders allocate per frame byte: a
// Fetch or Produce request of empty topics (3 bytes each) decodes to 21.3
// times its size (measured with kmsg v1.15.1), and kmsg has no element limit.
const extraDecodeFactor = 22

// frameCharge is what a frame of size bytes costs of MaxInFlightBytes: for a
// mirror RPC twice its size, its bytes and what decoding it may allocate (the
// strings it holds are copied; the element limit bounds the rest); for an
// Extra key, decoded by kmsg, extraDecodeFactor times its size.
func frameCharge(size int32, extra bool) int64 {
	if extra {
		return extraDecodeFactor * int64(size)
	}
	return 2 * int64(size)
}

// acquire takes a request slot and size bytes of the in-flight budgets,
// waiting for them; the error is the server's context ending.
func (s *Server) acquire(size int64) (release func(), err error) {
	if err := s.requests.Acquire(s.ctx, 1); err != nil {
		return nil, err
	}
	if err := s.bytes.Acquire(s.ctx, size); err != nil {
		s.requests.Release(1)
		return nil, err
	}
	return func() {
		s.bytes.Release(size)
		s.requests.Release(1)
	}, nil
}

// readFrame reads n bytes into buf, growing it as data arrives so that a
// peer announcing a large frame without sending it cannot make the server
// allocate the announced size up front.
func readFrame(r io.Reader, buf []byte, n int) ([]byte, error) {
	const chunk = 64 << 10
	for len(buf) < n {
		want := min(n-len(buf), chunk)
		if cap(buf)-len(buf) < want {
			grown := make([]byte, len(buf), min(n, max(2*cap(buf), len(buf)+want)))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+want])
		buf = buf[:len(buf)+m]
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}
