package integration

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/internal/kafkatest"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// Variables kafka.sh writes for cluster B's SASL_SSL listener.
const (
	envSASLSSL  = "KMIRROR_KAFKA_B_SASL_SSL"
	envCA       = "KMIRROR_KAFKA_B_CA"
	envUser     = "KMIRROR_KAFKA_B_USER"
	envPassword = "KMIRROR_KAFKA_B_PASSWORD"
)

// stateTopic returns a state topic name and transactional id prefix unique to this run, so
// that reruns and other tests do not share owners.
func stateTopic(t testing.TB) (topic, prefix string) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	return "kt-mirror-state-" + name + "-" + suffix, "kmirror-it-" + name + "-" + suffix
}

// newStore opens a KafkaStore on cfg and waits until the state topic's partitions have
// leaders (NewKafkaStore returns right after CreateTopics).
func newStore(t testing.TB, cfg coordinator.KafkaConfig, leaders func()) *coordinator.KafkaStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := coordinator.NewKafkaStore(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	leaders()
	return s
}

// newRuntime starts a Runtime over store, owning partition with ownerEpoch, loaded.
func newRuntime(t testing.TB, store coordinator.Store, parts int32, partition, ownerEpoch int32) *coordinator.Runtime {
	t.Helper()
	rt, err := coordinator.New(coordinator.Config{NumPartitions: parts}, store)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	require.NoError(t, rt.Load(partition, ownerEpoch))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, rt.WaitLoaded(ctx, partition))
	return rt
}

// write sends one single-partition WriteMirrorStates and returns its result.
func write(t testing.TB, rt *coordinator.Runtime, mirror string, p coordinator.WritePartition) coordinator.WritePartitionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := rt.WriteMirrorStates(ctx, coordinator.WriteRequest{MirrorName: mirror, Partitions: []coordinator.WritePartition{p}})
	require.NoError(t, err)
	require.Len(t, resp.Partitions, 1)
	return resp.Partitions[0]
}

// loadRecords claims partition with ownerEpoch in store and returns its committed records.
func loadRecords(t testing.TB, store coordinator.Store, partition, ownerEpoch int32) []records.StateRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var out []records.StateRecord
	require.NoError(t, store.Load(ctx, partition, ownerEpoch, func(r records.StateRecord) error {
		out = append(out, r)
		return nil
	}))
	return out
}

var topicX = records.UUID{0x6b, 0x6d, 0x69, 0x72, 0x72, 0x6f, 0x72, 1, 2, 3, 4, 5, 6, 7, 8, 9}

// TestCoordinatorZombieFenced runs two coordinator runtimes, each over its own KafkaStore (its
// own sarama clients, as two processes would), on the same state partition of cluster B: the
// owner with epoch 2 loads after the owner with epoch 1 has written, which bumps the
// transactional producer epoch on Kafka's transaction coordinator. From then on every write of
// the old owner fails — through the runtime (NOT_COORDINATOR) and through the store
// (coordinator.ErrFenced) — and none of its records appears when a third owner reloads the
// partition, while the new owner's writes do.
func TestCoordinatorZombieFenced(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterB(t)
	topic, prefix := stateTopic(t)
	const parts = 3
	cfg := coordinator.KafkaConfig{Brokers: brokers, Topic: topic, NumPartitions: parts, ReplicationFactor: 1,
		TransactionalIDPrefix: prefix, Timeout: 30 * time.Second}
	waitLeaders := func() { kafkatest.WaitForLeaders(t, kafkatest.NewClient(t, brokers), topic) }
	const mirror = "zombie"
	key := func(st statemachine.State, stateEpoch int32) coordinator.WritePartition {
		return coordinator.WritePartition{TopicID: topicX, Partition: 0, State: st, LeaderEpoch: 7, StateEpoch: stateEpoch,
			LastMirrorEpoch: -1, LastMirrorOffset: -1}
	}

	store1 := newStore(t, cfg, waitLeaders)
	probe, err := coordinator.New(coordinator.Config{NumPartitions: parts}, store1)
	require.NoError(t, err)
	p := probe.PartitionFor(mirror, topicX, 0)
	require.NoError(t, probe.Close())

	old := newRuntime(t, store1, parts, p, 1)
	r := write(t, old, mirror, key(statemachine.Preparing, 0))
	require.Zero(t, r.ErrorCode, r.ErrorMessage)

	store2 := newStore(t, cfg, func() {})
	cur := newRuntime(t, store2, parts, p, 2)

	// The zombie still believes it owns p: its append reaches Kafka and is refused there (the
	// transactional producer epoch is stale), ...
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	direct := records.StateRecord{
		LastMirrorEpochsKey: &records.LastMirrorEpochsKey{MirrorName: mirror, TopicID: topicX, Partition: 0},
		LastMirrorEpochs:    &records.LastMirrorEpochsValue{LastMirrorEpoch: 5, LastMirrorOffset: 777},
	}
	err = store1.Append(ctx, p, 1, []records.StateRecord{direct})
	require.ErrorIs(t, err, coordinator.ErrFenced)
	var fe *coordinator.FencedError
	require.True(t, errors.As(err, &fe))
	require.Error(t, fe.Cause, "the fence must come from Kafka, not from the store's memory")
	// ... and its runtime's next write fails as well.
	zombie := key(statemachine.Failed, 1)
	zombie.ErrorMessage = new(string)
	*zombie.ErrorMessage = "written by the fenced owner"
	zombie.LastMirrorEpoch, zombie.LastMirrorOffset = 5, 666
	r = write(t, old, mirror, zombie)
	require.Equal(t, admin.CodeNotCoordinator, r.ErrorCode, "the fenced owner's write must fail: %+v", r)
	t.Logf("fenced owner: store error %v; runtime answer %v", err, r.ErrorCode)

	// The new owner saw the old owner's committed write and goes on from it.
	r = write(t, cur, mirror, key(statemachine.Mirroring, 1))
	require.Zero(t, r.ErrorCode, r.ErrorMessage)
	require.EqualValues(t, 2, r.StateEpoch)
	require.NoError(t, cur.Close())

	// A third owner replays only committed records: the new owner's, none of the zombie's.
	store3 := newStore(t, cfg, func() {})
	recs := loadRecords(t, store3, p, 3)
	var states []int8
	for _, rec := range recs {
		if rec.PartitionState != nil {
			states = append(states, rec.PartitionState.State)
			require.Nil(t, rec.PartitionState.ErrorMessage, "a zombie state record was committed")
		}
		require.Nil(t, rec.LastMirrorEpochs, "a zombie LME record was committed: %+v", rec.LastMirrorEpochs)
	}
	require.Equal(t, []int8{int8(statemachine.Preparing), int8(statemachine.Mirroring)}, states)
}

// TestStateStoreTLSSASL runs the coordinator's KafkaStore over cluster B's SASL_SSL listener
// (TLS with the script's self-signed CA, SCRAM-SHA-512), configured through
// coordinator.KafkaConfig.Configure: a runtime writes, a second owner reloads what it wrote.
// A wrong password and a client that does not trust the CA are refused.
func TestStateStoreTLSSASL(t *testing.T) {
	kafkatest.RequireCI(t)
	kafkatest.ClusterB(t)
	addr, caFile, user, password := os.Getenv(envSASLSSL), os.Getenv(envCA), os.Getenv(envUser), os.Getenv(envPassword)
	if addr == "" || caFile == "" || user == "" {
		if kafkatest.Required() {
			t.Fatalf("%s, %s and %s must be set by kafka.sh start", envSASLSSL, envCA, envUser)
		}
		t.Skipf("cluster B has no SASL_SSL listener (%s unset): re-run scripts/kafka/kafka.sh start", envSASLSSL)
	}
	pem, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem), "no certificate in %s", caFile)

	secure := func(roots *x509.CertPool, pass string) func(*sarama.Config) {
		return func(c *sarama.Config) {
			c.Net.TLS.Enable = true
			c.Net.TLS.Config = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
			c.Net.SASL.Enable = true
			c.Net.SASL.Handshake = true
			c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			c.Net.SASL.User = user
			c.Net.SASL.Password = pass
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{} }
		}
	}
	topic, prefix := stateTopic(t)
	const parts = 2
	cfg := coordinator.KafkaConfig{Brokers: []string{addr}, Topic: topic, NumPartitions: parts, ReplicationFactor: 1,
		TransactionalIDPrefix: prefix, Timeout: 30 * time.Second, Configure: secure(pool, password)}
	// The PLAINTEXT listener only checks that the topic's partitions have leaders.
	waitLeaders := func() { kafkatest.WaitForLeaders(t, kafkatest.NewClient(t, kafkatest.ClusterB(t)), topic) }

	start := time.Now()
	store1 := newStore(t, cfg, waitLeaders)
	const mirror = "secure"
	rt1, err := coordinator.New(coordinator.Config{NumPartitions: parts}, store1)
	require.NoError(t, err)
	p := rt1.PartitionFor(mirror, topicX, 3)
	require.NoError(t, rt1.Close())
	rt1 = newRuntime(t, store1, parts, p, 1)
	w := coordinator.WritePartition{TopicID: topicX, Partition: 3, State: statemachine.Preparing, LeaderEpoch: 4, StateEpoch: 0,
		LastMirrorEpoch: 3, LastMirrorOffset: 1234}
	r := write(t, rt1, mirror, w)
	require.Zero(t, r.ErrorCode, r.ErrorMessage)
	require.NoError(t, rt1.Close())

	store2 := newStore(t, cfg, func() {})
	rt2 := newRuntime(t, store2, parts, p, 2)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := rt2.ReadMirrorStates(ctx, coordinator.ReadRequest{MirrorName: mirror,
		Partitions: []coordinator.ReadPartition{{TopicID: topicX, Partition: 3, LeaderEpoch: -1}}})
	require.NoError(t, err)
	got := resp.Partitions[0]
	require.Zero(t, got.ErrorCode)
	require.Equal(t, statemachine.Preparing, got.State)
	require.EqualValues(t, 4, got.LeaderEpoch)
	require.EqualValues(t, 1, got.StateEpoch)
	require.EqualValues(t, 3, got.LastMirrorEpoch)
	require.EqualValues(t, 1234, got.LastMirrorOffset)
	t.Logf("state written and reloaded over SASL_SSL %s as %q in %v", addr, user, time.Since(start))

	for name, bad := range map[string]func(*sarama.Config){
		"wrong password": secure(pool, password+"-wrong"),
		"untrusted CA":   secure(x509.NewCertPool(), password),
	} {
		c := cfg
		c.Configure = func(sc *sarama.Config) {
			bad(sc)
			sc.Metadata.Retry.Max = 0
		}
		_, err := coordinator.NewKafkaStore(ctx, c)
		require.Error(t, err, name)
		t.Logf("%s: %v", name, err)
	}
}

// scramClient adapts franz-go's SCRAM-SHA-512 implementation to sarama.SCRAMClient.
type scramClient struct {
	session sasl.Session
	first   []byte
	started bool
	done    bool
}

// Begin implements sarama.SCRAMClient.
func (c *scramClient) Begin(user, password, authzID string) error {
	mech := scram.Auth{User: user, Pass: password, Zid: authzID}.AsSha512Mechanism()
	s, first, err := mech.Authenticate(context.Background(), "")
	if err != nil {
		return err
	}
	c.session, c.first = s, first
	return nil
}

// Step implements sarama.SCRAMClient: the first call returns the client-first message, later
// calls answer the server's challenges.
func (c *scramClient) Step(challenge string) (string, error) {
	if !c.started {
		c.started = true
		return string(c.first), nil
	}
	done, resp, err := c.session.Challenge([]byte(challenge))
	if err != nil {
		return "", err
	}
	c.done = done
	return string(resp), nil
}

// Done implements sarama.SCRAMClient.
func (c *scramClient) Done() bool { return c.done }
