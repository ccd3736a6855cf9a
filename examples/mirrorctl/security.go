package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// errCommandConfig is wrapped by every --command-config problem.
var errCommandConfig = errors.New("invalid --command-config")

// commandConfigKeys lists the admin client properties mirrorctl understands, as in
// Kafka's tools (--command-config of kafka-topics.sh and friends).
var commandConfigKeys = []string{
	"client.id", "security.protocol",
	"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates",
	"ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.endpoint.identification.algorithm",
	"sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password",
}

// clientSecurity is the parsed connection part of --command-config.
type clientSecurity struct {
	clientID  string
	tls       *tls.Config    // nil = plaintext
	mechanism sasl.Mechanism // nil = no SASL
}

// opts returns the kgo options of s.
func (s clientSecurity) opts() []kgo.Opt {
	var out []kgo.Opt
	if s.clientID != "" {
		out = append(out, kgo.ClientID(s.clientID))
	}
	if s.tls != nil {
		out = append(out, kgo.DialTLSConfig(s.tls))
	}
	if s.mechanism != nil {
		out = append(out, kgo.SASL(s.mechanism))
	}
	return out
}

// parseCommandConfig turns the properties of --command-config into a clientSecurity.
// Every problem is reported here, before any connection: an unknown key, a protocol
// other than PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL, ssl.* or sasl.* keys the
// protocol does not use, a truststore or keystore that is not PEM or cannot be read,
// a SASL mechanism other than PLAIN and SCRAM-SHA-256/512, missing credentials.
func parseCommandConfig(props []property) (clientSecurity, error) {
	kv := map[string]string{}
	for _, p := range props {
		known := false
		for _, k := range commandConfigKeys {
			known = known || k == p.Key
		}
		if !known {
			return clientSecurity{}, fmt.Errorf("%w: unsupported admin client property %q (supported: %s)",
				errCommandConfig, p.Key, strings.Join(commandConfigKeys, ", "))
		}
		kv[p.Key] = p.Value
	}
	s := clientSecurity{clientID: kv["client.id"]}
	proto := strings.ToUpper(strings.TrimSpace(kv["security.protocol"]))
	if proto == "" {
		proto = "PLAINTEXT"
	}
	var useTLS, useSASL bool
	switch proto {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return s, fmt.Errorf("%w: security.protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", errCommandConfig, kv["security.protocol"])
	}
	if err := unusedKeys(kv, "ssl.", useTLS, proto); err != nil {
		return s, err
	}
	if err := unusedKeys(kv, "sasl.", useSASL, proto); err != nil {
		return s, err
	}
	var err error
	if useTLS {
		if s.tls, err = tlsFromProps(kv); err != nil {
			return s, err
		}
	}
	if useSASL {
		if s.mechanism, err = saslFromProps(kv); err != nil {
			return s, err
		}
	}
	return s, nil
}

// unusedKeys refuses keys with prefix when the protocol does not use them: a file that
// sets them expects them to take effect.
func unusedKeys(kv map[string]string, prefix string, used bool, proto string) error {
	if used {
		return nil
	}
	for k := range kv {
		if strings.HasPrefix(k, prefix) {
			return fmt.Errorf("%w: %s is set but security.protocol is %s", errCommandConfig, k, proto)
		}
	}
	return nil
}

// tlsFromProps builds the TLS configuration: trusted CAs from a PEM truststore (file or
// inline; the system pool when none), an optional PEM client certificate and key, and
// hostname verification unless ssl.endpoint.identification.algorithm is empty.
func tlsFromProps(kv map[string]string) (*tls.Config, error) {
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if t, ok := kv[k]; ok && !strings.EqualFold(t, "PEM") {
			return nil, fmt.Errorf("%w: %s %q is not supported; convert the store to PEM", errCommandConfig, k, t)
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	caPEM, err := pemFromProps(kv, "ssl.truststore.location", "ssl.truststore.certificates")
	if err != nil {
		return nil, err
	}
	if caPEM != nil {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("%w: the truststore holds no PEM certificate", errCommandConfig)
		}
	}
	if err := clientCertFromProps(kv, cfg); err != nil {
		return nil, err
	}
	if alg, ok := kv["ssl.endpoint.identification.algorithm"]; ok {
		switch strings.ToLower(strings.TrimSpace(alg)) {
		case "":
			skipHostnameCheck(cfg)
		case "https":
		default:
			return nil, fmt.Errorf("%w: ssl.endpoint.identification.algorithm %q (want https or empty)", errCommandConfig, alg)
		}
	}
	return cfg, nil
}

// pemFromProps reads PEM from the file named by fileKey or inline from inlineKey
// (nil when neither is set; both is an error).
func pemFromProps(kv map[string]string, fileKey, inlineKey string) ([]byte, error) {
	file, inline := kv[fileKey], kv[inlineKey]
	switch {
	case file != "" && inline != "":
		return nil, fmt.Errorf("%w: set %s or %s, not both", errCommandConfig, fileKey, inlineKey)
	case inline != "":
		return []byte(inline), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", errCommandConfig, fileKey, err)
		}
		return b, nil
	}
	return nil, nil
}

// clientCertFromProps loads the client certificate: ssl.keystore.location (a PEM file
// with the certificate chain and the unencrypted private key) or the inline
// ssl.keystore.certificate.chain and ssl.keystore.key.
func clientCertFromProps(kv map[string]string, cfg *tls.Config) error {
	var certPEM, keyPEM []byte
	if loc := kv["ssl.keystore.location"]; loc != "" {
		if kv["ssl.keystore.certificate.chain"] != "" || kv["ssl.keystore.key"] != "" {
			return fmt.Errorf("%w: set ssl.keystore.location or ssl.keystore.certificate.chain/key, not both", errCommandConfig)
		}
		b, err := os.ReadFile(loc)
		if err != nil {
			return fmt.Errorf("%w: ssl.keystore.location: %w", errCommandConfig, err)
		}
		certPEM, keyPEM = b, b
	} else {
		certPEM, keyPEM = []byte(kv["ssl.keystore.certificate.chain"]), []byte(kv["ssl.keystore.key"])
		if (len(certPEM) == 0) != (len(keyPEM) == 0) {
			return fmt.Errorf("%w: ssl.keystore.certificate.chain and ssl.keystore.key go together", errCommandConfig)
		}
		if len(certPEM) == 0 {
			return nil
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%w: client certificate: %w", errCommandConfig, err)
	}
	cfg.Certificates = []tls.Certificate{cert}
	return nil
}

// skipHostnameCheck keeps the chain verification against cfg.RootCAs but not the
// hostname (Kafka's ssl.endpoint.identification.algorithm=).
func skipHostnameCheck(cfg *tls.Config) {
	cfg.InsecureSkipVerify = true // replaced by VerifyConnection below
	roots := cfg.RootCAs
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("mirrorctl: the server sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}

// jaasOption matches one key="value" option of a JAAS login module line.
var jaasOption = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// saslFromProps builds the SASL mechanism from sasl.mechanism and the credentials of
// sasl.jaas.config (PlainLoginModule or ScramLoginModule) or sasl.username and
// sasl.password.
func saslFromProps(kv map[string]string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(kv["sasl.mechanism"]))
	if mech == "" {
		return nil, fmt.Errorf("%w: sasl.mechanism is required (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default GSSAPI is not supported)", errCommandConfig)
	}
	user, pass := kv["sasl.username"], kv["sasl.password"]
	if jaas := kv["sasl.jaas.config"]; jaas != "" {
		if user != "" || pass != "" {
			return nil, fmt.Errorf("%w: set sasl.jaas.config or sasl.username/sasl.password, not both", errCommandConfig)
		}
		for _, m := range jaasOption.FindAllStringSubmatch(jaas, -1) {
			v := strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
			switch m[1] {
			case "username":
				user = v
			case "password":
				pass = v
			}
		}
	}
	if user == "" {
		return nil, fmt.Errorf("%w: SASL needs a username (sasl.jaas.config username=\"...\" or sasl.username)", errCommandConfig)
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: sasl.mechanism %q is not supported (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", errCommandConfig, kv["sasl.mechanism"])
}
