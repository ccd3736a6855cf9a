package admin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// selfSigned returns a certificate for cn usable by both ends.
func selfSigned(t *testing.T, cn string) (tls.Certificate, *x509.Certificate) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf
}

func TestTLSPrincipal(t *testing.T) {
	srvCert, srvLeaf := selfSigned(t, "server")
	cliCert, cliLeaf := selfSigned(t, "client-1")
	srvPool, cliPool := x509.NewCertPool(), x509.NewCertPool()
	srvPool.AddCert(cliLeaf)
	cliPool.AddCert(srvLeaf)
	principals := make(chan string, 1)
	h := &funcHandler{fn: func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		principals <- rc.Principal
		return req.ResponseKind(), nil
	}}
	_, addr := startServer(t, ServerConfig{Handler: h, TLS: &tls.Config{
		Certificates: []tls.Certificate{srvCert}, ClientCAs: srvPool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12,
	}})
	opts := append(ClientOpts(), kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTLSConfig(&tls.Config{
		Certificates: []tls.Certificate{cliCert}, RootCAs: cliPool, MinVersion: tls.VersionTLS12,
	}))
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	_, err = NewClient(cl).ListClusterMirrors(context.Background(), NewPtrListClusterMirrorsRequest())
	require.NoError(t, err)
	require.Equal(t, "User:CN=client-1", <-principals)
}
