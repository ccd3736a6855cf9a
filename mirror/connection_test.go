package mirror

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// countingMechanism is a host's own sasl.Mechanism: franz-go's SCRAM-SHA-256 under
// another type, counting the authentications it starts.
type countingMechanism struct {
	inner sasl.Mechanism
	auths atomic.Int64
}

func (m *countingMechanism) Name() string { return m.inner.Name() }

func (m *countingMechanism) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	m.auths.Add(1)
	return m.inner.Authenticate(ctx, host)
}

// countingDialer is a host's dialer counting the connections it opens.
type countingDialer struct {
	d     net.Dialer
	dials atomic.Int64
}

func (d *countingDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.dials.Add(1)
	return d.d.DialContext(ctx, network, host)
}

// saslCluster is a kfake cluster that accepts only SCRAM-SHA-256 admin/s3cret, with
// topic events holding n records.
func saslCluster(t *testing.T, n int) (*kfake.Cluster, sasl.Mechanism) {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("sasl-src"), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "s3cret"), kfake.SeedTopics(1, "events"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	mech := scram.Auth{User: "admin", Pass: "s3cret"}.AsSha256Mechanism()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.SASL(mech))
	require.NoError(t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: "events", Value: []byte(strings.Repeat("v", 100))})
	}
	require.NoError(t, cl.ProduceSync(testCtx(t), recs...).FirstErr())
	return kc, mech
}

// TestConnectionUsedByFetchAdminAndPeer proves that a Connection given in Go (a custom
// sasl.Mechanism and a counting dialer; the persisted configs say PLAINTEXT) is what the
// source fetch, the source admin and the peer each dial and authenticate with. kfake
// refuses every request before SASL, so success is proof too.
func TestConnectionUsedByFetchAdminAndPeer(t *testing.T) {
	ctx := testCtx(t)
	kc, inner := saslCluster(t, 5)
	mech := &countingMechanism{inner: inner}
	dialer := &countingDialer{}
	conns := func(name string, cfg MirrorConfig) (Connection, error) {
		require.Equal(t, "k", name)
		return Connection{Seeds: kc.ListenAddrs(), SASL: mech, Dialer: dialer.dial}, nil
	}
	cfg, err := ParseMirrorConfig(map[string]string{KeyBootstrapServers: "unused.invalid:9092"})
	require.NoError(t, err)

	// step runs one client's first request and checks that it dialed and authenticated.
	step := func(what string, fn func() error) {
		t.Helper()
		d0, a0 := dialer.dials.Load(), mech.auths.Load()
		require.NoError(t, fn(), what)
		require.Greater(t, dialer.dials.Load(), d0, "%s dialed through the host's dialer", what)
		require.Greater(t, mech.auths.Load(), a0, "%s authenticated with the host's mechanism", what)
	}
	src, sa, err := SourceFactoryFor(conns)("k", cfg)
	require.NoError(t, err)
	defer func() { _ = src.(*fetcher.KafkaSource).Close(); _ = sa.Close() }()
	require.Zero(t, dialer.dials.Load(), "clients connect lazily")
	step("source fetch", func() error {
		res, err := src.ListOffsets(ctx, []fetcher.OffsetQuery{{Topic: "events", Partition: 0, Timestamp: -1}})
		if err == nil && res[0].Offset != 5 {
			err = errors.New("wrong end offset")
		}
		return err
	})
	step("source admin", func() error {
		ts, err := sa.ListTopics(ctx)
		if err == nil && (len(ts) != 1 || ts[0].Name != "events") {
			err = errors.New("wrong topics")
		}
		return err
	})
	peer, err := PeerFactoryFor(conns)("k", cfg)
	require.NoError(t, err)
	defer func() { _ = peer.(*AdminPeer).Close() }()
	step("peer", func() error {
		got, err := peer.ListClusterMirrors(ctx, ListFilter{})
		if err == nil && got != nil {
			err = errors.New("kfake has no mirrors")
		}
		return err
	})
}

// TestWithConnectionsEndToEnd mirrors a SASL-only kfake source through the facade with
// WithConnections, and checks that CreateClusterMirror validates the connection.
func TestWithConnectionsEndToEnd(t *testing.T) {
	ctx := testCtx(t)
	kc, inner := saslCluster(t, 20)
	mech := &countingMechanism{inner: inner}
	dialer := &countingDialer{}
	conns := func(name string, cfg MirrorConfig) (Connection, error) {
		if name == "noseeds" {
			return Connection{SASL: mech}, nil
		}
		return Connection{Seeds: kc.ListenAddrs(), SASL: mech, Dialer: dialer.dial}, nil
	}
	dest := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	defer dest.Close()
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: 1}, WithConnections(conns))
	require.NoError(t, err)
	defer m.Close()

	err = m.CreateClusterMirror(ctx, "noseeds", map[string]string{KeyBootstrapServers: "a:1"})
	var ke *KeyError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, "Connection.Seeds", ke.Key)
	require.ErrorIs(t, err, ErrInvalidConfig, "mirror/adminhandler answers it with INVALID_CONFIG")
	_, known := m.ctrl.Mirror("noseeds")
	require.False(t, known, "refused before it is stored")

	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{KeyBootstrapServers: "unused.invalid:9092", KeyFetchWaitMaxMs: "50"}))
	mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"events"}, StartOptions{}))
	require.NoError(t, m.WaitForStates(ctx, "k", []string{"events"}, statemachine.Mirroring))
	waitCond(t, ctx, m, "caught up", func() bool {
		d := describeOn(t, m, "k", "events", 0)
		return d.SourceOffset == 20 && d.DestinationOffset == 20
	})
	require.Positive(t, dialer.dials.Load())
	require.Positive(t, mech.auths.Load())
}

// TestCreateValidatesPropertiesConnection: with the properties form, CreateClusterMirror
// refuses a connection that cannot be built, naming the key, and stores nothing.
func TestCreateValidatesPropertiesConnection(t *testing.T) {
	ctx := testCtx(t)
	dest := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	defer dest.Close()
	m, err := New(Config{Destination: dest, SyncInterval: -1})
	require.NoError(t, err)
	defer m.Close()
	for key, raw := range map[string]map[string]string{
		KeyBootstrapServers: {KeyBootstrapServers: ","},
		KeySSLCAFile:        {KeyBootstrapServers: "a:1", KeySecurityProtocol: "SASL_SSL", KeySASLUsername: "u", KeySASLPassword: "p", KeySSLCAFile: t.TempDir() + "/none.pem"},
		KeySASLUsername:     {KeyBootstrapServers: "a:1", KeySecurityProtocol: "SASL_PLAINTEXT"},
	} {
		err := m.CreateClusterMirror(ctx, "m", raw)
		var ke *KeyError
		require.ErrorAs(t, err, &ke, key)
		require.Equal(t, key, ke.Key)
		require.ErrorIs(t, err, ErrInvalidConfig, "mirror/adminhandler answers it with INVALID_CONFIG")
		_, known := m.ctrl.Mirror("m")
		require.False(t, known)
	}
}
