package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror/auth"
	"github.com/kmirror/kmirror/mirror/dataplane"
)

// securityOptions are the listener's authentication flags.
type securityOptions struct {
	tlsCert, tlsKey, tlsClientCA string
	saslMechanisms               []string
	addScram                     []string
	allowAnonymous               bool
}

// register adds the flags to fs.
func (s *securityOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM `file` of the listener's certificate chain (TLS: SSL, or SASL_SSL with -sasl-mechanisms)")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM `file` of the private key of -tls-cert")
	fs.StringVar(&s.tlsClientCA, "tls-client-ca", "", "PEM `file` of the CAs whose client certificates are required; the principal is User:<subject DN, RFC 2253>")
	fs.Func("sasl-mechanisms", "comma-separated SASL `mechanisms` every client must authenticate with (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN), checked against the SCRAM credentials in the data directory", func(v string) error {
		for _, m := range strings.Split(v, ",") {
			m = strings.ToUpper(strings.TrimSpace(m))
			switch m {
			case admin.MechanismPlain, admin.MechanismScramSHA256, admin.MechanismScramSHA512:
			default:
				return fmt.Errorf("unsupported mechanism %q (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN)", m)
			}
			if !slices.Contains(s.saslMechanisms, m) {
				s.saslMechanisms = append(s.saslMechanisms, m)
			}
		}
		return nil
	})
	fs.Func("add-scram", "add or replace a SCRAM credential in the data directory before listening, as kafka-storage's --add-scram: 'SCRAM-SHA-512=[name=admin,password=secret]' (repeatable)", func(v string) error {
		s.addScram = append(s.addScram, v)
		return nil
	})
	fs.BoolVar(&s.allowAnonymous, "allow-anonymous", false, "allow unauthenticated (User:ANONYMOUS) clients on a listener that is not loopback")
}

// authenticates reports whether every connection authenticates.
func (s *securityOptions) authenticates() bool {
	return len(s.saslMechanisms) > 0 || s.tlsClientCA != ""
}

// check validates the flags against the listen address: TLS needs both
// -tls-cert and -tls-key, -tls-client-ca needs TLS, and a listener that is not
// loopback needs authentication or -allow-anonymous.
func (s *securityOptions) check(listen string) error {
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return usagef("-tls-cert and -tls-key go together")
	}
	if s.tlsClientCA != "" && s.tlsCert == "" {
		return usagef("-tls-client-ca needs -tls-cert and -tls-key")
	}
	for _, v := range s.addScram {
		if _, err := auth.ParseAddScram(v); err != nil {
			return usagef("-add-scram: %v", err)
		}
	}
	host, _, _ := net.SplitHostPort(listen)
	if !s.authenticates() && !s.allowAnonymous && !loopback(host) {
		return usagef("-listen %s is not a loopback address and no client authenticates (-sasl-mechanisms or -tls-client-ca); pass -allow-anonymous to serve anonymous clients", listen)
	}
	return nil
}

// loopback reports whether host names only this machine.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsConfig builds the listener's TLS config (nil without -tls-cert).
func (s *securityOptions) tlsConfig() (*tls.Config, error) {
	if s.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("kmirrord: -tls-cert/-tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if s.tlsClientCA != "" {
		pem, err := os.ReadFile(s.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("kmirrord: -tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kmirrord: -tls-client-ca: no PEM certificate in %s", s.tlsClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// protocol names the listener's security protocol as Kafka does.
func (s *securityOptions) protocol() string {
	switch {
	case s.tlsCert != "" && len(s.saslMechanisms) > 0:
		return "SASL_SSL"
	case s.tlsCert != "":
		return "SSL"
	case len(s.saslMechanisms) > 0:
		return "SASL_PLAINTEXT"
	}
	return "PLAINTEXT"
}

// openCredentials opens the SCRAM store of the data directory and adds the
// -add-scram credentials (durably) before anything listens.
func openCredentials(dir string, add []string, log *slog.Logger) (*auth.Store, error) {
	store, err := auth.OpenStore(dir)
	if err != nil {
		return nil, fmt.Errorf("kmirrord: %w", err)
	}
	var changes []auth.Change
	for _, v := range add {
		ch, err := auth.ParseAddScram(v)
		if err != nil {
			return nil, usagef("-add-scram: %v", err)
		}
		changes = append(changes, ch)
	}
	if len(changes) > 0 {
		if err := store.Apply(changes); err != nil {
			return nil, fmt.Errorf("kmirrord: -add-scram: %w", err)
		}
		for _, ch := range changes {
			log.Info("kmirrord: SCRAM credential stored", "user", ch.User, "mechanism", ch.Mechanism.Name)
		}
	}
	return store, nil
}

// credentialAPIs are DescribeUserScramCredentials and
// AlterUserScramCredentials, authorized as Kafka does (DESCRIBE, ALTER on
// CLUSTER) with the data plane's ACL decision.
func credentialAPIs(store *auth.Store, dp *dataplane.DataPlane) []admin.ExtraAPI {
	return store.APIs(func(ctx context.Context, op string) bool {
		return dp.Allowed(ctx, op, dataplane.ResourceCluster, dataplane.ClusterName)
	})
}

// authLog logs failed authentications at most once per client host and
// minute (with the count of failures it did not log), and logs successes at
// debug level.
type authLog struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	hosts map[string]*authLogEntry
}

type authLogEntry struct {
	logged     time.Time
	suppressed int
}

// authLogPeriod is how often one client host's failures are logged.
const authLogPeriod = time.Minute

// maxAuthLogHosts bounds the hosts remembered; past it the entries older
// than authLogPeriod are dropped, and if none is, the whole map.
const maxAuthLogHosts = 10000

func newAuthLog(log *slog.Logger) *authLog {
	return &authLog{log: log, now: time.Now, hosts: map[string]*authLogEntry{}}
}

// event is the admin.SASLConfig.OnAuth hook.
func (l *authLog) event(e admin.AuthEvent) {
	if e.Err == nil {
		l.log.Debug("kmirrord: authenticated", "remote", e.RemoteAddr, "mechanism", e.Mechanism, "principal", e.Principal)
		return
	}
	host, _, err := net.SplitHostPort(e.RemoteAddr)
	if err != nil {
		host = e.RemoteAddr
	}
	now := l.now()
	l.mu.Lock()
	ent := l.hosts[host]
	if ent != nil && now.Sub(ent.logged) < authLogPeriod {
		ent.suppressed++
		l.mu.Unlock()
		return
	}
	if len(l.hosts) >= maxAuthLogHosts {
		for h, x := range l.hosts {
			if now.Sub(x.logged) >= authLogPeriod {
				delete(l.hosts, h)
			}
		}
		if len(l.hosts) >= maxAuthLogHosts {
			clear(l.hosts)
		}
	}
	suppressed := 0
	if ent != nil {
		suppressed = ent.suppressed
	}
	l.hosts[host] = &authLogEntry{logged: now}
	l.mu.Unlock()
	l.log.Warn("kmirrord: authentication failed", "remote", e.RemoteAddr, "mechanism", e.Mechanism, "user", e.User,
		"err", e.Err, "failures_not_logged_since_last", suppressed)
}

// registerAuthMetrics adds kmirror_auth_failures_total to reg.
func registerAuthMetrics(reg *prometheus.Registry, srv *admin.Server) error {
	c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kmirror_auth_failures_total",
		Help: "Failed client authentications on the listener (wrong credentials, unknown users or mechanisms, SASL protocol errors, timeouts)."},
		func() float64 { return float64(srv.AuthFailures()) })
	if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return fmt.Errorf("kmirrord: metrics: %w", err)
	}
	return nil
}

// splitPrincipals splits a -super-users list: at ';' (Kafka's super.users
// separator), and at a ',' that starts another TYPE:NAME (letters, then
// ':'), ends the list or is followed by another ',' (an empty entry, which
// the caller refuses), so that a certificate principal (User:CN=ops,O=acme)
// stays whole.
func splitPrincipals(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ";") {
		start := 0
		for i := 0; i < len(part); i++ {
			if next := strings.TrimLeft(part[i+1:], " "); part[i] == ',' && (next == "" || next[0] == ',' || startsPrincipal(next)) {
				out = append(out, part[start:i])
				start = i + 1
			}
		}
		out = append(out, part[start:])
	}
	return out
}

// startsPrincipal reports whether s starts with a principal type and ':'.
func startsPrincipal(s string) bool {
	s = strings.TrimLeft(s, " ")
	i := 0
	for i < len(s) && (s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z') {
		i++
	}
	return i > 0 && i < len(s) && s[i] == ':'
}
