package mirror

import (
	"fmt"

	"github.com/kmirror/kmirror/internal/kafkaclient"
	"github.com/kmirror/kmirror/mirror/controller"
)

// Connection is controller.Connection: how a mirror reaches its source cluster (seeds,
// *tls.Config, any franz-go sasl.Mechanism, a dialer). One value serves the source
// fetch, the source admin and the peer.
type Connection = controller.Connection

// KeyError is controller.KeyError: a bad config key (or Connection field), named.
type KeyError = controller.KeyError

// ConnectionFunc returns the connection of mirror name, whose persisted configs are cfg;
// its Seeds replace cfg's bootstrap.servers for dialing (bootstrap.servers stays what
// ListClusterMirrors reports). A host passes it with WithConnections when the properties form cannot say what it
// needs (an OAUTHBEARER token source, AWS MSK IAM, its own dialer or TLS config); it may
// start from LoadConnection(cfg) and replace fields. It is called at
// CreateClusterMirror (to validate) and whenever the mirror's clients are built.
type ConnectionFunc func(name string, cfg MirrorConfig) (Connection, error)

// WithConnections makes the default source and peer factories reach each mirror's source
// through fn instead of the properties form (LoadConnection). A host that passes its own
// SourceFactory or PeerFactory builds those clients itself (SourceFactoryFor and
// PeerFactoryFor give the defaults over fn).
func WithConnections(fn ConnectionFunc) Option {
	return optionFunc(func(o *options) { o.conns = fn })
}

// LoadConnection reads the properties form of cfg (bootstrap.servers,
// security.protocol, ssl.* PEM stores, sasl.*) into a Connection; every problem is a
// *KeyError naming the key.
func LoadConnection(cfg MirrorConfig) (Connection, error) { return kafkaclient.Load(cfg) }

// resolveConnection returns the connection of mirror name: fn's (validated), or the
// properties form when fn is nil.
func resolveConnection(fn ConnectionFunc, name string, cfg MirrorConfig) (Connection, error) {
	if fn == nil {
		return LoadConnection(cfg)
	}
	c, err := fn(name, cfg)
	if err != nil {
		return Connection{}, fmt.Errorf("mirror: connection of mirror %q: %w", name, err)
	}
	if err := c.Validate(); err != nil {
		return Connection{}, err
	}
	return c, nil
}

// checkConnection validates, before mirror name is created with configs, that its
// connection can be built: a bad key is an INVALID_CONFIG error (ErrInvalidConfig)
// wrapping the *KeyError. Configs that do not parse are left to the controller, which
// reports every problem.
func (m *Mirror) checkConnection(name string, configs map[string]string) error {
	cfg, err := ParseMirrorConfig(configs)
	if err != nil {
		return nil
	}
	if _, err := resolveConnection(m.opts.conns, name, cfg); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// The connection keys of Kafka's PEM stores and JAAS line: controller.KeySSL... and
// controller.KeySASLJAASConfig.
const (
	KeySSLTruststoreType     = controller.KeySSLTruststoreType
	KeySSLTruststoreCerts    = controller.KeySSLTruststoreCerts
	KeySSLTruststorePassword = controller.KeySSLTruststorePassword
	KeySSLKeystoreType       = controller.KeySSLKeystoreType
	KeySSLKeystoreChain      = controller.KeySSLKeystoreChain
	KeySSLKeystoreKey        = controller.KeySSLKeystoreKey
	KeySSLKeystorePassword   = controller.KeySSLKeystorePassword
	KeySSLKeyPassword        = controller.KeySSLKeyPassword
	KeySASLJAASConfig        = controller.KeySASLJAASConfig
)

// The causes a *KeyError wraps: controller.Err....
var (
	ErrNoSeeds              = controller.ErrNoSeeds
	ErrBadAddress           = controller.ErrBadAddress
	ErrUnsupportedStoreType = controller.ErrUnsupportedStoreType
	ErrUnreadableFile       = controller.ErrUnreadableFile
	ErrNoCertificate        = controller.ErrNoCertificate
	ErrBadKey               = controller.ErrBadKey
	ErrMissingCredentials   = controller.ErrMissingCredentials
	ErrUnsupportedValue     = controller.ErrUnsupportedValue
)
