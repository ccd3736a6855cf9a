package metasync

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/mirror/controller"
)

// TestSCRAMRFC7677 replays the SCRAM-SHA-256 example exchange of RFC 7677 §3.
func TestSCRAMRFC7677(t *testing.T) {
	c := newSCRAMClient(scramSHA256)
	c.nonce = "rOprNGfwEbeRWgbNEkqO"
	require.NoError(t, c.Begin("user", "pencil", ""))
	first, err := c.Step("")
	require.NoError(t, err)
	require.Equal(t, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", first)
	final, err := c.Step("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
	require.NoError(t, err)
	require.Equal(t, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", final)
	require.False(t, c.Done())
	_, err = c.Step("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
	require.NoError(t, err)
	require.True(t, c.Done())

	bad := newSCRAMClient(scramSHA256)
	bad.nonce = "abc"
	require.NoError(t, bad.Begin("user", "pencil", ""))
	_, err = bad.Step("")
	require.NoError(t, err)
	_, err = bad.Step("r=xyz,s=AAAA,i=1")
	require.ErrorIs(t, err, ErrSCRAM, "server nonce must extend ours")
	for _, challenge := range []string{"e=invalid-proof", "r=abcd,s=!!,i=1", "r=abcd,s=AAAA,i=0", "r=abcd,s=AAAA,i=x", ""} {
		c := newSCRAMClient(scramSHA512)
		c.nonce = "abc"
		require.NoError(t, c.Begin("u,=", "p", "z"))
		f, err := c.Step("")
		require.NoError(t, err)
		require.Equal(t, "n,a=z,n=u=2C=3D,r=abc", f)
		_, err = c.Step(challenge)
		require.ErrorIs(t, err, ErrSCRAM, challenge)
	}
	c = newSCRAMClient(scramSHA256)
	c.nonce = "rOprNGfwEbeRWgbNEkqO"
	require.NoError(t, c.Begin("user", "pencil", ""))
	_, _ = c.Step("")
	_, err = c.Step("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
	require.NoError(t, err)
	_, err = c.Step("v=AAAA")
	require.ErrorIs(t, err, ErrSCRAM, "wrong server signature")
	_, err = c.Step("")
	require.ErrorIs(t, err, ErrSCRAM, "no fourth step")
}

func TestSaramaConfig(t *testing.T) {
	parse := func(raw map[string]string) controller.MirrorConfig {
		raw[controller.KeyBootstrapServers] = "a:1"
		mc, err := controller.ParseMirrorConfig(raw)
		require.NoError(t, err)
		return mc
	}
	cfg, err := SaramaConfig(parse(map[string]string{}), "")
	require.NoError(t, err)
	require.True(t, cfg.Version.IsAtLeast(sarama.V2_8_0_0))
	require.False(t, cfg.Net.TLS.Enable)
	require.False(t, cfg.Net.SASL.Enable)

	for mech, want := range map[string]sarama.SASLMechanism{"PLAIN": sarama.SASLTypePlaintext, "SCRAM-SHA-256": sarama.SASLTypeSCRAMSHA256, "SCRAM-SHA-512": sarama.SASLTypeSCRAMSHA512} {
		cfg, err := SaramaConfig(parse(map[string]string{controller.KeySecurityProtocol: "SASL_PLAINTEXT", controller.KeySASLMechanism: mech, controller.KeySASLUsername: "u", controller.KeySASLPassword: "p"}), "id")
		require.NoError(t, err, mech)
		require.Equal(t, want, cfg.Net.SASL.Mechanism)
		require.Equal(t, "u", cfg.Net.SASL.User)
		require.Equal(t, "id", cfg.ClientID)
	}
	cfg, err = SaramaConfig(parse(map[string]string{controller.KeySecurityProtocol: "SSL", controller.KeySSLEndpointIdent: ""}), "")
	require.NoError(t, err)
	require.True(t, cfg.Net.TLS.Enable)
	require.True(t, cfg.Net.TLS.Config.InsecureSkipVerify)
	_, err = SaramaConfig(parse(map[string]string{controller.KeySecurityProtocol: "SASL_SSL", controller.KeySSLCAFile: filepath.Join(t.TempDir(), "missing.pem")}), "")
	require.ErrorContains(t, err, controller.KeySSLCAFile)
	_, err = SaramaConfig(parse(map[string]string{controller.KeySecurityProtocol: "SSL", controller.KeySSLCertFile: "nope.pem", controller.KeySSLKeyFile: "nope.key"}), "")
	require.ErrorContains(t, err, "client certificate")

	old := sarama.NewConfig()
	old.Version = sarama.V2_0_0_0
	_, err = NewKafkaSourceAdminWith([]string{"a:1"}, old)
	require.ErrorIs(t, err, ErrSourceAdmin)
	_, err = NewKafkaSourceAdminWith(nil, cfg)
	require.ErrorIs(t, err, ErrSourceAdmin)
}

// TestKafkaSourceAdminSCRAM authenticates against kfake with the SCRAM client.
func TestKafkaSourceAdminSCRAM(t *testing.T) {
	ctx := context.Background()
	kc := klogCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "s3cret"), kfake.SeedTopics(2, "t"))
	mc, err := controller.ParseMirrorConfig(map[string]string{
		controller.KeyBootstrapServers: kc.ListenAddrs()[0], controller.KeySecurityProtocol: "SASL_PLAINTEXT",
		controller.KeySASLMechanism: "SCRAM-SHA-256", controller.KeySASLUsername: "admin", controller.KeySASLPassword: "s3cret",
	})
	require.NoError(t, err)
	a, err := NewKafkaSourceAdmin(mc)
	require.NoError(t, err)
	ts, err := a.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, "t", ts[0].Name)
	require.Equal(t, int32(2), ts[0].Partitions)
	require.NotZero(t, ts[0].TopicID)

	cfgs, err := a.TopicConfigs(ctx, []string{"t", "missing"})
	require.Error(t, err)
	var te *SourceTopicError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "missing", te.Topic)
	require.Equal(t, map[string]string{}, cfgs["t"], "no topic-level configs on a seeded topic")
	got, err := a.TopicConfigs(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "idempotent")
	_, err = a.ListTopics(ctx)
	require.ErrorIs(t, err, ErrSourceAdminClosed)

	mc.SASLPassword = "wrong"
	bad, err := NewKafkaSourceAdmin(mc)
	require.NoError(t, err, "connects lazily")
	defer bad.Close()
	_, err = bad.ClusterID(ctx)
	require.ErrorIs(t, err, ErrSourceAdmin, "bad password refused")
	_, err = bad.ListGroups(ctx)
	require.ErrorIs(t, err, ErrSourceAdmin, "and again on the next call")
}

// FuzzSCRAMServerMessages feeds arbitrary server-first and server-final messages to the
// SCRAM client: it must return an error or a well-formed reply, never panic.
func FuzzSCRAMServerMessages(f *testing.F) {
	f.Add("r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", "v=AAAA")
	f.Add("r=abc%hvY,s=QSXCR+Q6sek8bf92,i=4096", "e=other-error")
	f.Add("e=invalid-proof", "")
	f.Add("r=abc,,s=,i=-1", "v=")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, serverFirst, serverFinal string) {
		c := newSCRAMClient(scramSHA256)
		c.nonce = "abc"
		if err := c.Begin("u", "p", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Step(""); err != nil {
			t.Fatal(err)
		}
		if len(serverFirst) > 0 {
			// Keep iteration counts small so the fuzzer stays fast.
			a := scramAttrs(serverFirst)
			if n := a["i"]; len(n) > 3 {
				return
			}
		}
		reply, err := c.Step(serverFirst)
		if err != nil {
			require.ErrorIs(t, err, ErrSCRAM)
			return
		}
		require.Contains(t, reply, ",p=")
		if _, err := c.Step(serverFinal); err != nil {
			require.ErrorIs(t, err, ErrSCRAM)
			require.False(t, c.Done())
		}
	})
}

// sourceAdminTLSFiles writes a self-signed certificate for 127.0.0.1 and its key as PEM
// files and returns their paths and the server TLS config.
func sourceAdminTLSFiles(t *testing.T, withIP bool) (certFile, keyFile string, server *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if withIP {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return certFile, keyFile, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// TestKafkaSourceAdminTLS connects over TLS, trusting the CA from ssl.truststore.location
// and presenting a client certificate.
func TestKafkaSourceAdminTLS(t *testing.T) {
	ctx := context.Background()
	certFile, keyFile, server := sourceAdminTLSFiles(t, true)
	kc := klogCluster(t, kfake.TLS(server), kfake.ClusterID("tls-cluster"))
	mc, err := controller.ParseMirrorConfig(map[string]string{
		controller.KeyBootstrapServers: kc.ListenAddrs()[0], controller.KeySecurityProtocol: "SSL",
		controller.KeySSLCAFile: certFile, controller.KeySSLCertFile: certFile, controller.KeySSLKeyFile: keyFile,
	})
	require.NoError(t, err)
	a, err := NewKafkaSourceAdmin(mc)
	require.NoError(t, err)
	defer a.Close()
	cid, err := a.ClusterID(ctx)
	require.NoError(t, err)
	require.Equal(t, "tls-cluster", cid)

	_, err = SaramaConfig(controller.MirrorConfig{SecurityProtocol: "SSL", TLSCAFile: keyFile, TLSVerifyHostname: true}, "")
	require.ErrorContains(t, err, "no PEM certificate")

	// A certificate without the server's address: refused with host name verification,
	// accepted with ssl.endpoint.identification.algorithm="" (the chain is still
	// verified: an untrusted CA is refused).
	noIPCert, _, noIPServer := sourceAdminTLSFiles(t, false)
	otherCA, _, _ := sourceAdminTLSFiles(t, true)
	kc2 := klogCluster(t, kfake.TLS(noIPServer), kfake.ClusterID("no-ip"))
	for _, tc := range []struct {
		ca, ident string
		ok        bool
	}{{noIPCert, "https", false}, {noIPCert, "", true}, {otherCA, "", false}} {
		mc, err := controller.ParseMirrorConfig(map[string]string{
			controller.KeyBootstrapServers: kc2.ListenAddrs()[0], controller.KeySecurityProtocol: "SSL",
			controller.KeySSLCAFile: tc.ca, controller.KeySSLEndpointIdent: tc.ident, controller.KeyRequestTimeoutMs: "2000",
		})
		require.NoError(t, err)
		a, err := NewKafkaSourceAdmin(mc)
		require.NoError(t, err)
		a.cfg.Metadata.Retry.Max = 0
		cid, err := a.ClusterID(ctx)
		if tc.ok {
			require.NoError(t, err, "%+v", tc)
			require.Equal(t, "no-ip", cid)
		} else {
			require.Error(t, err, "%+v", tc)
		}
		require.NoError(t, a.Close())
	}
}
