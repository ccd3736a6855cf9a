package admin

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin/scram"
)

// SASL mechanism names a SASLConfig may enable.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// API keys of the SASL exchange, served by the Server itself.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// MaxUnauthenticatedFrame bounds every request frame of a connection that has
// not authenticated yet (ApiVersions, SaslHandshake, SaslAuthenticate), as
// Kafka's sasl.server.max.receive.size does; a larger frame closes the
// connection before its body is read.
const MaxUnauthenticatedFrame = 64 << 10

// DefaultAuthTimeout is the default of SASLConfig.Timeout.
const DefaultAuthTimeout = 30 * time.Second

// SASLConfig turns on SASL authentication on a Server: SASL_PLAINTEXT on a
// plain listener, SASL_SSL with ServerConfig.TLS. A connection must then
// authenticate (SaslHandshake v1, then SaslAuthenticate v0-v2) before any
// request other than ApiVersions is served; any other request closes it, as
// Kafka does. Its principal is then "User:<name>", whatever a TLS client
// certificate says.
type SASLConfig struct {
	// Mechanisms are the enabled mechanisms (MechanismPlain,
	// MechanismScramSHA256, MechanismScramSHA512), as SaslHandshake lists
	// them. At least one.
	Mechanisms []string
	// Credentials answers the SCRAM credential of a user. PLAIN is verified
	// against the same credentials (SCRAM-SHA-512 first, then SCRAM-SHA-256):
	// a server keeps no password. Required.
	Credentials CredentialStore
	// Timeout bounds the time from accepting a connection (after its TLS
	// handshake) to the end of its authentication; a connection not
	// authenticated by then is closed. 0 means DefaultAuthTimeout.
	Timeout time.Duration
	// OnAuth, when set, is told of every authentication that ended (success
	// or failure). It runs on the connection's goroutine and must not block.
	OnAuth func(AuthEvent)
}

// CredentialStore is what a Server needs of a SCRAM credential store.
type CredentialStore interface {
	// ScramCredential returns user's credential for mechanism: found false
	// for none; an error when the store cannot answer (the client is then
	// refused, and the error reported). It must return promptly.
	ScramCredential(mechanism scram.Mechanism, user string) (c scram.Credential, found bool, err error)
}

// AuthEvent is one authentication that ended on a connection.
type AuthEvent struct {
	RemoteAddr string
	Mechanism  string // "" when the client named none (or an unknown one: see Err)
	User       string // the name the client gave, when it got that far
	Principal  string // the connection's principal on success
	Err        error  // nil on success
}

// ErrAuthentication is wrapped by AuthEvent.Err of a failed authentication.
var ErrAuthentication = errors.New("admin: authentication failed")

// validate checks c (zero fields standing for their defaults).
func (c *SASLConfig) validate() error {
	if len(c.Mechanisms) == 0 {
		return errors.New("admin: SASLConfig.Mechanisms is empty")
	}
	for i, m := range c.Mechanisms {
		switch m {
		case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		default:
			return fmt.Errorf("admin: SASLConfig.Mechanisms: unsupported mechanism %q (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", m)
		}
		if slices.Contains(c.Mechanisms[:i], m) {
			return fmt.Errorf("admin: SASLConfig.Mechanisms: %q listed twice", m)
		}
	}
	if c.Credentials == nil {
		return errors.New("admin: SASLConfig.Credentials is nil")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("admin: negative SASLConfig.Timeout %v", c.Timeout)
	}
	return nil
}

// AuthFailures returns the number of failed authentications since the
// server started (wrong credentials, unknown users or mechanisms, SASL
// protocol errors, timeouts).
func (s *Server) AuthFailures() uint64 { return s.authFailures.Load() }

// authState is where a connection is in Kafka's SASL state machine.
type authState int8

const (
	authDone      authState = iota // authenticated, or no SASL: every key is served
	authHandshake                  // waiting for SaslHandshake (ApiVersions allowed)
	authToken                      // mechanism chosen, waiting for SaslAuthenticate
)

// connAuth is the authentication of one connection; owned by its goroutine.
type connAuth struct {
	state     authState
	principal string
	mech      string
	user      string
	conv      *scram.Conversation
	timeout   time.Duration
	timer     *time.Timer // closes the connection at the authentication deadline
	timedOut  atomic.Bool
	failed    bool // a failure was counted (the timeout is then not counted again)
}

// newConnAuth starts the authentication of c, whose principal before SASL
// (its TLS identity or ANONYMOUS) is principal.
func (s *Server) newConnAuth(c net.Conn, principal string) *connAuth {
	a := &connAuth{principal: principal}
	if s.cfg.SASL == nil {
		return a
	}
	a.state = authHandshake
	timeout := s.cfg.SASL.Timeout // withDefaults set it
	a.timeout = timeout
	a.timer = time.AfterFunc(timeout, func() {
		a.timedOut.Store(true)
		_ = c.Close()
	})
	return a
}

// endConnAuth stops the deadline of a and counts a connection closed by it.
func (s *Server) endConnAuth(a *connAuth, remote string) {
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.state != authDone && !a.failed && a.timedOut.Load() {
		s.authFailed(a, remote, fmt.Errorf("%w: not authenticated within %v", ErrAuthentication, a.timeout))
	}
}

// authenticated reports whether every key may be served.
func (a *connAuth) authenticated() bool { return a.state == authDone }

// handleConnFrame serves one frame of a connection: the SASL keys, and
// until the connection is authenticated nothing but ApiVersions; then
// handleFrame with the connection's principal.
func (s *Server) handleConnFrame(frame []byte, a *connAuth, remote string) (reply, bool, error) {
	if len(frame) >= 2 {
		switch key := int16(binary.BigEndian.Uint16(frame)); {
		case key == saslHandshakeKey || key == saslAuthenticateKey:
			return s.handleSASL(frame, a, remote)
		case a.state == authHandshake && key == apiVersionsKey:
		case a.state != authDone:
			err := &errClose{fmt.Sprintf("request key %d from %s before SASL authentication", key, remote)}
			s.authFailed(a, remote, fmt.Errorf("%w: %s", ErrAuthentication, err.reason))
			return reply{}, false, err
		}
	}
	return s.handleFrame(frame, a.principal, remote)
}

// handleSASL serves SaslHandshake and SaslAuthenticate.
func (s *Server) handleSASL(frame []byte, a *connAuth, remote string) (reply, bool, error) {
	r := kbin.Reader{Src: frame}
	var h header
	h.key, h.version, h.correlation = r.Int16(), r.Int16(), r.Int32()
	h.clientID = r.NullableString()
	if !r.Ok() {
		return reply{}, false, &errClose{fmt.Sprintf("truncated request header from %s", remote)}
	}
	if h.key == saslHandshakeKey {
		return s.handleHandshake(h, r, a, remote)
	}
	return s.handleAuthenticate(h, r, a, remote)
}

// handleHandshake serves SaslHandshake v1. Version 0 (tokens without Kafka
// framing after it) is not supported: it closes the connection, as any
// version outside the advertised range does.
func (s *Server) handleHandshake(h header, r kbin.Reader, a *connAuth, remote string) (reply, bool, error) {
	if h.version != 1 {
		err := &errClose{fmt.Sprintf("SaslHandshake v%d from %s (only v1 is served)", h.version, remote)}
		if a.state != authDone {
			s.authFailed(a, remote, fmt.Errorf("%w: %s", ErrAuthentication, err.reason))
		}
		return reply{}, false, err
	}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = h.version
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = h.version
	if s.cfg.SASL != nil {
		resp.SupportedMechanisms = append([]string(nil), s.cfg.SASL.Mechanisms...)
	}
	out := func(code Code, keep bool, err error) (reply, bool, error) {
		resp.ErrorCode = int16(code)
		return reply{bufs: net.Buffers{appendResponseFrame(nil, h.correlation, false, resp)}}, keep, err
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return reply{}, false, &errClose{fmt.Sprintf("malformed SaslHandshake from %s: %v", remote, err)}
	}
	switch a.state {
	case authDone: // no SASL on this server, or already authenticated (no re-authentication)
		return out(CodeIllegalSaslState, true, nil)
	case authToken: // Kafka: ILLEGAL_SASL_STATE in the request's own shape, then closed
		err := fmt.Errorf("%w: second SaslHandshake from %s", ErrAuthentication, remote)
		s.authFailed(a, remote, err)
		return out(CodeIllegalSaslState, false, nil)
	}
	if !slices.Contains(s.cfg.SASL.Mechanisms, req.Mechanism) {
		a.mech = limitText(req.Mechanism) // named in the failure event; the connection closes
		s.authFailed(a, remote, fmt.Errorf("%w: unsupported SASL mechanism %q", ErrAuthentication, limitText(req.Mechanism)))
		return out(CodeUnsupportedSaslMechanism, false, nil)
	}
	a.mech, a.state = req.Mechanism, authToken
	return out(CodeNone, true, nil)
}

// handleAuthenticate serves SaslAuthenticate v0-v2 (SessionLifetimeMs is 0:
// no re-authentication is asked for).
func (s *Server) handleAuthenticate(h header, r kbin.Reader, a *connAuth, remote string) (reply, bool, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	if h.version < 0 || h.version > 2 {
		return reply{}, false, &errClose{fmt.Sprintf("SaslAuthenticate v%d from %s (v0-v2 are served)", h.version, remote)}
	}
	req.Version = h.version
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := req.ReadFrom(r.Src); !r.Ok() || err != nil {
		return reply{}, false, &errClose{fmt.Sprintf("malformed SaslAuthenticate from %s", remote)}
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = h.version
	out := func(code Code, msg string, token []byte, keep bool) (reply, bool, error) {
		resp.ErrorCode = int16(code)
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		resp.SASLAuthBytes = token
		if resp.SASLAuthBytes == nil {
			resp.SASLAuthBytes = []byte{}
		}
		return reply{bufs: net.Buffers{appendResponseFrame(nil, h.correlation, req.IsFlexible(), resp)}}, keep, nil
	}
	switch a.state {
	case authDone:
		return out(CodeIllegalSaslState, "SaslAuthenticate request received after successful authentication", nil, true)
	case authHandshake: // Kafka: an unexpected request during the handshake, closed unanswered
		err := &errClose{fmt.Sprintf("SaslAuthenticate from %s before SaslHandshake", remote)}
		s.authFailed(a, remote, fmt.Errorf("%w: %s", ErrAuthentication, err.reason))
		return reply{}, false, err
	}
	token, done, user, err := s.saslStep(a, req.SASLAuthBytes)
	if user != "" {
		a.user = user
	}
	if err != nil {
		s.authFailed(a, remote, err)
		return out(CodeSaslAuthenticationFailed, authFailureMessage(a.mech, err), nil, false)
	}
	if done {
		a.state, a.principal, a.conv = authDone, "User:"+a.user, nil
		if a.timer != nil {
			a.timer.Stop()
		}
		if fn := s.cfg.SASL.OnAuth; fn != nil {
			fn(AuthEvent{RemoteAddr: remote, Mechanism: a.mech, User: a.user, Principal: a.principal})
		}
	}
	return out(CodeNone, "", token, true)
}

// errInternalAuth marks a failure of the server (the credential store, the
// random source), not of the client.
var errInternalAuth = errors.New("admin: authentication could not be checked")

// authFailureMessage is the ErrorMessage of a failed SaslAuthenticate: the
// same text for a wrong password and an unknown user (Kafka's), the protocol
// problem otherwise; never what the store said.
func authFailureMessage(mech string, err error) string {
	switch {
	case errors.Is(err, scram.ErrProtocol):
		return "Authentication failed: " + limitText(err.Error())
	case errors.Is(err, errInternalAuth):
		return "Authentication failed due to an internal error of the server with SASL mechanism " + mech
	}
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech
}

// saslStep runs one token of the chosen mechanism.
func (s *Server) saslStep(a *connAuth, token []byte) (out []byte, done bool, user string, err error) {
	if a.mech == MechanismPlain {
		user, password, err := scram.ParsePlain(token)
		if err != nil {
			return nil, false, user, fmt.Errorf("%w: %w", ErrAuthentication, err)
		}
		for _, m := range []scram.Mechanism{scram.SHA512, scram.SHA256} {
			cred, found, err := s.cfg.SASL.Credentials.ScramCredential(m, user)
			if err != nil {
				return nil, false, user, fmt.Errorf("%w: %w: credential store: %w", ErrAuthentication, errInternalAuth, err)
			}
			if !found {
				continue
			}
			ok, err := cred.VerifyPassword(password)
			if err != nil {
				return nil, false, user, fmt.Errorf("%w: %w: stored %s credential of %q: %w", ErrAuthentication, errInternalAuth, m.Name, user, err)
			}
			if !ok {
				return nil, false, user, fmt.Errorf("%w: %w: wrong password", ErrAuthentication, scram.ErrAuthFailed)
			}
			return nil, true, user, nil
		}
		return nil, false, user, fmt.Errorf("%w: %w: unknown user", ErrAuthentication, scram.ErrAuthFailed)
	}
	if a.conv == nil {
		m, _ := scram.ByName(a.mech)
		var random [scram.ServerNonceSize]byte
		if _, err := rand.Read(random[:]); err != nil {
			return nil, false, "", fmt.Errorf("%w: %w: random nonce: %w", ErrAuthentication, errInternalAuth, err)
		}
		store := s.cfg.SASL.Credentials
		conv, err := scram.NewConversation(m, func(user string) (scram.Credential, bool, error) {
			c, found, err := store.ScramCredential(m, user)
			if err != nil {
				err = fmt.Errorf("%w: %w", errInternalAuth, err)
			}
			return c, found, err
		}, random[:])
		if err != nil {
			return nil, false, "", fmt.Errorf("%w: %w: %w", ErrAuthentication, errInternalAuth, err)
		}
		a.conv = conv
	}
	out, done, err = a.conv.Step(token)
	if err != nil {
		return nil, false, a.conv.User(), fmt.Errorf("%w: %w", ErrAuthentication, err)
	}
	return out, done, a.conv.User(), nil
}

// authFailed counts and reports one failed authentication.
func (s *Server) authFailed(a *connAuth, remote string, err error) {
	a.failed = true
	s.authFailures.Add(1)
	if s.cfg.SASL != nil && s.cfg.SASL.OnAuth != nil {
		s.cfg.SASL.OnAuth(AuthEvent{RemoteAddr: remote, Mechanism: a.mech, User: a.user, Err: err})
	}
}

// limitText cuts client-given text for messages and logs.
func limitText(s string) string {
	const n = 128
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// saslKeys lists the SASL keys for ApiVersions when SASL is on.
func (s *Server) saslKeys() []kmsg.ApiVersionsResponseApiKey {
	if s.cfg.SASL == nil {
		return nil
	}
	return []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: saslHandshakeKey, MinVersion: 1, MaxVersion: 1},
		{ApiKey: saslAuthenticateKey, MinVersion: 0, MaxVersion: 2},
	}
}

// frameLimit is the largest frame a connection may send now:
// MaxUnauthenticatedFrame until it authenticated.
func (s *Server) frameLimit(a *connAuth) int32 {
	if !a.authenticated() {
		return min(MaxUnauthenticatedFrame, s.cfg.MaxRequestSize)
	}
	return s.cfg.MaxRequestSize
}
