package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/mirror/controller"
)

// TestKgoOptionsTLSOverHostDialer: kgo refuses Dialer with DialTLSConfig, so KgoOptions
// layers the Connection's TLS on the host's dialer itself; the client reaches a TLS and
// SASL kfake through both, and a Connection without seeds is refused.
func TestKgoOptionsTLSOverHostDialer(t *testing.T) {
	p := newTestPEM(t)
	pair, err := tls.X509KeyPair(p.certPEM, p.keyPEM)
	require.NoError(t, err)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "u", "p"))
	require.NoError(t, err)
	defer kc.Close()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(p.certPEM))
	var dials atomic.Int64
	var d net.Dialer
	c := controller.Connection{
		Seeds: kc.ListenAddrs(),
		// The test certificate names no host: check the chain only.
		TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots})
				return err
			}},
		SASL: plain.Auth{User: "u", Pass: "p"}.AsMechanism(),
		Dialer: func(ctx context.Context, network, host string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, host)
		},
	}
	opts, err := KgoOptions(c, controller.MirrorConfig{RequestTimeout: 5 * time.Second, SocketTimeout: 5 * time.Second})
	require.NoError(t, err)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err, "kfake answers Metadata only after SASL")
	require.Positive(t, dials.Load())

	c.SASL = plain.Auth{User: "u", Pass: "wrong"}.AsMechanism()
	opts, err = KgoOptions(c, controller.MirrorConfig{SocketTimeout: time.Second})
	require.NoError(t, err)
	bad, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer bad.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, bad)
	require.Error(t, err, "the mechanism given is the one used")

	_, err = KgoOptions(controller.Connection{}, controller.MirrorConfig{})
	var ke *controller.KeyError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, "Connection.Seeds", ke.Key)
	require.ErrorIs(t, err, controller.ErrNoSeeds)
}
