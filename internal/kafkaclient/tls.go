package kafkaclient

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kmirror/kmirror/mirror/controller"
)

// errNoPeerCertificate is returned by the chain-only verification when the server
// sent no certificate.
var errNoPeerCertificate = errors.New("kafkaclient: tls: the server sent no certificate")

// loadTLS builds the TLS config of security.protocol SSL or SASL_SSL: the trust store
// (system roots when none is given), the client certificate and the host name check.
func loadTLS(mc controller.MirrorConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	pool, err := loadTrustStore(mc)
	if err != nil {
		return nil, err
	}
	tc.RootCAs = pool
	cert, err := loadKeyStore(mc)
	if err != nil {
		return nil, err
	}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	if !mc.TLSVerifyHostname {
		// ssl.endpoint.identification.algorithm="": like Kafka, skip the host name
		// check but still verify the chain against the trust store (Go's
		// InsecureSkipVerify alone would skip both).
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errNoPeerCertificate
			}
			opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return tc, nil
}

// checkStoreType refuses a store type other than PEM (the default here) and a store
// password, which a PEM store does not have.
func checkStoreType(typeKey, typ, passKey, pass, passHint string) error {
	switch strings.ToUpper(typ) {
	case "PEM", "":
	case "JKS", "PKCS12":
		return controller.NewKeyError(typeKey, controller.ErrUnsupportedStoreType,
			"%s: convert the store to PEM (keytool -exportcert -rfc, openssl pkcs12 -nodes)", typ)
	default:
		return controller.NewKeyError(typeKey, controller.ErrUnsupportedValue, "%q is not PEM", typ)
	}
	if pass != "" {
		return controller.NewKeyError(passKey, controller.ErrUnsupportedValue, "a PEM store has no store password%s", passHint)
	}
	return nil
}

// pemSource returns the PEM bytes of a location key or an inline key (not both), and
// the key they came from; nil when neither is set.
func pemSource(locKey, loc, inlineKey, inline string) ([]byte, string, error) {
	switch {
	case loc != "" && inline != "":
		return nil, "", controller.NewKeyError(inlineKey, controller.ErrUnsupportedValue, "give %s or %s, not both", locKey, inlineKey)
	case inline != "":
		return []byte(inline), inlineKey, nil
	case loc != "":
		b, err := os.ReadFile(loc)
		if err != nil {
			return nil, "", controller.NewKeyError(locKey, controller.ErrUnreadableFile, "%v", err)
		}
		return b, locKey, nil
	}
	return nil, "", nil
}

// loadTrustStore reads the trusted certificates (nil: the system roots).
func loadTrustStore(mc controller.MirrorConfig) (*x509.CertPool, error) {
	if err := checkStoreType(controller.KeySSLTruststoreType, mc.TLSTruststoreType,
		controller.KeySSLTruststorePassword, mc.TLSTruststorePassword, ""); err != nil {
		return nil, err
	}
	b, key, err := pemSource(controller.KeySSLCAFile, mc.TLSCAFile, controller.KeySSLTruststoreCerts, mc.TLSTruststoreCerts)
	if err != nil || b == nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, controller.NewKeyError(key, controller.ErrNoCertificate, "no PEM CERTIFICATE block")
	}
	return pool, nil
}

// loadKeyStore reads the client certificate chain and key (nil: no client
// certificate). The PEM key store is ssl.keystore.location (chain and key in one file,
// or the key in ssl.key.location) or the inline ssl.keystore.certificate.chain and
// ssl.keystore.key; an encrypted PKCS#8 key is decrypted with ssl.key.password.
func loadKeyStore(mc controller.MirrorConfig) (*tls.Certificate, error) {
	if err := checkStoreType(controller.KeySSLKeystoreType, mc.TLSKeystoreType,
		controller.KeySSLKeystorePassword, mc.TLSKeystorePassword, " (the key's is ssl.key.password)"); err != nil {
		return nil, err
	}
	chain, chainKey, err := pemSource(controller.KeySSLCertFile, mc.TLSCertFile, controller.KeySSLKeystoreChain, mc.TLSKeystoreChain)
	if err != nil {
		return nil, err
	}
	keyPEM, keyKey, err := pemSource(controller.KeySSLKeyFile, mc.TLSKeyFile, controller.KeySSLKeystoreKey, mc.TLSKeystoreKey)
	if err != nil {
		return nil, err
	}
	switch {
	case chain == nil && keyPEM == nil:
		return nil, nil
	case chain == nil:
		return nil, controller.NewKeyError(controller.KeySSLCertFile, controller.ErrNoCertificate, "%s is set without a certificate", keyKey)
	case keyPEM == nil && chainKey == controller.KeySSLKeystoreChain:
		return nil, controller.NewKeyError(controller.KeySSLKeystoreKey, controller.ErrBadKey, "%s is set without its key", chainKey)
	case keyPEM == nil:
		keyPEM, keyKey = chain, chainKey // a PEM key store: chain and key in one file
	}
	var certs [][]byte
	for rest := chain; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			certs = append(certs, blk.Bytes)
		}
	}
	if len(certs) == 0 {
		return nil, controller.NewKeyError(chainKey, controller.ErrNoCertificate, "no PEM CERTIFICATE block")
	}
	der, err := privateKeyDER(keyKey, keyPEM, mc.TLSKeyPassword)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(pemEncode("CERTIFICATE", certs...), pemEncode(der.typ, der.bytes))
	if err != nil {
		return nil, controller.NewKeyError(keyKey, controller.ErrBadKey, "%v", err)
	}
	return &cert, nil
}

type keyDER struct {
	typ   string
	bytes []byte
}

// privateKeyDER finds the private key block of b: an unencrypted one as it is, an
// ENCRYPTED PRIVATE KEY decrypted with password (ssl.key.password).
func privateKeyDER(key string, b []byte, password string) (keyDER, error) {
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		switch {
		case blk.Type == "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return keyDER{}, controller.NewKeyError(controller.KeySSLKeyPassword, controller.ErrBadKey,
					"the key in %s is encrypted: set ssl.key.password", key)
			}
			der, err := decryptPKCS8(blk.Bytes, []byte(password))
			if err == nil {
				// Padding passes by chance with a wrong password once in ~256
				// tries: the key must parse too.
				if _, perr := x509.ParsePKCS8PrivateKey(der); perr != nil {
					err = fmt.Errorf("%w: wrong password (the decrypted key does not parse)", errPKCS8)
				}
			}
			if err != nil {
				return keyDER{}, controller.NewKeyError(controller.KeySSLKeyPassword, controller.ErrBadKey, "%s: %v", key, err)
			}
			return keyDER{"PRIVATE KEY", der}, nil
		case blk.Headers["Proc-Type"] != "":
			return keyDER{}, controller.NewKeyError(key, controller.ErrBadKey,
				"legacy encrypted PEM (Proc-Type) is not read: convert with openssl pkcs8 -topk8")
		case strings.HasSuffix(blk.Type, "PRIVATE KEY"):
			return keyDER{blk.Type, blk.Bytes}, nil
		}
	}
	return keyDER{}, controller.NewKeyError(key, controller.ErrBadKey, "no PEM PRIVATE KEY block")
}

func pemEncode(typ string, ders ...[]byte) []byte {
	var out []byte
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: d})...)
	}
	return out
}
