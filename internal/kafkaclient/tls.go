// Package kafkaclient holds what the source clients of a mirror (sarama for the admin,
// kgo for the data path and the peer) share about reaching the source cluster.
package kafkaclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/kmirror/kmirror/mirror/controller"
)

// TLSConfig builds the TLS config of a source with security.protocol SSL or SASL_SSL:
// the trust store, the client certificate and the host name check of mc.
func TLSConfig(mc controller.MirrorConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if !mc.TLSVerifyHostname {
		// ssl.endpoint.identification.algorithm="": like Kafka, skip the host name check
		// but still verify the chain against the trust store (Go's
		// InsecureSkipVerify alone would skip both).
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("mirror: tls: the server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: tc.RootCAs, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	if mc.TLSCAFile != "" {
		pem, err := os.ReadFile(mc.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("mirror: read %s: %w", controller.KeySSLCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mirror: %s %q holds no PEM certificate", controller.KeySSLCAFile, mc.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if mc.TLSCertFile != "" || mc.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(mc.TLSCertFile, mc.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("mirror: load client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
