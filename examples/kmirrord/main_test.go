package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/admin"
)

// daemonRun is one run of run() on a goroutine, its stderr piped.
type daemonRun struct {
	cancel  context.CancelFunc
	code    chan int
	addr    string
	metrics string // the -metrics address it logged, "" without -metrics
}

// startRun runs the daemon with args until stop, waiting for its listening
// line.
func startRun(t *testing.T, args ...string) *daemonRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &daemonRun{cancel: cancel, code: make(chan int, 1)}
	go func() {
		d.code <- run(ctx, append(args, "-log-format", "json"), pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		if l["msg"] == "kmirrord metrics" {
			d.metrics = l["addr"].(string)
		}
		if l["msg"] == "kmirrord listening" {
			d.addr = l["addr"].(string)
			break
		}
	}
	require.NotEmpty(t, d.addr, "the daemon exited before listening")
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() {
		if d.cancel != nil {
			d.stop(t)
		}
	})
	return d
}

// stop cancels the run (SIGTERM's path) and requires exit code 0.
func (d *daemonRun) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	d.cancel = nil
	select {
	case code := <-d.code:
		require.Equal(t, exitOK, code)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not stop within 30s")
	}
}

func runOnce(args ...string) (int, string) {
	var sb strings.Builder
	code := run(context.Background(), args, &sb)
	return code, sb.String()
}

func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-bogus"},
		{"-data", dir},
		{"-listen", "127.0.0.1:0"},
		{"-listen", "nohostport", "-data", dir},
		{"-listen", "127.0.0.1:70000", "-data", dir},
		{"-listen", "127.0.0.1:0", "-data", dir, "-advertise", "h:0"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-cluster-id", "has space"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-log-level", "loud"},
		{"-listen", "127.0.0.1:0", "-data", dir, "extra"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-super-users", "User:admin"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-enforce-acls", "-super-users", "admin"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-enforce-acls", "-super-users", "User:a,,User:b"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-tls-cert", "c.pem"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-tls-client-ca", "ca.pem"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-sasl-mechanisms", "GSSAPI"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-add-scram", "SCRAM-SHA-512=[name=a]"},
		{"-listen", "127.0.0.1:0", "-data", dir, "-add-scram", "SCRAM-SHA-512=[name=a,password=b,iterations=1]"},
		// Not loopback and nobody authenticates.
		{"-listen", "0.0.0.0:0", "-data", dir},
		{"-listen", ":0", "-data", dir},
	} {
		code, out := runOnce(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, out)
		require.NotEmpty(t, out, "%v", args)
	}
	code, _ := runOnce("-help")
	require.Equal(t, exitOK, code)
}

// TestStartStopAndClusterID: first start stores the id; a restart without
// -cluster-id keeps it; another id is a usage error; a second daemon on the
// same directory fails with exit 1 while the first runs.
func TestStartStopAndClusterID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	d := startRun(t, "-listen", "127.0.0.1:0", "-data", dir, "-cluster-id", "site-a")
	code, out := runOnce("-listen", "127.0.0.1:0", "-data", dir)
	require.Equal(t, exitRuntime, code, out)
	require.Contains(t, out, "in use")

	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mreq := kmsg.NewPtrMetadataRequest()
	resp, err := cl.Request(ctx, mreq)
	require.NoError(t, err)
	require.Equal(t, "site-a", *resp.(*kmsg.MetadataResponse).ClusterID)
	// The admin RPCs share the port.
	kacl, err := kgo.NewClient(append(admin.ClientOpts(), kgo.SeedBrokers(d.addr))...)
	require.NoError(t, err)
	defer kacl.Close()
	acl := admin.NewClient(kacl)
	list, err := acl.ListClusterMirrors(ctx, admin.NewPtrListClusterMirrorsRequest())
	require.NoError(t, err)
	require.Empty(t, list.Mirrors)
	d.stop(t)

	b, err := os.ReadFile(filepath.Join(dir, ClusterIDFile))
	require.NoError(t, err)
	require.Equal(t, "site-a\n", string(b))
	code, out = runOnce("-listen", "127.0.0.1:0", "-data", dir, "-cluster-id", "site-b")
	require.Equal(t, exitUsage, code, out)
	require.Contains(t, out, "site-a")
	d = startRun(t, "-listen", "127.0.0.1:0", "-data", dir)
	d.stop(t)
}

// TestDescribeConfigs: topic configs kept by the destination are served as
// topic-level values; unknown topics and resource types get Kafka's codes.
func TestDescribeConfigs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	d := startRun(t, "-listen", "127.0.0.1:0", "-data", dir, "-cluster-id", "c")
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
	rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	cresp, err := cl.Request(ctx, ct)
	require.NoError(t, err)
	require.Equal(t, int16(0), cresp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "t"}, {kmsg.ConfigResourceTypeTopic, "missing"}, {kmsg.ConfigResourceTypeBroker, "0"}, {kmsg.ConfigResourceTypeBrokerLogger, "0"}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		dc.Resources = append(dc.Resources, rr)
	}
	dresp, err := cl.Request(ctx, dc)
	require.NoError(t, err)
	// kgo shards the request by resource and merges the answers in any order.
	byName := map[string]kmsg.DescribeConfigsResponseResource{}
	for _, r := range dresp.(*kmsg.DescribeConfigsResponse).Resources {
		byName[r.ResourceType.String()+"/"+r.ResourceName] = r
	}
	require.Len(t, byName, 4)
	topic := byName["TOPIC/t"]
	require.Equal(t, int16(0), topic.ErrorCode)
	require.Len(t, topic.Configs, 1)
	require.Equal(t, "retention.ms", topic.Configs[0].Name)
	require.Equal(t, "1000", *topic.Configs[0].Value)
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, topic.Configs[0].Source)
	require.Equal(t, int16(admin.CodeUnknownTopicOrPartition), byName["TOPIC/missing"].ErrorCode)
	require.Equal(t, int16(0), byName["BROKER/0"].ErrorCode)
	require.Empty(t, byName["BROKER/0"].Configs)
	require.Equal(t, int16(admin.CodeInvalidRequest), byName["BROKER_LOGGER/0"].ErrorCode)
	d.stop(t)
}

// TestMetricsEndpoint: with -metrics the daemon serves kmirror_ series at /metrics; an
// admin RPC shows up in them.
func TestMetricsEndpoint(t *testing.T) {
	d := startRun(t, "-listen", "127.0.0.1:0", "-data", filepath.Join(t.TempDir(), "site"), "-metrics", "127.0.0.1:0")
	require.NotEmpty(t, d.metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kacl, err := kgo.NewClient(append(admin.ClientOpts(), kgo.SeedBrokers(d.addr))...)
	require.NoError(t, err)
	defer kacl.Close()
	_, err = admin.NewClient(kacl).ListClusterMirrors(ctx, admin.NewPtrListClusterMirrorsRequest())
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.metrics+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^kmirror_admin_requests_total\{api="ListClusterMirrors",code="NONE"\} 1$`, string(body))
	d.stop(t)
	code, out := runOnce("-listen", "127.0.0.1:0", "-data", t.TempDir(), "-metrics", "nohostport")
	require.Equal(t, exitUsage, code, out)
}

// TestEnforceACLsFlag: without -enforce-acls a client may create a topic and
// describe the broker's configs; with it and no ACL synced, CreateTopics is
// TOPIC_AUTHORIZATION_FAILED and DescribeConfigs of the broker
// CLUSTER_AUTHORIZATION_FAILED; a -super-users principal (every plaintext
// client is User:ANONYMOUS) may do both.
func TestEnforceACLsFlag(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code, brokerDC int16
	}{
		{nil, 0, 0},
		{[]string{"-enforce-acls"}, int16(admin.CodeTopicAuthorizationFailed), int16(admin.CodeClusterAuthorizationFailed)},
		{[]string{"-enforce-acls", "-super-users", "User:admin, User:ANONYMOUS"}, 0, 0},
	} {
		d := startRun(t, append([]string{"-listen", "127.0.0.1:0", "-data", filepath.Join(t.TempDir(), "site")}, tc.args...)...)
		cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ct := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
		ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := cl.Request(ctx, ct)
		require.NoError(t, err)
		require.Equal(t, tc.code, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, "%v", tc.args)
		dc := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
		dc.Resources = []kmsg.DescribeConfigsRequestResource{rr}
		dresp, err := cl.Request(ctx, dc)
		cancel()
		cl.Close()
		require.NoError(t, err)
		require.Equal(t, tc.brokerDC, dresp.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode, "%v", tc.args)
		d.stop(t)
	}
}

// TestServerErrorLevels: a failing Accept (the site takes no new connection) is a
// warning an operator sees at the default level; what a client causes on its own
// connection stays at debug level, so a hostile client cannot flood the log.
func TestServerErrorLevels(t *testing.T) {
	var buf bytes.Buffer
	d := &daemon{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	d.serverError(fmt.Errorf("%w on 127.0.0.1:9092: too many open files", admin.ErrAccept))
	d.serverError(errors.New("admin: truncated request header from 127.0.0.1:5555"))
	out := buf.String()
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "too many open files")
	require.NotContains(t, out, "truncated request header")
}

// TestSecureDefault: a non-loopback listener needs authentication or
// -allow-anonymous; with -sasl-mechanisms it starts.
func TestSecureDefault(t *testing.T) {
	code, out := runOnce("-listen", "0.0.0.0:0", "-data", t.TempDir())
	require.Equal(t, exitUsage, code)
	require.Contains(t, out, "-allow-anonymous")
	d := startRun(t, "-listen", "0.0.0.0:0", "-advertise", "127.0.0.1:1", "-data", t.TempDir(), "-allow-anonymous")
	d.stop(t)
	d = startRun(t, "-listen", "0.0.0.0:0", "-advertise", "127.0.0.1:1", "-data", t.TempDir(), "-sasl-mechanisms", "SCRAM-SHA-512",
		"-add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]")
	d.stop(t)
}

// TestAddScramPersists: -add-scram stores the credential in the data
// directory (salted and hashed); a restart without it keeps it.
func TestAddScramPersists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	d := startRun(t, "-listen", "127.0.0.1:0", "-data", dir, "-sasl-mechanisms", "PLAIN",
		"-add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]")
	d.stop(t)
	data, err := os.ReadFile(filepath.Join(dir, "kmirror-scram-credentials.json"))
	require.NoError(t, err)
	require.Contains(t, string(data), "alice")
	require.NotContains(t, string(data), "alice-secret")
	d = startRun(t, "-listen", "127.0.0.1:0", "-data", dir, "-sasl-mechanisms", "PLAIN")
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	require.NoError(t, err)
	bad, err := kgo.NewClient(kgo.SeedBrokers(d.addr), kgo.RequestRetries(0), kgo.SASL(plain.Auth{User: "alice", Pass: "x"}.AsMechanism()))
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Request(ctx, kmsg.NewPtrMetadataRequest())
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
}
