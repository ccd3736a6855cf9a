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

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/mirror/controller"
)

// TestKafkaSourceAdminSCRAM authenticates against kfake with franz-go's SCRAM-SHA-256
// (the properties form); a wrong password is refused on every call.
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
	mc.SocketTimeout = time.Second
	bad, err := NewKafkaSourceAdmin(mc)
	require.NoError(t, err, "connects lazily")
	defer bad.Close()
	_, err = bad.ClusterID(ctx)
	require.ErrorIs(t, err, ErrSourceAdmin, "bad password refused")
	_, err = bad.ListGroups(ctx)
	require.ErrorIs(t, err, ErrSourceAdmin, "and again on the next call")
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

	_, err = NewKafkaSourceAdmin(controller.MirrorConfig{BootstrapServers: []string{"a:1"}, SecurityProtocol: "SSL", TLSCAFile: keyFile, TLSVerifyHostname: true})
	var ke *controller.KeyError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, controller.KeySSLCAFile, ke.Key)
	require.ErrorIs(t, err, controller.ErrNoCertificate)

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
			controller.KeySocketTimeoutMs: "1000",
		})
		require.NoError(t, err)
		a, err := NewKafkaSourceAdmin(mc)
		require.NoError(t, err)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cid, err := a.ClusterID(cctx)
		cancel()
		if tc.ok {
			require.NoError(t, err, "%+v", tc)
			require.Equal(t, "no-ip", cid)
		} else {
			require.Error(t, err, "%+v", tc)
		}
		require.NoError(t, a.Close())
	}
}
