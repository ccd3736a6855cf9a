package twosites

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// testPKI is a CA and a server certificate for 127.0.0.1, as PEM files.
type testPKI struct {
	dir               string
	caFile            string
	certFile, keyFile string
	pool              *x509.CertPool
	ca                *x509.Certificate
	caKey             *ecdsa.PrivateKey
}

// clientCert is a client certificate for subject signed by the CA.
func (p testPKI) clientCert(t testing.TB, subject pkix.Name) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// newPKI makes a CA and a server certificate signed by it with crypto/x509.
func newPKI(t testing.TB) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kmirror test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	p := testPKI{dir: dir, caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "server.pem"),
		keyFile: filepath.Join(dir, "server.key"), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.ca, p.caKey = ca, caKey
	write := func(path, typ string, b []byte) {
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600))
	}
	write(p.caFile, "CERTIFICATE", caDER)
	write(p.certFile, "CERTIFICATE", der)
	write(p.keyFile, "PRIVATE KEY", keyDER)
	return p
}

// clientProps are Kafka client properties for SASL_SSL with SCRAM-SHA-512.
func (p testPKI) clientProps(user, password string) string {
	return "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n" +
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + user + "\" password=\"" + password + "\";\n" +
		"ssl.truststore.type=PEM\nssl.truststore.location=" + p.caFile + "\n"
}

// propsFile writes props to a file and returns its path.
func propsFile(t testing.TB, name, props string) string {
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(props), 0o600))
	return path
}

// scramOpts are kgo options for SCRAM-SHA-512 over TLS.
func (p testPKI) scramOpts(user, password string) []kgo.Opt {
	return []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(kscram.Auth{User: user, Pass: password}.AsSha512Mechanism())}
}

// secureSite starts a SASL_SSL site whose first user is admin.
func secureSite(t testing.TB, name string, p testPKI, extra ...string) *site {
	return newSite(t, name, append([]string{"-tls-cert", p.certFile, "-tls-key", p.keyFile,
		"-sasl-mechanisms", "SCRAM-SHA-512,PLAIN",
		"-add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"}, extra...)...)
}

// saramaSCRAM is a sarama config for SCRAM-SHA-512 over TLS.
func (p testPKI) saramaSCRAM(user, password string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, password
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaScram{} }
	return cfg
}

// TestSCRAMOverTLSClients: kgo and sarama authenticate with SCRAM-SHA-512
// over TLS against a kmirrord site, produce and consume; a wrong password is
// SASL_AUTHENTICATION_FAILED, an unauthenticated client is cut off, and the
// failure is logged and counted.
func TestSCRAMOverTLSClients(t *testing.T) {
	p := newPKI(t)
	metrics := freeAddr(t)
	a := secureSite(t, "A", p, "-metrics", metrics)
	opts := p.scramOpts("admin", "admin-secret")
	createTopic(t, a.addr, topic, partitions, opts...)
	produced := produceKgo(t, a.addr, topic, partitions, 5, "kgo", opts...)
	want := map[int32]int{}
	for part, offs := range produced {
		want[part] = len(offs)
	}
	got := readKgo(t, a.addr, topic, want, opts...)
	require.Len(t, got[0], 5)

	t.Run("sarama", func(t *testing.T) {
		cfg := p.saramaSCRAM("admin", "admin-secret")
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		pr, err := sarama.NewSyncProducer([]string{a.addr}, cfg)
		require.NoError(t, err)
		part, off, err := pr.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 1, Key: sarama.StringEncoder("sk"), Value: sarama.StringEncoder("from sarama")})
		require.NoError(t, err)
		require.NoError(t, pr.Close())
		require.Equal(t, int32(1), part)
		c, err := sarama.NewConsumer([]string{a.addr}, p.saramaSCRAM("admin", "admin-secret"))
		require.NoError(t, err)
		defer func() { require.NoError(t, c.Close()) }()
		pc, err := c.ConsumePartition(topic, 1, off)
		require.NoError(t, err)
		defer pc.Close()
		select {
		case m := <-pc.Messages():
			require.Equal(t, "from sarama", string(m.Value))
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("sarama consumer: no message within 30s")
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		mark := a.mark()
		cl := kgoClient(t, a.addr, append(p.scramOpts("admin", "nope"), kgo.RequestRetries(0))...)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		l := a.waitLog(10*time.Second, mark, func(l logLine) bool { return l.str("msg") == "kmirrord: authentication failed" })
		require.Equal(t, "admin", l.str("user"))
		require.Contains(t, l.str("err"), "wrong proof")
		// A second failure from the same host within the minute (sarama's) is
		// counted, not logged.
		cfg := p.saramaSCRAM("admin", "wrong")
		cfg.Metadata.Retry.Max = 0
		_, err = sarama.NewClient([]string{a.addr}, cfg)
		require.ErrorContains(t, err, "SASL Authentication failed")
		requireMetric(t, metrics, "kmirror_auth_failures_total", func(v float64) bool { return v >= 2 })
		require.Len(t, a.logs(mark, func(l logLine) bool { return l.str("msg") == "kmirrord: authentication failed" }), 1)
	})

	t.Run("no SASL: closed before any request is served", func(t *testing.T) {
		cl := kgoClient(t, a.addr, kgo.DialTLSConfig(&tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}), kgo.RequestRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		require.Error(t, err)
	})

	t.Run("mirrorctl --command-config", func(t *testing.T) {
		cc := propsFile(t, "admin.properties", p.clientProps("admin", "admin-secret"))
		out := a.ctl("--command-config", cc, "--list")
		require.NotContains(t, out, "error")
		bad := propsFile(t, "bad.properties", p.clientProps("admin", "nope"))
		_, errOut, code := a.ctlCode("--command-config", bad, "--list")
		require.NotEqual(t, 0, code)
		require.Contains(t, strings.ToLower(errOut), "sasl")
	})
	a.term()
}

// TestMirrorFromSCRAMSite: site B mirrors a site A that requires SCRAM over
// TLS, with the credentials in the mirror config; B serves A's bytes.
func TestMirrorFromSCRAMSite(t *testing.T) {
	p := newPKI(t)
	a := secureSite(t, "A", p)
	b := newSite(t, "B")
	opts := p.scramOpts("admin", "admin-secret")
	createTopic(t, a.addr, topic, partitions, opts...)
	produceKgo(t, a.addr, topic, partitions, 20, "a", opts...)
	cfg := "bootstrap.servers=" + a.addr + "\nfetch.wait.max.ms=100\n" + p.clientProps("admin", "admin-secret")
	b.ctl("--create", "--mirror", "a-to-b", "--mirror-config", propsFile(t, "a-to-b.properties", cfg))
	b.ctl("--start", "--mirror", "a-to-b", "--topics", topic)
	produceKgo(t, a.addr, topic, partitions, 10, "a-live", opts...)
	ends := map[int32]int64{}
	for part := int32(0); part < partitions; part++ {
		ends[part] = logEnd(t, rawLog(t, a.addr, topic, part, opts...))
	}
	b.waitPartitions("a-to-b", topic, int(partitions), fmt.Sprintf("caught up to %v", ends), func(d partitionDesc) bool {
		return d.State == "MIRRORING" && d.DestinationOffset == ends[d.Partition]
	})
	for part := int32(0); part < partitions; part++ {
		ra, rb := rawLog(t, a.addr, topic, part, opts...), rawLog(t, b.addr, topic, part)
		require.NotEmpty(t, ra)
		require.True(t, string(ra) == string(rb), "partition %d: A %d bytes, B %d bytes", part, len(ra), len(rb))
	}
	b.term()
	a.term()
}

// TestKafkaToolsSCRAM: kafka-configs --alter --add-config SCRAM-SHA-512
// creates a user on a SASL_SSL site, who then produces and consumes with
// Kafka's console tools and --command-config (PEM truststore).
func TestKafkaToolsSCRAM(t *testing.T) {
	java(t) // skips without the jars
	p := newPKI(t)
	a := secureSite(t, "A", p)
	createTopic(t, a.addr, topic, 1, p.scramOpts("admin", "admin-secret")...)
	adminProps := propsFile(t, "admin.properties", p.clientProps("admin", "admin-secret"))
	runJava(t, "org.apache.kafka.tools.ConfigCommand", "", "--bootstrap-server", a.addr, "--command-config", adminProps,
		"--entity-type", "users", "--entity-name", "bob", "--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]")
	out := runJava(t, "org.apache.kafka.tools.ConfigCommand", "", "--bootstrap-server", a.addr, "--command-config", adminProps,
		"--entity-type", "users", "--entity-name", "bob", "--describe")
	require.Contains(t, out, "SCRAM-SHA-512=iterations=8192")

	bob := propsFile(t, "bob.properties", p.clientProps("bob", "bob-secret"))
	runJava(t, "org.apache.kafka.tools.ConsoleProducer", "k1:v1\nk2:v2\n", "--bootstrap-server", a.addr, "--topic", topic,
		"--command-config", bob, "--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
	out = runJava(t, "org.apache.kafka.tools.consumer.ConsoleConsumer", "", "--bootstrap-server", a.addr, "--topic", topic,
		"--command-config", bob, "--partition", "0", "--offset", "earliest", "--max-messages", "2", "--timeout-ms", "30000",
		"--formatter-property", "print.key=true")
	require.Equal(t, "k1\tv1\nk2\tv2\n", out)

	// A wrong password fails the console consumer (which exits 0 all the
	// same: it reports the error and stops).
	wrong := propsFile(t, "wrong.properties", p.clientProps("bob", "nope"))
	stdout, errOut, code := runJavaResult(t, "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", a.addr,
		"--topic", topic, "--command-config", wrong, "--partition", "0", "--offset", "earliest", "--max-messages", "1", "--timeout-ms", "10000")
	t.Logf("console consumer with a wrong password: exit %d, stdout %s, stderr %s", code, stdout, errOut)
	require.Contains(t, stdout+errOut, "SaslAuthenticationException")
	require.Contains(t, stdout+errOut, "invalid credentials with SASL mechanism SCRAM-SHA-512")
	a.term()
}

// TestAnonymousNonLoopbackRefused: kmirrord refuses to listen on a
// non-loopback address without authentication unless -allow-anonymous.
func TestAnonymousNonLoopbackRefused(t *testing.T) {
	cmd := execKmirrord(t, "-listen", "0.0.0.0:0", "-data", t.TempDir())
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "-allow-anonymous")
}

// saramaScram adapts franz-go's SCRAM-SHA-512 client to sarama.SCRAMClient
// (sarama ships no SCRAM implementation of its own; the SASL framing,
// handshake and SaslAuthenticate requests are sarama's).
type saramaScram struct {
	session sasl.Session
	first   []byte
	started bool
	done    bool
}

// Begin implements sarama.SCRAMClient.
func (c *saramaScram) Begin(user, password, authzID string) error {
	s, first, err := kscram.Auth{User: user, Pass: password, Zid: authzID}.AsSha512Mechanism().Authenticate(context.Background(), "")
	if err != nil {
		return err
	}
	c.session, c.first = s, first
	return nil
}

// Step implements sarama.SCRAMClient.
func (c *saramaScram) Step(challenge string) (string, error) {
	if !c.started {
		c.started = true
		return string(c.first), nil
	}
	done, resp, err := c.session.Challenge([]byte(challenge))
	c.done = done
	return string(resp), err
}

// Done implements sarama.SCRAMClient.
func (c *saramaScram) Done() bool { return c.done }

// freeAddr returns a free loopback address.
func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// requireMetric scrapes addr/metrics until the series name satisfies ok.
func requireMetric(t testing.TB, addr, name string, ok func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(b), "\n") {
				var v float64
				if strings.HasPrefix(line, name+" ") {
					last = line
					if _, err := fmt.Sscanf(line[len(name)+1:], "%g", &v); err == nil && ok(v) {
						return
					}
				}
			}
		}
		<-tick.C
	}
	t.Fatalf("metric %s: last %q", name, last)
}

// execKmirrord returns a command running kmirrord with args.
func execKmirrord(t testing.TB, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, bins.kmirrord, args...)
}

// TestMutualTLSPrincipal: with -tls-client-ca a client needs a certificate
// of that CA, and its principal is the subject in RFC 2253 form
// (User:CN=client-1,OU=eng,O=kmirror), what -super-users and the ACLs name.
func TestMutualTLSPrincipal(t *testing.T) {
	p := newPKI(t)
	a := newSite(t, "A", "-tls-cert", p.certFile, "-tls-key", p.keyFile, "-tls-client-ca", p.caFile,
		"-enforce-acls", "-super-users", "User:CN=client-1,OU=eng,O=kmirror")
	tlsWith := func(certs ...tls.Certificate) kgo.Opt {
		return kgo.DialTLSConfig(&tls.Config{RootCAs: p.pool, Certificates: certs, MinVersion: tls.VersionTLS12})
	}
	super := tlsWith(p.clientCert(t, pkix.Name{CommonName: "client-1", OrganizationalUnit: []string{"eng"}, Organization: []string{"kmirror"}}))
	createTopic(t, a.addr, topic, 1, super)
	produceKgo(t, a.addr, topic, 1, 3, "mtls", super)

	other := kgoClient(t, a.addr, tlsWith(p.clientCert(t, pkix.Name{CommonName: "client-2", Organization: []string{"kmirror"}})))
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp := request[*kmsg.MetadataResponse](t, other, req)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, resp.Topics[0].ErrorCode, "User:CN=client-2,O=kmirror has no ACL")

	noCert := kgoClient(t, a.addr, tlsWith(), kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, noCert)
	require.Error(t, err, "a client without a certificate is refused in the TLS handshake")
	a.term()
}
