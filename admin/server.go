package admin

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/semaphore"
)

// DefaultMaxRequestSize is the default limit on a request frame (100 MiB,
// Kafka's socket.request.max.bytes default).
const DefaultMaxRequestSize = 100 << 20

// apiVersionsKey is the API key of ApiVersions.
const apiVersionsKey = 18

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("admin: server closed")

// ErrAccept is wrapped by the error OnError is told when Accept fails for a reason
// that passes (out of descriptors, buffers, ...): the listener accepts nobody until
// it is retried, so a host should log it where an operator sees it, unlike the
// connection-level errors a hostile client can cause at will.
var ErrAccept = errors.New("admin: accept failed")

// ServerConfig configures a Server.
type ServerConfig struct {
	// Handler serves the RPCs. Required.
	Handler Handler
	// Authorizer checks permissions (spec §16.2); nil allows everything.
	Authorizer Authorizer
	// MaxRequestSize bounds a request frame; larger frames close the
	// connection. 0 means DefaultMaxRequestSize.
	MaxRequestSize int32
	// TLS, when set, makes the server run a TLS handshake on every accepted
	// connection (use it when the listener is a plain TCP listener).
	TLS *tls.Config
	// Principal names the principal of a connection (after the TLS
	// handshake, if any). nil uses DefaultPrincipal. With SASL, a
	// connection's principal is the SASL user's once it authenticated.
	Principal func(net.Conn) string
	// SASL, when set, requires every connection to authenticate with SASL
	// before it is served (see SASLConfig).
	SASL *SASLConfig
	// OnError, when set, is told about connection-level problems (malformed
	// frames, handler panics, write errors). It must not block.
	OnError func(error)
	// Extra serves standard Kafka API keys next to the mirror RPCs (a data
	// plane); ApiVersions advertises them too. Keys must be distinct, known
	// to kmsg, and neither ApiVersions nor a mirror RPC.
	Extra []ExtraAPI

	// Limits (see limits.go for the defaults and what each one bounds).

	// IdleTimeout closes a connection on which no request starts for this
	// long. 0 means DefaultIdleTimeout; negative disables it.
	IdleTimeout time.Duration
	// ReadTimeout bounds the TLS handshake and the reading of one request
	// from its first byte to its last, so a peer sending a partial frame
	// (slowloris) is cut. 0 means DefaultReadTimeout; negative disables it.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response. 0 means
	// DefaultWriteTimeout; negative disables it.
	WriteTimeout time.Duration
	// MaxInFlightRequests bounds the requests being decoded, handled or
	// answered by all connections together; a connection waits for a slot
	// once it has read a request, at most until the request's read timeout
	// ends (then it is closed and reported). A connection has at most one
	// request in flight: its next request is read once the previous answer
	// is written, as Kafka does. 0 means DefaultMaxInFlightRequests.
	MaxInFlightRequests int
	// MaxInFlightBytes bounds the memory of the requests held by all
	// connections together (as Kafka's queued.max.request.bytes); half of it
	// holds frame buffers, half decoded forms. A request is charged what it
	// holds: its frame buffer as the bytes arrive (a peer announcing a large
	// frame and sending little holds little), then what decoding it can
	// allocate, known before decoding: for a mirror RPC its size
	// (MaxDecodedElements bounds its elements), for an Extra key the bound
	// of a pre-scan that walks the frame with the key's schema, counting
	// array elements and tagged fields (record batches are not copied, so a
	// Produce costs about its size twice: frame, then little), and 100 times
	// its size for an Extra key or version without a schema. The charge is
	// held until the answer is written. Every wait for the budget ends at the
	// request's read deadline (ReadTimeout; unbounded when disabled); a
	// request refused so is closed and reported. 0 means
	// DefaultMaxInFlightBytes; it is raised to twice MaxRequestSize when
	// below it.
	MaxInFlightBytes int64
	// MaxRequestCharge bounds what one request (so one connection) may hold
	// of each half of MaxInFlightBytes; a frame whose charge would exceed it
	// is closed and reported, before its body is read when its size says so
	// (an Extra key without a schema over a hundredth of it), after the
	// pre-scan otherwise. 0 means, as its largest value, half of
	// MaxInFlightBytes.
	MaxRequestCharge int64
	// MaxDecodedElements bounds the array elements decoded from one request:
	// a mirror RPC over it is answered INVALID_REQUEST (ErrTooLarge); an
	// Extra frame over it, or with more tagged fields, is closed before kmsg
	// decodes it. 0 means DefaultMaxDecodedElements.
	MaxDecodedElements int
	// MaxExtraRequestSize bounds a request frame of an Extra key that has no
	// pre-scan schema (checked once the key is read, before the body):
	// kmsg's decoders allocate up to 100 times such a frame. Keys with a
	// schema are limited by MaxRequestSize and MaxRequestCharge only. 0 means
	// DefaultMaxExtraRequestSize.
	MaxExtraRequestSize int32
}

// DefaultPrincipal returns CertificatePrincipal of the TLS client
// certificate if there is one ("User:CN=client,OU=eng,O=org", Kafka's
// default mapping), and "User:ANONYMOUS" otherwise.
func DefaultPrincipal(c net.Conn) string {
	if tc, ok := c.(*tls.Conn); ok {
		if st := tc.ConnectionState(); len(st.PeerCertificates) > 0 {
			return CertificatePrincipal(st.PeerCertificates[0])
		}
	}
	return "User:ANONYMOUS"
}

// Server serves the mirror RPCs, ApiVersions and any ServerConfig.Extra keys over the Kafka wire
// protocol on listeners the host owns. It runs one goroutine per
// connection, handles requests of a connection in order, and stops them all
// in Close.
type Server struct {
	cfg    ServerConfig
	extra  map[int16]ExtraAPI
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// requests, bytes and decoded are the in-flight budgets
	// (MaxInFlightRequests; MaxInFlightBytes, half for frame buffers, half
	// for decoded forms).
	requests, bytes, decoded *semaphore.Weighted
	// authFailures counts failed authentications (AuthFailures).
	authFailures atomic.Uint64

	mu     sync.Mutex // guards the fields below
	closed bool
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
}

// NewServer returns a Server; it does not listen until Serve.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	extra, err := checkExtra(cfg.Extra)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:      cfg,
		extra:    extra,
		ctx:      ctx,
		cancel:   cancel,
		requests: semaphore.NewWeighted(int64(cfg.MaxInFlightRequests)),
		bytes:    semaphore.NewWeighted(cfg.MaxInFlightBytes / 2),
		decoded:  semaphore.NewWeighted(cfg.MaxInFlightBytes / 2),
		lns:      map[net.Listener]struct{}{},
		conns:    map[net.Conn]struct{}{},
	}, nil
}

// Serve accepts connections on ln until ln fails or Close is called; it
// returns ErrServerClosed after Close. Serve may be called for several
// listeners. The server closes ln when Serve returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		_ = ln.Close()
	}()
	var backoff acceptBackoff
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			if !temporaryAcceptError(err) {
				return err
			}
			s.report(fmt.Errorf("%w on %s: %w; retrying in %v", ErrAccept, ln.Addr(), err, backoff.next()))
			if !backoff.wait(s.ctx) {
				return ErrServerClosed
			}
			continue
		}
		backoff.reset()
		if s.cfg.TLS != nil {
			c = tls.Server(c, s.cfg.TLS)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Close stops accepting, closes every connection, cancels the context given
// to handlers and waits until every connection goroutine has returned.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *Server) report(err error) {
	if s.cfg.OnError != nil {
		s.cfg.OnError(err)
	}
}

// errClose asks the connection loop to close the connection.
type errClose struct{ reason string }

// Error implements error.
func (e *errClose) Error() string { return "admin: closing connection: " + e.reason }

// header is a parsed request header (v1 or v2).
type header struct {
	key, version int16
	correlation  int32
	clientID     *string
}

// handleFrame serves one request frame (without its size prefix). It
// returns the full response frame to write (nil for none), whether to keep
// the connection open, and an error to report.
func (s *Server) handleFrame(frame []byte, principal, remote string) (out reply, keep bool, err error) {
	r := kbin.Reader{Src: frame}
	var h header
	h.key, h.version, h.correlation = r.Int16(), r.Int16(), r.Int32()
	h.clientID = r.NullableString()
	if !r.Ok() {
		return reply{}, false, &errClose{fmt.Sprintf("truncated request header from %s", remote)}
	}
	if h.key == apiVersionsKey {
		b, keep, err := s.handleAPIVersions(h, r)
		if b == nil {
			return reply{}, keep, err
		}
		return reply{bufs: net.Buffers{b}}, keep, err
	}
	if e, ok := s.extra[h.key]; ok {
		return s.handleExtra(e, h, r, principal, remote)
	}
	if len(frame) > int(s.cfg.MaxRequestSize) {
		return reply{}, false, &errClose{fmt.Sprintf("key %d request of %d bytes from %s (limit %d)", h.key, len(frame), remote, s.cfg.MaxRequestSize)}
	}
	req, ok := NewRequest(h.key, h.version)
	if !ok {
		// Kafka closes the connection for unknown keys and for unsupported
		// versions of keys other than ApiVersions: no response shape fits.
		return reply{}, false, &errClose{fmt.Sprintf("unsupported request key %d version %d from %s", h.key, h.version, remote)}
	}
	kmsg.SkipTags(&r) // every mirror RPC version is flexible: header v2
	if !r.Ok() {
		return reply{}, false, &errClose{fmt.Sprintf("truncated request header tags from %s", remote)}
	}
	rc := &RequestContext{Principal: principal, ClientID: h.clientID, RemoteAddr: remote,
		Key: h.key, Version: h.version, CorrelationID: h.correlation}
	var resp kmsg.Response
	keep = true
	if derr := decodeRequest(req, r.Src, s.cfg.MaxDecodedElements); derr != nil {
		resp = errorResponse(req, CodeInvalidRequest, derr.Error())
		err = fmt.Errorf("admin: request from %s: %w", remote, derr)
	} else {
		var panicked bool
		resp, panicked, err = s.call(rc, req)
		keep = !panicked
	}
	resp.SetVersion(h.version)
	return reply{bufs: net.Buffers{appendResponseFrame(nil, h.correlation, true, resp)}}, keep, err
}

// call authorizes and dispatches req, turning handler errors and panics into
// error responses.
func (s *Server) call(rc *RequestContext, req kmsg.Request) (resp kmsg.Response, panicked bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp = errorResponse(req, CodeUnknownServerError, "internal error")
			panicked = true
			err = fmt.Errorf("admin: handler panic on key %d from %s: %v", rc.Key, rc.RemoteAddr, p)
		}
	}()
	// The Authorizer gets the request's context (RequestContextFrom): an ACL
	// decision needs the client's address for the hosts of the bindings.
	actx := context.WithValue(s.ctx, requestContextKey{}, rc)
	resp, herr := Authorize(actx, s.cfg.Authorizer, rc.Principal, req, func(r kmsg.Request) (kmsg.Response, error) {
		return Dispatch(s.ctx, s.cfg.Handler, rc, r)
	})
	switch {
	case resp == nil && herr == nil:
		return errorResponse(req, CodeUnknownServerError, "handler returned no response"), false,
			fmt.Errorf("admin: handler for key %d returned neither response nor error", rc.Key)
	case resp == nil || herr != nil:
		return errorResponse(req, CodeOf(herr), herrMessage(herr)), false, nil
	}
	return resp, false, nil
}

// herrMessage is the ErrorMessage for a handler error (MessageOf): the message of
// an *Error, with the context wrapped around it but not its code, which the
// ErrorCode carries; the error text otherwise.
func herrMessage(err error) string { return MessageOf(err) }

// handleAPIVersions answers ApiVersions with exactly the implemented RPCs
// (the mirror RPCs and the ExtraAPI keys).
// An unsupported ApiVersions version is answered at version 0 with
// UNSUPPORTED_VERSION, as Kafka does, so clients can retry lower.
func (s *Server) handleAPIVersions(h header, r kbin.Reader) ([]byte, bool, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = append(append(advertisedKeys(), s.saslKeys()...), s.extraKeys()...)
	if h.version < 0 || h.version > req.MaxVersion() {
		resp.Version = 0
		resp.ErrorCode = int16(CodeUnsupportedVersion)
		return appendResponseFrame(nil, h.correlation, false, resp), true, nil
	}
	req.Version = h.version
	resp.Version = h.version
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return nil, false, &errClose{"truncated ApiVersions header"}
	}
	if err := req.ReadFrom(r.Src); err != nil {
		resp.ErrorCode = int16(CodeInvalidRequest)
	}
	// ApiVersions responses always use response header v0.
	return appendResponseFrame(nil, h.correlation, false, resp), true, nil
}

// advertisedKeys lists ApiVersions itself and every implemented RPC.
func advertisedKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := []kmsg.ApiVersionsResponseApiKey{{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: kmsg.NewPtrApiVersionsRequest().MaxVersion()}}
	for _, a := range apiTable {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.Key, MinVersion: a.MinVersion, MaxVersion: a.MaxVersion})
	}
	return keys
}

// appendResponseFrame appends size, correlation id, the response header tags
// (header v1, when flexibleHeader) and the body.
func appendResponseFrame(dst []byte, correlation int32, flexibleHeader bool, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, correlation)
	if flexibleHeader {
		dst = append(dst, 0) // no header tags
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
