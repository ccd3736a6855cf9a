package admin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/admin/scram"
)

// memCreds is an in-memory CredentialStore.
type memCreds struct {
	mu    sync.Mutex
	creds map[string]scram.Credential // mechanism name + "/" + user
	err   error
}

func (m *memCreds) add(t *testing.T, mech scram.Mechanism, user, password string) {
	t.Helper()
	c, err := mech.NewCredential(password, []byte("salt-"+user), scram.MinIterations)
	require.NoError(t, err)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.creds == nil {
		m.creds = map[string]scram.Credential{}
	}
	m.creds[mech.Name+"/"+user] = c
}

func (m *memCreds) ScramCredential(mech scram.Mechanism, user string) (scram.Credential, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.creds[mech.Name+"/"+user]
	return c, ok, m.err
}

// saslServer starts a server with SASL over plaintext and the given users
// (password "<user>-secret", both SCRAM mechanisms) and returns its address,
// the principals its handler saw and the authentication events.
func saslServer(t *testing.T, mechs []string, users ...string) (*Server, string, chan string, chan AuthEvent) {
	creds := &memCreds{}
	for _, u := range users {
		creds.add(t, scram.SHA256, u, u+"-secret")
		creds.add(t, scram.SHA512, u, u+"-secret")
	}
	principals := make(chan string, 16)
	events := make(chan AuthEvent, 16)
	h := &funcHandler{fn: func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		principals <- rc.Principal
		return req.ResponseKind(), nil
	}}
	srv, addr := startServer(t, ServerConfig{Handler: h, SASL: &SASLConfig{Mechanisms: mechs, Credentials: creds,
		OnAuth: func(e AuthEvent) { events <- e }}})
	return srv, addr, principals, events
}

func saslClient(t *testing.T, addr string, m sasl.Mechanism, tlsCfg *tls.Config) *Client {
	t.Helper()
	opts := append(ClientOpts(), kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.SASL(m))
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return NewClient(cl)
}

func TestSASLMechanismsOverKgo(t *testing.T) {
	all := []string{MechanismScramSHA512, MechanismScramSHA256, MechanismPlain}
	srv, addr, principals, events := saslServer(t, all, "alice")
	for _, tc := range []struct {
		name string
		m    sasl.Mechanism
	}{
		{"SCRAM-SHA-512", kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()},
		{"SCRAM-SHA-256", kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()},
		{"PLAIN", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := saslClient(t, addr, tc.m, nil).ListClusterMirrors(context.Background(), NewPtrListClusterMirrorsRequest())
			require.NoError(t, err)
			require.Equal(t, "User:alice", <-principals)
			e := <-events
			require.NoError(t, e.Err)
			require.Equal(t, tc.name, e.Mechanism)
			require.Equal(t, "User:alice", e.Principal)
		})
	}
	require.Zero(t, srv.AuthFailures())
}

func TestSASLWrongPassword(t *testing.T) {
	srv, addr, principals, events := saslServer(t, []string{MechanismScramSHA512, MechanismPlain}, "alice")
	for _, m := range []sasl.Mechanism{
		kscram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism(),
		kscram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(),
		plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
		plain.Auth{User: "mallory", Pass: "x"}.AsMechanism(),
	} {
		_, err := saslClient(t, addr, m, nil).ListClusterMirrors(context.Background(), NewPtrListClusterMirrorsRequest())
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, "%s", m.Name())
		e := <-events
		require.ErrorIs(t, e.Err, ErrAuthentication)
		require.Empty(t, e.Principal)
	}
	require.Equal(t, uint64(4), srv.AuthFailures())
	require.Empty(t, principals, "no request reached the handler")
}

// handshake sends SaslHandshake v1 on rc.
func handshake(t *testing.T, rc *rawConn, mech string) *kmsg.SASLHandshakeResponse {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, mech
	return rc.roundTrip(req).(*kmsg.SASLHandshakeResponse)
}

func authenticate(t *testing.T, rc *rawConn, version int16, token []byte) *kmsg.SASLAuthenticateResponse {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = version, token
	return rc.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
}

func TestSASLStateMachineOnTheWire(t *testing.T) {
	_, addr, _, _ := saslServer(t, []string{MechanismPlain, MechanismScramSHA512}, "alice")
	list := func() kmsg.Request {
		r := NewPtrListClusterMirrorsRequest()
		r.Version = r.MaxVersion()
		return r
	}
	t.Run("ApiVersions advertises the SASL keys before authentication", func(t *testing.T) {
		rc := dialRaw(t, addr)
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 3
		resp := rc.roundTrip(av).(*kmsg.ApiVersionsResponse)
		keys := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			keys[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		require.Equal(t, [2]int16{1, 1}, keys[17])
		require.Equal(t, [2]int16{0, 2}, keys[36])
	})
	t.Run("any other request before authentication closes", func(t *testing.T) {
		rc := dialRaw(t, addr)
		rc.send(list())
		rc.expectClosed()
	})
	t.Run("unsupported mechanism answers and closes", func(t *testing.T) {
		rc := dialRaw(t, addr)
		resp := handshake(t, rc, "GSSAPI")
		require.Equal(t, int16(CodeUnsupportedSaslMechanism), resp.ErrorCode)
		require.Equal(t, []string{MechanismPlain, MechanismScramSHA512}, resp.SupportedMechanisms)
		rc.expectClosed()
	})
	t.Run("authenticate before handshake closes unanswered", func(t *testing.T) {
		rc := dialRaw(t, addr)
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, []byte("\x00alice\x00alice-secret")
		rc.send(req)
		rc.expectClosed()
	})
	t.Run("another request after the handshake closes", func(t *testing.T) {
		rc := dialRaw(t, addr)
		require.Zero(t, handshake(t, rc, MechanismPlain).ErrorCode)
		rc.send(list())
		rc.expectClosed()
	})
	t.Run("second handshake is ILLEGAL_SASL_STATE and closes", func(t *testing.T) {
		rc := dialRaw(t, addr)
		require.Zero(t, handshake(t, rc, MechanismPlain).ErrorCode)
		require.Equal(t, int16(CodeIllegalSaslState), handshake(t, rc, MechanismPlain).ErrorCode)
		rc.expectClosed()
	})
	t.Run("handshake v0 closes", func(t *testing.T) {
		rc := dialRaw(t, addr)
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 0, MechanismPlain
		rc.send(req)
		rc.expectClosed()
	})
	for v := int16(0); v <= 2; v++ {
		t.Run("PLAIN then requests, then ILLEGAL_SASL_STATE without closing, SaslAuthenticate v"+string(rune('0'+v)), func(t *testing.T) {
			rc := dialRaw(t, addr)
			require.Zero(t, handshake(t, rc, MechanismPlain).ErrorCode)
			resp := authenticate(t, rc, v, []byte("\x00alice\x00alice-secret"))
			require.Zero(t, resp.ErrorCode, "%v", resp.ErrorMessage)
			require.Zero(t, resp.SessionLifetimeMillis)
			require.Zero(t, rc.roundTrip(list()).(*ListClusterMirrorsResponse).ErrorCode)
			require.Equal(t, int16(CodeIllegalSaslState), handshake(t, rc, MechanismPlain).ErrorCode)
			require.Equal(t, int16(CodeIllegalSaslState), authenticate(t, rc, v, nil).ErrorCode)
			require.Zero(t, rc.roundTrip(list()).(*ListClusterMirrorsResponse).ErrorCode, "still open")
		})
	}
	t.Run("wrong password: SASL_AUTHENTICATION_FAILED with a message, then closed", func(t *testing.T) {
		rc := dialRaw(t, addr)
		require.Zero(t, handshake(t, rc, MechanismPlain).ErrorCode)
		resp := authenticate(t, rc, 2, []byte("\x00alice\x00nope"))
		require.Equal(t, int16(CodeSaslAuthenticationFailed), resp.ErrorCode)
		require.NotNil(t, resp.ErrorMessage)
		require.Contains(t, *resp.ErrorMessage, "invalid credentials with SASL mechanism PLAIN")
		rc.expectClosed()
	})
	t.Run("malformed SCRAM message", func(t *testing.T) {
		rc := dialRaw(t, addr)
		require.Zero(t, handshake(t, rc, MechanismScramSHA512).ErrorCode)
		resp := authenticate(t, rc, 2, []byte("p=tls-unique,,n=alice,r=abc"))
		require.Equal(t, int16(CodeSaslAuthenticationFailed), resp.ErrorCode)
		require.Contains(t, *resp.ErrorMessage, "channel binding")
		rc.expectClosed()
	})
	t.Run("frames over the unauthenticated limit close before their body", func(t *testing.T) {
		rc := dialRaw(t, addr)
		_, err := rc.c.Write([]byte{0, 2, 0, 0, 0, 36}) // 128 KiB announced
		require.NoError(t, err)
		rc.expectClosed()
	})
}

func TestSASLAuthenticationTimeout(t *testing.T) {
	creds := &memCreds{}
	events := make(chan AuthEvent, 1)
	srv, addr := startServer(t, ServerConfig{Handler: UnimplementedHandler{}, SASL: &SASLConfig{
		Mechanisms: []string{MechanismPlain}, Credentials: creds, Timeout: 50 * time.Millisecond,
		OnAuth: func(e AuthEvent) { events <- e }}})
	rc := dialRaw(t, addr)
	require.Zero(t, handshake(t, rc, MechanismPlain).ErrorCode)
	rc.expectClosed() // the client never authenticates
	e := <-events
	require.ErrorContains(t, e.Err, "not authenticated within 50ms")
	require.Equal(t, uint64(1), srv.AuthFailures())
}

func TestSASLCredentialStoreError(t *testing.T) {
	creds := &memCreds{err: errors.New("disk on fire")}
	events := make(chan AuthEvent, 1)
	_, addr := startServer(t, ServerConfig{Handler: UnimplementedHandler{}, SASL: &SASLConfig{
		Mechanisms: []string{MechanismScramSHA256}, Credentials: creds, OnAuth: func(e AuthEvent) { events <- e }}})
	_, err := saslClient(t, addr, kscram.Auth{User: "a", Pass: "b"}.AsSha256Mechanism(), nil).
		ListClusterMirrors(context.Background(), NewPtrListClusterMirrorsRequest())
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	require.NotContains(t, err.Error(), "disk on fire", "the store's error is not told to the client")
	require.ErrorContains(t, (<-events).Err, "disk on fire")
}

func TestSASLConfigValidate(t *testing.T) {
	for _, c := range []SASLConfig{
		{Credentials: &memCreds{}},
		{Mechanisms: []string{"GSSAPI"}, Credentials: &memCreds{}},
		{Mechanisms: []string{MechanismPlain, MechanismPlain}, Credentials: &memCreds{}},
		{Mechanisms: []string{MechanismPlain}},
		{Mechanisms: []string{MechanismPlain}, Credentials: &memCreds{}, Timeout: -1},
	} {
		_, err := NewServer(ServerConfig{Handler: UnimplementedHandler{}, SASL: &c})
		require.Error(t, err, "%+v", c)
	}
}

// TestSASLOverTLSWithClientCert: the SASL user, not the certificate, is the
// principal of a SASL_SSL connection.
func TestSASLOverTLSWithClientCert(t *testing.T) {
	srvCert, srvLeaf := selfSigned(t, "server")
	cliCert, cliLeaf := selfSigned(t, "client-1")
	srvPool, cliPool := x509.NewCertPool(), x509.NewCertPool()
	srvPool.AddCert(cliLeaf)
	cliPool.AddCert(srvLeaf)
	creds := &memCreds{}
	creds.add(t, scram.SHA512, "alice", "pw")
	principals := make(chan string, 1)
	h := &funcHandler{fn: func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		principals <- rc.Principal
		return req.ResponseKind(), nil
	}}
	_, addr := startServer(t, ServerConfig{Handler: h, TLS: &tls.Config{
		Certificates: []tls.Certificate{srvCert}, ClientCAs: srvPool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12}, SASL: &SASLConfig{Mechanisms: []string{MechanismScramSHA512}, Credentials: creds}})
	cl := saslClient(t, addr, kscram.Auth{User: "alice", Pass: "pw"}.AsSha512Mechanism(),
		&tls.Config{Certificates: []tls.Certificate{cliCert}, RootCAs: cliPool, MinVersion: tls.VersionTLS12})
	_, err := cl.ListClusterMirrors(context.Background(), NewPtrListClusterMirrorsRequest())
	require.NoError(t, err)
	require.Equal(t, "User:alice", <-principals)
}

// TestCertificatePrincipalRFC2253 checks the form Java's X500Principal
// gives (what Kafka's DEFAULT mapping names): reverse order of the
// certificate's RDNs as they are encoded, escapes, and OIDs without a
// keyword as hex DER.
func TestCertificatePrincipalRFC2253(t *testing.T) {
	oid := func(s ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(s) }
	rdns := pkix.RDNSequence{
		{{Type: oid(2, 5, 4, 6), Value: "US"}},
		{{Type: oid(2, 5, 4, 10), Value: "Acme, Inc."}},
		{{Type: oid(2, 5, 4, 11), Value: "eng"}, {Type: oid(2, 5, 4, 11), Value: "ops"}},
		{{Type: oid(0, 9, 2342, 19200300, 100, 1, 25), Value: "example"}},
		{{Type: oid(1, 2, 840, 113549, 1, 9, 1), Value: "a@b"}},
		{{Type: oid(2, 5, 4, 3), Value: " client#1 "}},
	}
	raw, err := asn1.Marshal(rdns)
	require.NoError(t, err)
	got := CertificatePrincipal(&x509.Certificate{RawSubject: raw})
	// "a@b" is not a PrintableString: Go encodes it as UTF8String (tag 0x0c).
	require.Equal(t, `User:CN=\ client#1\ ,1.2.840.113549.1.9.1=#0c03614062,DC=example,OU=eng+OU=ops,O=Acme\, Inc.,C=US`, got)

	// A subject encoded CN first (as openssl -subj /CN=a/O=b writes it) prints
	// O first, as Java does; pkix.Name.String reorders the RDNs and would say
	// CN=a,O=b.
	raw, err = asn1.Marshal(pkix.RDNSequence{{{Type: oid(2, 5, 4, 3), Value: "a"}}, {{Type: oid(2, 5, 4, 10), Value: "b"}}})
	require.NoError(t, err)
	require.Equal(t, "User:O=b,CN=a", CertificatePrincipal(&x509.Certificate{RawSubject: raw}))
	var name pkix.Name
	var seq pkix.RDNSequence
	_, err = asn1.Unmarshal(raw, &seq)
	require.NoError(t, err)
	name.FillFromRDNSequence(&seq)
	require.Equal(t, "CN=a,O=b", name.String(), "what DefaultPrincipal used to print")

	// Go's pkix.Name order (C, O, OU, CN for a template) is what Java prints too.
	_, leaf := selfSigned(t, "client-1")
	require.Equal(t, "User:CN=client-1", CertificatePrincipal(leaf))
}

// FuzzSASLFrame: no frame sequence on a connection that has not
// authenticated panics the server or reaches the handler.
func FuzzSASLFrame(f *testing.F) {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, MechanismScramSHA256
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("n,,n=alice,r=abc")
	fm := kmsg.NewRequestFormatter()
	f.Add(fm.AppendRequest(nil, hs, 1)[4:], fm.AppendRequest(nil, au, 2)[4:])
	f.Add([]byte{0, 17, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 5, 'P', 'L', 'A', 'I', 'N'}, []byte{0, 36, 0, 0, 0, 0, 0, 2, 0xff, 0xff, 0, 0, 0, 3, 0, 'a', 0})
	creds := &memCreds{}
	c, err := scram.SHA256.NewCredential("pw", []byte("salt"), scram.MinIterations)
	require.NoError(f, err)
	creds.creds = map[string]scram.Credential{scram.SHA256.Name + "/alice": c}
	var reached atomic.Bool
	srv, err := NewServer(ServerConfig{Handler: &funcHandler{fn: func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		reached.Store(true)
		return req.ResponseKind(), nil
	}}, SASL: &SASLConfig{Mechanisms: []string{MechanismPlain, MechanismScramSHA256}, Credentials: creds}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, first, second []byte) {
		a := &connAuth{state: authHandshake, principal: "User:ANONYMOUS"}
		for _, frame := range [][]byte{first, second} {
			before := a.authenticated()
			reached.Store(false)
			rep, keep, _ := srv.handleConnFrame(frame, a, "fuzz")
			rep.finish()
			if reached.Load() && !before {
				t.Fatalf("a request reached the handler before authentication: %x", frame)
			}
			if !keep {
				return
			}
		}
	})
}
