package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/sasl"
)

// Connection keys of the properties form beyond those in config.go, with Kafka's and
// MirrorMaker 2's spelling. Only PEM material is read: a JKS or PKCS12 store type is
// refused with a *KeyError naming the key (ErrUnsupportedStoreType).
const (
	// KeySSLTruststoreType is PEM (the default here, since kmirror reads PEM only),
	// JKS or PKCS12 (refused).
	KeySSLTruststoreType = "ssl.truststore.type"
	// KeySSLTruststoreCerts holds the trusted certificates inline, as PEM.
	KeySSLTruststoreCerts = "ssl.truststore.certificates"
	// KeySSLTruststorePassword is accepted for the error it deserves: a PEM trust
	// store has no password.
	KeySSLTruststorePassword = "ssl.truststore.password"
	// KeySSLKeystoreType is PEM (the default) or JKS/PKCS12 (refused).
	KeySSLKeystoreType = "ssl.keystore.type"
	// KeySSLKeystoreChain holds the client certificate chain inline, as PEM.
	KeySSLKeystoreChain = "ssl.keystore.certificate.chain"
	// KeySSLKeystoreKey holds the client private key inline, as PEM.
	KeySSLKeystoreKey = "ssl.keystore.key"
	// KeySSLKeystorePassword is accepted for the error it deserves: a PEM key store
	// takes ssl.key.password, not a store password.
	KeySSLKeystorePassword = "ssl.keystore.password"
	// KeySSLKeyPassword decrypts an encrypted PKCS#8 private key (PBES2).
	KeySSLKeyPassword = "ssl.key.password"
	// KeySASLJAASConfig is Kafka's sasl.jaas.config: the username and password of a
	// PlainLoginModule or ScramLoginModule line are read from it.
	KeySASLJAASConfig = "sasl.jaas.config"
)

// Connection is how a mirror reaches a cluster, its source or a peer: the one typed
// connection config behind the source fetch (fetcher.KafkaSource), the source admin
// (metasync.KafkaSourceAdmin) and the peer (the KIP's admin RPCs). A host builds it in
// Go (mirror.WithConnections) or lets kmirror read it from the mirror's properties
// (security.protocol, ssl.*, sasl.*; mirror.LoadConnection).
type Connection struct {
	// Seeds are the host:port addresses first contacted. Required.
	Seeds []string
	// TLS, when not nil, is used for every connection, on top of Dialer. A nil
	// ServerName is taken from the address dialed.
	TLS *tls.Config
	// SASL, when not nil, authenticates every connection: any franz-go mechanism
	// (plain, scram, oauth, aws MSK IAM) or the host's own.
	SASL sasl.Mechanism
	// Dialer opens the plain network connection (nil: a net.Dialer with a 10 s
	// timeout and socket.receive.buffer.bytes). TLS is layered on what it returns.
	Dialer func(ctx context.Context, network, host string) (net.Conn, error)
}

// Errors of a connection config, wrapped in a *KeyError that names the key.
var (
	// ErrNoSeeds: no seed broker address (bootstrap.servers="," or empty Seeds).
	ErrNoSeeds = errors.New("mirror config: no seed broker")
	// ErrBadAddress: a seed is not host:port with a port in 1..65535.
	ErrBadAddress = errors.New("mirror config: not host:port")
	// ErrUnsupportedStoreType: a JKS or PKCS12 store; kmirror reads PEM only.
	ErrUnsupportedStoreType = errors.New("mirror config: unsupported store type (only PEM is read)")
	// ErrUnreadableFile: a file named by a key is missing or unreadable.
	ErrUnreadableFile = errors.New("mirror config: file cannot be read")
	// ErrNoCertificate: PEM material with no certificate in it.
	ErrNoCertificate = errors.New("mirror config: no PEM certificate")
	// ErrBadKey: a private key that does not parse, does not decrypt or does not
	// match its certificate.
	ErrBadKey = errors.New("mirror config: bad private key")
	// ErrMissingCredentials: SASL PLAIN or SCRAM without a username or password.
	ErrMissingCredentials = errors.New("mirror config: SASL needs a username and a password")
	// ErrUnsupportedValue: a value kmirror does not know (protocol, mechanism, login
	// module) or a key that does not apply together with another.
	ErrUnsupportedValue = errors.New("mirror config: unsupported value")
)

// KeyError is a problem with one key of a mirror config. Key is the properties key
// (bootstrap.servers, ssl.truststore.location, ...) or, for a Connection built in Go,
// the field (Connection.Seeds). ParseMirrorConfig's INVALID_CONFIG error wraps one per
// bad key (errors.As finds the first); the connection loader returns one.
type KeyError struct {
	Key string
	Err error
}

// Error implements error.
func (e *KeyError) Error() string { return "mirror config: " + e.Key + ": " + e.Err.Error() }

// Unwrap returns the cause (one of the Err* sentinels above, wrapped with detail).
func (e *KeyError) Unwrap() error { return e.Err }

// NewKeyError returns a *KeyError for key: sentinel wrapped with the detail formatted
// from format and args.
func NewKeyError(key string, sentinel error, format string, args ...any) *KeyError {
	return &KeyError{Key: key, Err: fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))}
}

// Validate checks c without dialing: seeds present and each host:port. A problem is
// a *KeyError naming the field.
func (c Connection) Validate() error {
	return ValidateSeeds("Connection.Seeds", c.Seeds)
}

// ValidateSeeds checks seed addresses (key names them in the error): at least one,
// each host:port with a numeric port in 1..65535.
func ValidateSeeds(key string, seeds []string) error {
	if len(seeds) == 0 {
		return NewKeyError(key, ErrNoSeeds, "give at least one host:port")
	}
	for _, hp := range seeds {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			return NewKeyError(key, ErrBadAddress, "%q", hp)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return NewKeyError(key, ErrBadAddress, "%q has an invalid port", hp)
		}
	}
	return nil
}
