package kafkaclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/mirror/controller"
)

// testPEM writes a self-signed certificate and its key (PKCS#8) as PEM files: the
// certificate alone, the key alone and both in one file (a Kafka PEM key store).
type testPEM struct {
	cert, key, both, notPEM string
	certPEM, keyPEM         []byte
}

func newTestPEM(t *testing.T) testPEM {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	dir := t.TempDir()
	p := testPEM{cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"),
		both: filepath.Join(dir, "store.pem"), notPEM: filepath.Join(dir, "store.jks"),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
	require.NoError(t, os.WriteFile(p.cert, p.certPEM, 0o600))
	require.NoError(t, os.WriteFile(p.key, p.keyPEM, 0o600))
	require.NoError(t, os.WriteFile(p.both, append(append([]byte{}, p.keyPEM...), p.certPEM...), 0o600))
	require.NoError(t, os.WriteFile(p.notPEM, []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}, 0o600))
	return p
}

func parse(t *testing.T, raw map[string]string) controller.MirrorConfig {
	t.Helper()
	if _, ok := raw[controller.KeyBootstrapServers]; !ok {
		raw[controller.KeyBootstrapServers] = "a:1"
	}
	mc, err := controller.ParseMirrorConfig(raw)
	require.NoError(t, err, "%v", raw)
	return mc
}

// TestLoadRefusesBadConnections is the validation table: each bad connection config is
// refused with a *controller.KeyError naming the key and wrapping the sentinel.
func TestLoadRefusesBadConnections(t *testing.T) {
	p := newTestPEM(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	ssl := func(kv ...string) map[string]string {
		m := map[string]string{controller.KeySecurityProtocol: "SSL"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		raw  map[string]string
		key  string
		err  error
	}{
		{"no seeds", map[string]string{controller.KeyBootstrapServers: ","}, controller.KeyBootstrapServers, controller.ErrNoSeeds},
		{"missing CA file", ssl(controller.KeySSLCAFile, missing), controller.KeySSLCAFile, controller.ErrUnreadableFile},
		{"CA file without certificate", ssl(controller.KeySSLCAFile, p.key), controller.KeySSLCAFile, controller.ErrNoCertificate},
		{"inline CA without certificate", ssl(controller.KeySSLTruststoreCerts, "not pem"), controller.KeySSLTruststoreCerts, controller.ErrNoCertificate},
		{"CA file and inline", ssl(controller.KeySSLCAFile, p.cert, controller.KeySSLTruststoreCerts, string(p.certPEM)), controller.KeySSLTruststoreCerts, controller.ErrUnsupportedValue},
		{"JKS trust store", ssl(controller.KeySSLTruststoreType, "JKS", controller.KeySSLCAFile, p.notPEM), controller.KeySSLTruststoreType, controller.ErrUnsupportedStoreType},
		{"PKCS12 key store", ssl(controller.KeySSLKeystoreType, "PKCS12", controller.KeySSLCertFile, p.notPEM), controller.KeySSLKeystoreType, controller.ErrUnsupportedStoreType},
		{"unknown store type", ssl(controller.KeySSLTruststoreType, "BKS"), controller.KeySSLTruststoreType, controller.ErrUnsupportedValue},
		{"PEM trust store password", ssl(controller.KeySSLCAFile, p.cert, controller.KeySSLTruststorePassword, "x"), controller.KeySSLTruststorePassword, controller.ErrUnsupportedValue},
		{"PEM key store password", ssl(controller.KeySSLCertFile, p.both, controller.KeySSLKeystorePassword, "x"), controller.KeySSLKeystorePassword, controller.ErrUnsupportedValue},
		{"key store without key", ssl(controller.KeySSLCertFile, p.cert), controller.KeySSLCertFile, controller.ErrBadKey},
		{"key store without certificate", ssl(controller.KeySSLCertFile, p.key), controller.KeySSLCertFile, controller.ErrNoCertificate},
		{"missing key store", ssl(controller.KeySSLCertFile, missing), controller.KeySSLCertFile, controller.ErrUnreadableFile},
		{"inline chain without key", ssl(controller.KeySSLKeystoreChain, string(p.certPEM)), controller.KeySSLKeystoreKey, controller.ErrBadKey},
		{"key without certificate", ssl(controller.KeySSLKeyFile, p.key), controller.KeySSLCertFile, controller.ErrNoCertificate},
		{"key of another certificate", ssl(controller.KeySSLCertFile, p.cert, controller.KeySSLKeyFile, newTestPEM(t).key), controller.KeySSLKeyFile, controller.ErrBadKey},
		{"SASL without username", map[string]string{controller.KeySecurityProtocol: "SASL_PLAINTEXT", controller.KeySASLPassword: "p"}, controller.KeySASLUsername, controller.ErrMissingCredentials},
		{"SCRAM without password", map[string]string{controller.KeySecurityProtocol: "SASL_SSL", controller.KeySASLMechanism: "SCRAM-SHA-512", controller.KeySASLUsername: "u"}, controller.KeySASLPassword, controller.ErrMissingCredentials},
		{"OAUTHBEARER in properties", map[string]string{controller.KeySecurityProtocol: "SASL_SSL", controller.KeySASLMechanism: "OAUTHBEARER"}, controller.KeySASLMechanism, controller.ErrUnsupportedValue},
		{"JAAS of another module", map[string]string{controller.KeySecurityProtocol: "SASL_PLAINTEXT", controller.KeySASLMechanism: "SCRAM-SHA-256",
			controller.KeySASLJAASConfig: `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`}, controller.KeySASLJAASConfig, controller.ErrUnsupportedValue},
		{"JAAS not parsable", map[string]string{controller.KeySecurityProtocol: "SASL_PLAINTEXT", controller.KeySASLJAASConfig: `PlainLoginModule username="u`}, controller.KeySASLJAASConfig, controller.ErrUnsupportedValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(parse(t, tc.raw))
			var ke *controller.KeyError
			require.ErrorAs(t, err, &ke)
			require.Equal(t, tc.key, ke.Key, "%v", err)
			require.ErrorIs(t, err, tc.err)
			require.Contains(t, err.Error(), tc.key)
		})
	}
}

// TestParseRefusesBadConnectionKeys: the keys ParseMirrorConfig checks itself (syntax)
// come out as *controller.KeyError inside its INVALID_CONFIG error.
func TestParseRefusesBadConnectionKeys(t *testing.T) {
	for _, tc := range []struct {
		raw map[string]string
		key string
		err error
	}{
		{map[string]string{controller.KeyBootstrapServers: "a:1,nohost"}, controller.KeyBootstrapServers, controller.ErrBadAddress},
		{map[string]string{controller.KeyBootstrapServers: "a:99999"}, controller.KeyBootstrapServers, controller.ErrBadAddress},
		{map[string]string{controller.KeyBootstrapServers: "a:1", controller.KeySecurityProtocol: "TLS"}, controller.KeySecurityProtocol, controller.ErrUnsupportedValue},
		{map[string]string{controller.KeyBootstrapServers: "a:1", controller.KeySASLMechanism: "GSSAPI"}, controller.KeySASLMechanism, controller.ErrUnsupportedValue},
		{map[string]string{controller.KeyBootstrapServers: " "}, controller.KeyBootstrapServers, controller.ErrNoSeeds},
	} {
		_, err := controller.ParseMirrorConfig(tc.raw)
		var ke *controller.KeyError
		require.ErrorAs(t, err, &ke, "%v", tc.raw)
		require.Equal(t, tc.key, ke.Key)
		require.ErrorIs(t, err, tc.err)
	}
	require.ErrorIs(t, controller.ValidateSeeds("Connection.Seeds", []string{"[::1]:9092", "h:1"}), nil)
	require.ErrorIs(t, controller.Connection{Seeds: []string{"h"}}.Validate(), controller.ErrBadAddress)
}

// TestLoadPEMForms loads every PEM form Kafka and MirrorMaker 2 files use.
func TestLoadPEMForms(t *testing.T) {
	p := newTestPEM(t)
	for name, raw := range map[string]map[string]string{
		"truststore PEM file":       {controller.KeySSLTruststoreType: "PEM", controller.KeySSLCAFile: p.cert},
		"truststore inline":         {controller.KeySSLTruststoreType: "PEM", controller.KeySSLTruststoreCerts: string(p.certPEM)},
		"keystore PEM file":         {controller.KeySSLKeystoreType: "PEM", controller.KeySSLCertFile: p.both},
		"keystore inline":           {controller.KeySSLKeystoreType: "PEM", controller.KeySSLKeystoreChain: string(p.certPEM), controller.KeySSLKeystoreKey: string(p.keyPEM)},
		"cert and key files":        {controller.KeySSLCertFile: p.cert, controller.KeySSLKeyFile: p.key},
		"system roots, no keystore": {},
	} {
		raw[controller.KeySecurityProtocol] = "SSL"
		c, err := Load(parse(t, raw))
		require.NoError(t, err, name)
		require.NotNil(t, c.TLS, name)
		require.Nil(t, c.SASL, name)
		if raw[controller.KeySSLCertFile] != "" || raw[controller.KeySSLKeystoreChain] != "" {
			require.Len(t, c.TLS.Certificates, 1, name)
		}
		if raw[controller.KeySSLCAFile] != "" || raw[controller.KeySSLTruststoreCerts] != "" {
			require.NotNil(t, c.TLS.RootCAs, name)
		}
	}
	c, err := Load(parse(t, map[string]string{controller.KeySecurityProtocol: "PLAINTEXT", controller.KeySSLCAFile: "/ignored"}))
	require.NoError(t, err, "ssl.* is ignored unless the protocol uses TLS, as in Kafka")
	require.Nil(t, c.TLS)
}

// TestLoadSASLForms builds PLAIN and SCRAM from sasl.username/password and from
// sasl.jaas.config.
func TestLoadSASLForms(t *testing.T) {
	for mech, jaas := range map[string]string{
		"PLAIN":         `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="a b;c";`,
		"SCRAM-SHA-256": `org.apache.kafka.common.security.scram.ScramLoginModule required username=alice password="pw";`,
		"SCRAM-SHA-512": "",
	} {
		raw := map[string]string{controller.KeySecurityProtocol: "SASL_PLAINTEXT", controller.KeySASLMechanism: mech}
		if jaas != "" {
			raw[controller.KeySASLJAASConfig] = jaas
		} else {
			raw[controller.KeySASLUsername], raw[controller.KeySASLPassword] = "alice", "pw"
		}
		c, err := Load(parse(t, raw))
		require.NoError(t, err, mech)
		require.Equal(t, mech, c.SASL.Name())
		require.Nil(t, c.TLS)
	}
	_, user, pass, err := parseJAAS(`x.PlainLoginModule required username="alice" password="a b;c";`)
	require.NoError(t, err)
	require.Equal(t, "alice", user)
	require.Equal(t, "a b;c", pass)
}

// TestLoadEncryptedKey decrypts PKCS#8 keys encrypted by openssl (PBES2: PBKDF2 with
// HMAC-SHA256, AES-256-CBC, and the SHA-1 and AES-128 variants) with ssl.key.password; a
// wrong or missing password is refused naming ssl.key.password.
func TestLoadEncryptedKey(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not found")
	}
	p := newTestPEM(t)
	for _, args := range [][]string{{"-v2", "aes-256-cbc"}, {"-v2", "aes-128-cbc", "-v2prf", "hmacWithSHA1"}} {
		enc := filepath.Join(t.TempDir(), "enc.pem")
		cmd := exec.Command("openssl", append([]string{"pkcs8", "-topk8", "-in", p.key, "-out", enc, "-passout", "pass:s3cret"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		raw := func(pass string) controller.MirrorConfig {
			m := map[string]string{controller.KeySecurityProtocol: "SSL", controller.KeySSLCertFile: p.cert, controller.KeySSLKeyFile: enc}
			if pass != "" {
				m[controller.KeySSLKeyPassword] = pass
			}
			return parse(t, m)
		}
		c, err := Load(raw("s3cret"))
		require.NoError(t, err, "%v", args)
		require.Len(t, c.TLS.Certificates, 1)
		for _, bad := range []string{"wrong", ""} {
			_, err = Load(raw(bad))
			var ke *controller.KeyError
			require.ErrorAs(t, err, &ke)
			require.Equal(t, controller.KeySSLKeyPassword, ke.Key)
			require.ErrorIs(t, err, controller.ErrBadKey)
		}
	}
	require.True(t, errors.Is(func() error { _, err := decryptPKCS8([]byte{1, 2, 3}, nil); return err }(), errPKCS8))
}
