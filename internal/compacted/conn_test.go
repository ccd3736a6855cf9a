package compacted

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pingWith builds a kgo client from the translation of sc and pings brokers with it.
func pingWith(t *testing.T, brokers []string, sc *sarama.Config) error {
	t.Helper()
	opts, err := kgoOptions(sc)
	require.NoError(t, err)
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...), kgo.RequestRetries(0))...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

func saslConfig(mech sarama.SASLMechanism, user, pass string) *sarama.Config {
	sc := sarama.NewConfig()
	sc.Net.SASL.Enable, sc.Net.SASL.Mechanism, sc.Net.SASL.User, sc.Net.SASL.Password = true, mech, user, pass
	return sc
}

// TestKgoOptionsSASL: the translated PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 settings
// authenticate against a SASL cluster, and a wrong password does not.
func TestKgoOptionsSASL(t *testing.T) {
	c := newCluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "plain", "p1"),
		kfake.Superuser("SCRAM-SHA-256", "s256", "p2"), kfake.Superuser("SCRAM-SHA-512", "s512", "p3"))
	for _, tc := range []struct {
		mech       sarama.SASLMechanism
		user, pass string
	}{{sarama.SASLTypePlaintext, "plain", "p1"}, {"", "plain", "p1"}, {sarama.SASLTypeSCRAMSHA256, "s256", "p2"}, {sarama.SASLTypeSCRAMSHA512, "s512", "p3"}} {
		require.NoError(t, pingWith(t, c.ListenAddrs(), saslConfig(tc.mech, tc.user, tc.pass)), "%q", tc.mech)
		require.Error(t, pingWith(t, c.ListenAddrs(), saslConfig(tc.mech, tc.user, "wrong")), "%q with a wrong password", tc.mech)
	}
	require.Error(t, pingWith(t, c.ListenAddrs(), sarama.NewConfig()), "no SASL")

	// The whole log over SASL PLAIN: the sarama side and the replay's client.
	sc := saslConfig(sarama.SASLTypePlaintext, "plain", "p1")
	cfg := testConfig(c.ListenAddrs(), "state", 1)
	cfg.Sarama = sc
	l := openLog(t, cfg)
	p := newProducer(t, l, "w", 0)
	_, err := p.Append(context.Background(), recs("a", "1"))
	require.NoError(t, err)
	require.Equal(t, []replayed{{0, "a", "1", false}}, replayAll(t, l, 0))
}

// TestKgoOptionsTLS: an enabled TLS is taken over with its config (a client without
// it, or trusting another CA, does not get an answer).
func TestKgoOptionsTLS(t *testing.T) {
	serverCfg, roots := selfSigned(t)
	c := newCluster(t, kfake.TLS(serverCfg))
	sc := sarama.NewConfig()
	sc.Net.TLS.Enable, sc.Net.TLS.Config = true, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	sc.Net.DialTimeout = 2 * time.Second
	require.NoError(t, pingWith(t, c.ListenAddrs(), sc))
	sc.Net.TLS.Config = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	require.Error(t, pingWith(t, c.ListenAddrs(), sc), "an untrusted server certificate")
}

// TestKgoOptionsRefused: settings the replay client cannot take over are refused with a
// *ConnSettingError by Validate and Open, before any connection.
func TestKgoOptionsRefused(t *testing.T) {
	oauth := saslConfig(sarama.SASLTypeOAuth, "u", "p")
	gssapi := saslConfig(sarama.SASLTypeGSSAPI, "u", "p")
	noHandshake := saslConfig(sarama.SASLTypePlaintext, "u", "p")
	noHandshake.Net.SASL.Handshake = false
	proxy := sarama.NewConfig()
	proxy.Net.Proxy.Enable = true
	for want, sc := range map[ConnSettingError]*sarama.Config{
		{Setting: "Net.SASL.Mechanism", Value: "OAUTHBEARER"}: oauth,
		{Setting: "Net.SASL.Mechanism", Value: "GSSAPI"}:      gssapi,
		{Setting: "Net.SASL.Handshake", Value: "false"}:       noHandshake,
		{Setting: "Net.Proxy.Enable", Value: "true"}:          proxy,
	} {
		cfg := Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Partitions: 1, Sarama: sc}
		for _, err := range []error{cfg.Validate(), openErr(cfg)} {
			var ce *ConnSettingError
			require.True(t, errors.As(err, &ce), "%v", err)
			require.Equal(t, want, *ce)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorIs(t, err, ErrUnsupportedConn)
		}
	}
}

func openErr(cfg Config) error {
	l, err := Open(context.Background(), cfg)
	if err == nil {
		_ = l.Close()
	}
	return err
}

// selfSigned returns a server TLS config with a self-signed certificate for 127.0.0.1
// and a pool trusting it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, pool
}
