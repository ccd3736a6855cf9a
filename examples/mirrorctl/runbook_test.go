package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// describeOf returns the Go description of one partition on the env's Mirror.
func describeOf(t *testing.T, e *env, topic string, p int32) mirror.PartitionDescription {
	t.Helper()
	ds, err := e.m.DescribeClusterMirrors(context.Background(), []string{"m1"},
		mirror.DescribeOptions{TopicPartitions: map[string][]int32{topic: {p}}, IncludeStates: true})
	require.NoError(t, err)
	return ds[0].Topics[0].Partitions[0]
}

func TestRunbookWaitAndRepeats(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(t.TempDir(), "mirror.properties")
	require.NoError(t, os.WriteFile(cfg, []byte("bootstrap.servers="+e.bootstrap+"\nfetch.wait.max.ms=50\n"), 0o600))
	code, _, errOut := e.ctl(t, "--create", "--mirror", "m1", "--mirror-config", cfg)
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = e.ctl(t, "--start", "--mirror", "m1", "--topics", "orders,payments")
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, e.m.WaitForStates(context.Background(), "m1", []string{"orders", "payments"}, statemachine.Mirroring))

	// Pause --wait returns with every partition actually PAUSED.
	code, out, errOut := e.ctl(t, "--pause", "--mirror", "m1", "--topics", "orders", "--wait")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `Every partition of "orders" is PAUSED.`)
	for p := int32(0); p < 2; p++ {
		require.Equal(t, statemachine.Paused, describeOf(t, e, "orders", p).State)
	}
	code, out, errOut = e.ctl(t, "--resume", "--mirror", "m1", "--topics", "orders", "--wait", "--output", "json")
	require.Equal(t, exitOK, code, errOut)
	var op opResult
	require.NoError(t, json.Unmarshal([]byte(out), &op))
	require.Equal(t, []topicResult{{Topic: "orders", State: "MIRRORING"}}, op.Topics)
	require.Equal(t, statemachine.Mirroring, describeOf(t, e, "orders", 1).State)

	// Resume of a MIRRORING topic is refused; the code is named once.
	code, _, errOut = e.ctl(t, "--resume", "--mirror", "m1", "--topics", "orders")
	require.Equal(t, exitError, code)
	require.Equal(t, 1, strings.Count(errOut, "INVALID_CLUSTER_MIRROR_STATES"), errOut)
	require.NotContains(t, errOut, "statemachine:")

	// Stop --wait: STOPPED (writable) on return; a repeated stop is a note and exit 0.
	code, out, errOut = e.ctl(t, "--stop", "--mirror", "m1", "--topics", "orders,payments", "--wait")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `Every partition of "orders", "payments" is STOPPED.`)
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"orders", 0}, {"orders", 1}, {"payments", 0}} {
		require.Equal(t, statemachine.Stopped, describeOf(t, e, tp.topic, tp.p).State)
	}
	code, out, errOut = e.ctl(t, "--stop", "--mirror", "m1", "--topics", "orders", "--wait")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `Topic "orders" of mirror "m1" is already stopped.`)
	require.Empty(t, errOut)
	code, out, errOut = e.ctl(t, "--pause", "--mirror", "m1", "--topics", "orders")
	require.Equal(t, exitError, code, "pausing a STOPPED topic is still refused: %s", out)
	require.Contains(t, errOut, "INVALID_CLUSTER_MIRROR_STATES")
}

func TestWaitTimesOut(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(t.TempDir(), "mirror.properties")
	require.NoError(t, os.WriteFile(cfg, []byte("bootstrap.servers="+e.bootstrap+"\n"), 0o600))
	code, _, errOut := e.ctl(t, "--create", "--mirror", "m1", "--mirror-config", cfg)
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = e.ctl(t, "--start", "--mirror", "m1", "--topics", "orders")
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, e.m.WaitForStates(context.Background(), "m1", []string{"orders"}, statemachine.Mirroring))
	kcl, err := kgo.NewClient(append(admin.ClientOpts(), kgo.SeedBrokers(e.addr))...)
	require.NoError(t, err)
	defer kcl.Close()
	var out bytes.Buffer
	c := &cli{o: &options{mirror: "m1", timeout: time.Second}, cl: admin.NewClient(kcl), out: &out, errOut: &out}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.timeout)
	defer cancel()
	// Nothing pauses the topic: the wait ends at the deadline naming a partition.
	err = c.waitStates(ctx, []string{"orders"}, statemachine.Paused)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `timed out after 1s waiting for "orders" to be PAUSED: `)
	if !strings.Contains(err.Error(), "no describe answered yet") {
		require.ErrorContains(t, err, `topic "orders" partition 0 is MIRRORING`)
	}
	err = c.waitStates(context.Background(), []string{"ghost"}, statemachine.Paused)
	require.ErrorContains(t, err, `topic "ghost" is not a topic of mirror "m1"`)
}

// selfSigned returns a CA-capable certificate for 127.0.0.1 and its PEM files.
func selfSigned(t *testing.T, dir string) (tls.Certificate, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mirrorctl-test"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	ca := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(ca, certPEM, 0o600))
	both := filepath.Join(dir, "keystore.pem")
	require.NoError(t, os.WriteFile(both, append(append([]byte{}, certPEM...), keyPEM...), 0o600))
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return cert, ca, both
}

func TestCommandConfigTLSAgainstAdminServer(t *testing.T) {
	dir := t.TempDir()
	cert, ca, keystore := selfSigned(t, dir)
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	principals := make(chan string, 4)
	srv, err := admin.NewServer(admin.ServerConfig{Handler: admin.UnimplementedHandler{}, TLS: &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		Principal: func(c net.Conn) string { p := admin.DefaultPrincipal(c); principals <- p; return p }})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	props := filepath.Join(dir, "client.properties")
	require.NoError(t, os.WriteFile(props, []byte("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location="+ca+
		"\nssl.keystore.type=PEM\nssl.keystore.location="+keystore+"\nclient.id=runbook\n"), 0o600))
	var out, errOut bytes.Buffer
	code := run([]string{"--bootstrap-server", ln.Addr().String(), "--command-config", props, "--list", "--timeout", "10s"}, &out, &errOut)
	// The handler answers INVALID_REQUEST "not implemented": the TLS connection worked.
	require.Equal(t, exitError, code)
	require.Contains(t, errOut.String(), "INVALID_REQUEST: not implemented by this server")
	require.Equal(t, "User:CN=mirrorctl-test", <-principals)
}

func TestCommandConfigSASLAgainstPlainKafka(t *testing.T) {
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "s3cret"))
	require.NoError(t, err)
	defer broker.Close()
	dir := t.TempDir()
	props := filepath.Join(dir, "client.properties")
	require.NoError(t, os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s3cret";`+"\n"), 0o600))
	var out, errOut bytes.Buffer
	code := run([]string{"--bootstrap-server", broker.ListenAddrs()[0], "--command-config", props, "--list", "--timeout", "10s"}, &out, &errOut)
	require.Equal(t, exitError, code)
	require.Contains(t, errOut.String(), "does not serve the cluster mirror RPCs", "authenticated, then the endpoint is recognised")
	require.NotContains(t, errOut.String(), "too old")
}

func TestParseCommandConfig(t *testing.T) {
	dir := t.TempDir()
	_, ca, keystore := selfSigned(t, dir)
	prop := func(kv ...string) []property {
		var ps []property
		for i := 0; i < len(kv); i += 2 {
			ps = append(ps, property{Key: kv[i], Value: kv[i+1]})
		}
		return ps
	}
	s, err := parseCommandConfig(prop("client.id", "x"))
	require.NoError(t, err)
	require.Nil(t, s.tls)
	require.Nil(t, s.mechanism)
	require.Len(t, s.opts(), 1)

	s, err = parseCommandConfig(prop("security.protocol", "sasl_ssl", "ssl.truststore.location", ca, "ssl.keystore.location", keystore,
		"ssl.endpoint.identification.algorithm", "", "sasl.mechanism", "SCRAM-SHA-512", "sasl.username", "u", "sasl.password", "p"))
	require.NoError(t, err)
	require.NotNil(t, s.tls.RootCAs)
	require.Len(t, s.tls.Certificates, 1)
	require.True(t, s.tls.InsecureSkipVerify)
	require.NotNil(t, s.tls.VerifyConnection, "the chain is still verified")
	require.Equal(t, "SCRAM-SHA-512", s.mechanism.Name())

	s, err = parseCommandConfig(prop("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN",
		"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="al\"ice" password="p w";`))
	require.NoError(t, err)
	require.Equal(t, "PLAIN", s.mechanism.Name())
	_, msg, err := s.mechanism.Authenticate(context.Background(), "host")
	require.NoError(t, err)
	require.Equal(t, plainMessage(t, `al"ice`, "p w"), msg)

	bad := []struct {
		props []property
		msg   string
	}{
		{prop("bootstrap.servers", "x"), "unsupported admin client property"},
		{prop("security.protocol", "TLS"), "security.protocol"},
		{prop("ssl.truststore.location", ca), "security.protocol is PLAINTEXT"},
		{prop("security.protocol", "SSL", "sasl.mechanism", "PLAIN"), "security.protocol is SSL"},
		{prop("security.protocol", "SSL", "ssl.truststore.type", "JKS", "ssl.truststore.location", ca), "convert the store to PEM"},
		{prop("security.protocol", "SSL", "ssl.truststore.location", filepath.Join(dir, "missing.pem")), "no such file"},
		{prop("security.protocol", "SSL", "ssl.truststore.location", keystore+"x"), "no such file"},
		{prop("security.protocol", "SSL", "ssl.keystore.certificate.chain", "x"), "go together"},
		{prop("security.protocol", "SASL_PLAINTEXT"), "sasl.mechanism is required"},
		{prop("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN"), "needs a username"},
		{prop("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "GSSAPI", "sasl.username", "u"), "not supported"},
		{prop("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN", "sasl.username", "u", "sasl.jaas.config", `x required username="u";`), "not both"},
	}
	for _, b := range bad {
		_, err := parseCommandConfig(b.props)
		require.ErrorIs(t, err, errCommandConfig, "%v", b.props)
		require.ErrorContains(t, err, b.msg, "%v", b.props)
	}
	var nme *notMirrorEndpointError
	require.False(t, errors.As(err, &nme))
}

// plainMessage is the PLAIN initial response for user and pass.
func plainMessage(t *testing.T, user, pass string) []byte {
	t.Helper()
	_, msg, err := plain.Auth{User: user, Pass: pass}.AsMechanism().Authenticate(context.Background(), "host")
	require.NoError(t, err)
	return msg
}

func TestDescribeColumns(t *testing.T) {
	require.Equal(t, "-", partitionDesc{}.errorColumn())
	require.Equal(t, "NOT_COORDINATOR: moved", partitionDesc{ErrorCode: int16(admin.CodeNotCoordinator), Error: "moved"}.errorColumn())
	require.Equal(t, "STOPPING: boom", partitionDesc{Error: "STOPPING: boom"}.errorColumn(), "a FAILED reason")
	require.Equal(t, "source unreachable since 2026-01-02T03:04:05Z: NETWORK_EXCEPTION: dial tcp: connection refused",
		partitionDesc{SourceErrorCode: int16(admin.CodeNetworkException), SourceError: "dial tcp: connection refused",
			SourceUnreachableSince: "2026-01-02T03:04:05Z"}.errorColumn())
	require.Equal(t, "-", durationText(-1))
	require.Equal(t, "0s", durationText(0))
	require.Equal(t, "1.5s", durationText(1500))
	require.Equal(t, "", timeText(-1))
	require.Equal(t, "1970-01-01T00:00:01.5Z", timeText(1500))
	require.Equal(t, "-", epochText(-1))
	require.Equal(t, "7", epochText(7))
}

func TestDescribeShowsUnreachableSource(t *testing.T) {
	e := newEnv(t, mirror.WithSourceUnreachableAfter(0))
	cfg := filepath.Join(t.TempDir(), "mirror.properties")
	require.NoError(t, os.WriteFile(cfg, []byte("bootstrap.servers="+e.bootstrap+"\nfetch.wait.max.ms=50\n"), 0o600))
	code, _, errOut := e.ctl(t, "--create", "--mirror", "m1", "--mirror-config", cfg)
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = e.ctl(t, "--start", "--mirror", "m1", "--topics", "payments")
	require.Equal(t, exitOK, code, errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, e.m.WaitForLag(ctx, "m1", []string{"payments"}, 0))
	e.src.Close()
	waitDescribe(t, e, func(ds []mirrorDesc) bool {
		return len(ds[0].Partitions) == 1 && ds[0].Partitions[0].SourceErrorCode != 0
	})
	code, out, errOut := e.ctl(t, "--describe", "--mirror", "m1")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^m1\s+payments\s+0\s+1\s+1\s+-\s+-\s+MIRRORING\s+-\s+(-|1)\s+source unreachable since \S+: [A-Z_]+: .+$`, lines[1])
	// The lag is unknown, never a stale 0, and --failed lists the partition.
	code, out, errOut = e.ctl(t, "--describe", "--mirror", "m1", "--failed")
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `(?m)^m1\s+payments\s+0\s+\d+\s+[A-Z]+\s+source unreachable since `, out)
}
