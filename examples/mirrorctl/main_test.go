package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/adminhandler"
	"github.com/kmirror/kmirror/statemachine"
)

// env is a kfake source, a Mirror on a memory destination and an admin.Server
// serving it with adminhandler.New: what mirrorctl talks to.
type env struct {
	addr      string // the admin server
	bootstrap string // the kfake source
	m         *mirror.Mirror
	src       *kfake.Cluster
}

func newEnv(t *testing.T, opts ...mirror.Option) *env {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("ctl-source"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx := context.Background()
	for name, n := range map[string]int32{"orders": 2, "payments": 1, "paylog": 1} {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Zero(t, resp.Topics[0].ErrorCode)
		for p := range n {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: p, Value: []byte("hello")}).FirstErr())
		}
	}
	dest := mirror.NewMemoryDestination("ctl-destination", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { _ = dest.Close() })
	opts = append([]mirror.Option{mirror.WithPeerFactory(func(string, mirror.MirrorConfig) (mirror.Peer, error) { return nil, nil })}, opts...)
	m, err := mirror.New(mirror.Config{Destination: dest, SyncInterval: -1, FetchIdleWait: 10 * time.Millisecond}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	srv, err := admin.NewServer(admin.ServerConfig{Handler: adminhandler.New(m)})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, admin.ErrServerClosed)
	})
	return &env{addr: ln.Addr().String(), bootstrap: strings.Join(src.ListenAddrs(), ","), m: m, src: src}
}

// ctl runs mirrorctl against the env's server.
func (e *env) ctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"--bootstrap-server", e.addr, "--timeout", "20s"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"--bootstrap-server", "x:1"}, "one action is required"},
		{[]string{"--bootstrap-server", "x:1", "--list", "--describe"}, "only one action"},
		{[]string{"--list"}, "--bootstrap-server is required"},
		{[]string{"--bootstrap-server", "x:1", "--start", "--mirror", "m"}, "--start requires --topics"},
		{[]string{"--bootstrap-server", "x:1", "--pause", "--topics", "a"}, "--pause requires --mirror"},
		{[]string{"--bootstrap-server", "x:1", "--create", "--mirror", "m"}, "--create requires --mirror-config"},
		{[]string{"--bootstrap-server", "x:1", "--stop", "--mirror", "m", "--topics", "a", "--exclude", "b"}, "--exclude is only valid with --start"},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--state", "PAUSED"}, "only valid with --list"},
		{[]string{"--bootstrap-server", "x:1", "--list", "--state", "PREPARING"}, "--state must be"},
		{[]string{"--bootstrap-server", "x:1", "--list", "--output", "yaml"}, "--output must be"},
		{[]string{"--bootstrap-server", "x:1", "--start", "--mirror", "m", "--topics", "a("}, "invalid topic pattern"},
		{[]string{"--bootstrap-server", "x:1", "--list", "extra"}, "unexpected argument"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"--bootstrap-server", "x:1", "--list", "--wait"}, "--wait is only valid with --stop, --pause or --resume"},
		{[]string{"--bootstrap-server", "x:1", "--add-acl", "--principal", "User:a", "--operation", "Describe"}, "--add-acl requires --mirror"},
		{[]string{"--bootstrap-server", "x:1", "--add-acl", "--mirror", "m", "--principal", "alice", "--operation", "Describe"}, "--principal must be TYPE:NAME"},
		{[]string{"--bootstrap-server", "x:1", "--remove-acl", "--mirror", "m", "--principal", "User:a"}, "--remove-acl requires --operation"},
		{[]string{"--bootstrap-server", "x:1", "--add-acl", "--mirror", "m", "--principal", "User:a", "--operation", "Fly"}, `unknown operation "Fly"`},
		{[]string{"--bootstrap-server", "x:1", "--add-acl", "--mirror", "m", "--principal", "User:a", "--operation", "Any"}, `unknown operation "Any"`},
		{[]string{"--bootstrap-server", "x:1", "--add-acl", "--mirror", "m", "--principal", "User:a", "--operation", "Read", "--host", " "}, "--host must not be empty"},
		{[]string{"--bootstrap-server", "x:1", "--list", "--principal", "User:a"}, "only valid with --add-acl or --remove-acl"},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--deny"}, "only valid with --add-acl or --remove-acl"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		require.Equal(t, exitUsage, run(c.args, &out, &errOut), "%v", c.args)
		require.Contains(t, errOut.String(), c.msg, "%v", c.args)
		require.Empty(t, out.String())
	}
	for _, help := range []string{"--help", "-help", "-h"} {
		var out, errOut bytes.Buffer
		require.Equal(t, exitOK, run([]string{help}, &out, &errOut))
		require.Contains(t, out.String(), "-bootstrap-server", "usage on stdout")
		require.Contains(t, out.String(), "--wait")
		require.Contains(t, out.String(), "-command-config")
		require.Empty(t, errOut.String())
	}
	var out, errOut bytes.Buffer
	require.Equal(t, exitUsage, run([]string{"--no-such-flag"}, &out, &errOut))
	require.Contains(t, errOut.String(), "-bootstrap-server", "usage after a mistake goes to stderr")
	require.Empty(t, out.String())
}

func TestUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	var out, errOut bytes.Buffer
	require.Equal(t, exitError, run([]string{"--bootstrap-server", addr, "--list", "--timeout", "1s"}, &out, &errOut))
	require.True(t, strings.HasPrefix(errOut.String(), "Error: "), errOut.String())
}

func TestMirrorctlLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := filepath.Join(t.TempDir(), "mirror.properties")
	require.NoError(t, os.WriteFile(cfg, []byte("# source\nbootstrap.servers="+e.bootstrap+"\nfetch.wait.max.ms: 50\n"), 0o600))

	code, out, errOut := e.ctl(t, "--create", "--mirror", "m1", "--mirror-config", cfg)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "Created cluster mirror \"m1\".\n", out)
	code, _, errOut = e.ctl(t, "--create", "--mirror", "m1", "--mirror-config", cfg)
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "Error: CLUSTER_MIRROR_ALREADY_EXISTS: ")
	code, _, errOut = e.ctl(t, "--create", "--mirror", "m2", "--mirror-config", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "no such file")

	// Start: one good topic, one unknown on the source (exit 1, but the good one starts).
	code, out, errOut = e.ctl(t, "--start", "--mirror", "m1", "--topics", "orders,nope")
	require.Equal(t, exitError, code)
	require.Contains(t, out, `Started mirroring topic "orders" of mirror "m1".`)
	require.Contains(t, errOut, `Error: topic "nope": UNKNOWN_TOPIC_OR_PARTITION`)
	code, out, errOut = e.ctl(t, "--start", "--mirror", "m1", "--topics", "pay.*", "--exclude", "paylog", "--output", "json")
	require.Equal(t, exitOK, code, errOut)
	var op opResult
	require.NoError(t, json.Unmarshal([]byte(out), &op))
	require.Equal(t, "start", op.Operation)
	require.Equal(t, []string{"pay.*"}, op.Patterns)
	require.Len(t, op.Topics, 1)
	require.Equal(t, "payments", op.Topics[0].Topic)
	require.Zero(t, op.Topics[0].ErrorCode)
	// A real start reports the plan it carried out: the topic it created, one empty
	// partition from UNKNOWN to MIRRORING, nothing removed.
	require.Len(t, op.Topics[0].Plan, 1)
	require.Equal(t, "UNKNOWN", op.Topics[0].Plan[0].StateNow)
	require.Equal(t, "MIRRORING", op.Topics[0].Plan[0].StateAfter)
	require.Zero(t, op.Topics[0].Plan[0].Removed.Records)
	require.NoError(t, e.m.WaitForStates(ctx, "m1", []string{"orders", "payments"}, statemachine.Mirroring))

	// List: table and JSON.
	code, out, errOut = e.ctl(t, "--list")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^MIRROR\s+TOPICS\s+SOURCE-CLUSTER-ID\s+SOURCE-BOOTSTRAP-SERVER$`, lines[0])
	require.Regexp(t, `^m1\s+2\s+\S+\s+`+e.bootstrap+`$`, lines[1])
	require.Equal(t, strings.Index(lines[0], "TOPICS"), strings.Index(lines[1], "2"), "columns are aligned")
	code, out, _ = e.ctl(t, "--list", "--output", "json")
	require.Equal(t, exitOK, code)
	var ls []listEntry
	require.NoError(t, json.Unmarshal([]byte(out), &ls))
	require.Len(t, ls, 1)
	require.Equal(t, []string{"orders", "payments"}, ls[0].Topics)
	require.Equal(t, int32(2), ls[0].TopicCount)
	code, out, _ = e.ctl(t, "--list", "--state", "paused")
	require.Equal(t, exitOK, code)
	require.Regexp(t, `(?m)^m1\s+0\s+`, out)
	code, out, _ = e.ctl(t, "--list", "--source-cluster-id", "someone-else")
	require.Equal(t, exitOK, code)
	require.Equal(t, 1, strings.Count(out, "\n"), "header only: %q", out)

	// Describe once the destination has caught up.
	waitDescribe(t, e, func(ds []mirrorDesc) bool {
		for _, p := range ds[0].Partitions {
			if p.DestinationOffset != 1 || p.Lag != 0 {
				return false
			}
		}
		return len(ds[0].Partitions) == 3
	})
	code, out, errOut = e.ctl(t, "--describe", "--mirror", "m1")
	require.Equal(t, exitOK, code, errOut)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	require.Regexp(t, `^MIRROR\s+TOPIC\s+PARTITION\s+SOURCE-OFFSET\s+DESTINATION-OFFSET\s+LAG\s+TIME-LAG\s+STATE\s+LME\s+VERIFIED\s+ERROR$`, lines[0])
	require.Regexp(t, `^m1\s+orders\s+0\s+1\s+1\s+0\s+0s\s+MIRRORING\s+-\s+(-|1)\s+-$`, lines[1])
	require.Regexp(t, `^m1\s+orders\s+1\s+1\s+1\s+0\s+0s\s+MIRRORING\s+-\s+(-|1)\s+-$`, lines[2])
	require.Regexp(t, `^m1\s+payments\s+0\s+1\s+1\s+0\s+0s\s+MIRRORING\s+-\s+(-|1)\s+-$`, lines[3])
	code, out, _ = e.ctl(t, "--describe", "--topics", "pay.*", "--output", "json")
	require.Equal(t, exitOK, code)
	var ds []mirrorDesc
	require.NoError(t, json.Unmarshal([]byte(out), &ds))
	require.Len(t, ds, 1)
	require.Len(t, ds[0].Partitions, 1)
	_, err := time.Parse(time.RFC3339Nano, ds[0].Partitions[0].LastFetch)
	require.NoError(t, err, "lastFetch is a time")
	_, err = time.Parse(time.RFC3339Nano, ds[0].Partitions[0].SourceOffsetTime)
	require.NoError(t, err, "sourceOffsetTime is a time")
	ds[0].Partitions[0].LastFetch, ds[0].Partitions[0].SourceOffsetTime = "", ""
	ds[0].Partitions[0].VerifiedOffset, ds[0].Partitions[0].Verified = -1, "" // the check's timing is its own test's
	require.Equal(t, []partitionDesc{{Topic: "payments", Partition: 0, State: "MIRRORING", SourceOffset: 1,
		DestinationOffset: 1, Lag: 0, LastMirrorEpoch: -1, LastMirrorOffset: -1, VerifiedOffset: -1}}, ds[0].Partitions)
	code, out, _ = e.ctl(t, "--describe", "--failed")
	require.Equal(t, exitOK, code)
	require.Equal(t, "Mirror \"m1\" has no failed partitions.\n", out)
	code, _, errOut = e.ctl(t, "--describe", "--mirror", "ghost")
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, `Error: mirror "ghost": UNKNOWN_CLUSTER_MIRROR`)

	// Pause by regex, pause again (a note, exit 0), resume by name.
	code, out, errOut = e.ctl(t, "--pause", "--mirror", "m1", "--topics", "ord.*")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "Pausing mirroring topic \"orders\" of mirror \"m1\".\n", out)
	require.NoError(t, e.m.WaitForStates(ctx, "m1", []string{"orders"}, statemachine.Paused))
	code, out, errOut = e.ctl(t, "--pause", "--mirror", "m1", "--topics", "orders")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "Topic \"orders\" of mirror \"m1\" is already paused.\n", out)
	code, _, errOut = e.ctl(t, "--pause", "--mirror", "m1", "--topics", "zzz.*")
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "no topic of mirror \"m1\" matches")
	code, _, errOut = e.ctl(t, "--resume", "--mirror", "m1", "--topics", "orders")
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, e.m.WaitForStates(ctx, "m1", []string{"orders"}, statemachine.Mirroring))

	// Delete is refused while topics mirror; stop everything, then delete.
	code, _, errOut = e.ctl(t, "--delete", "--mirror", "m1")
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "Error: INVALID_CLUSTER_MIRROR_STATES")
	code, out, errOut = e.ctl(t, "--stop", "--mirror", "m1", "--topics", ".*")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `Stopping mirroring topic "orders" of mirror "m1".`)
	require.Contains(t, out, `Stopping mirroring topic "payments" of mirror "m1".`)
	require.NoError(t, e.m.WaitForStates(ctx, "m1", []string{"orders", "payments"}, statemachine.Stopped))
	code, out, errOut = e.ctl(t, "--delete", "--mirror", "m1")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "Deleted cluster mirror \"m1\".\n", out)
	code, out, _ = e.ctl(t, "--describe")
	require.Equal(t, exitOK, code)
	require.Equal(t, "No cluster mirrors.\n", out)
	code, _, errOut = e.ctl(t, "--stop", "--mirror", "m1", "--topics", "orders")
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "UNKNOWN_CLUSTER_MIRROR")
}

// waitDescribe polls --describe --output json until ok holds.
func waitDescribe(t *testing.T, e *env, ok func([]mirrorDesc) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		code, out, errOut := e.ctl(t, "--describe", "--output", "json")
		require.Equal(t, exitOK, code, errOut)
		var ds []mirrorDesc
		require.NoError(t, json.Unmarshal([]byte(out), &ds))
		if len(ds) > 0 && ok(ds) {
			return
		}
		require.True(t, time.Now().Before(deadline), "condition not reached; last describe:\n%s", out)
		<-tick.C
	}
}
