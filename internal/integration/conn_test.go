package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkatest"
	kmirror "github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/metasync"
)

// saslSSLListener returns cluster B's SASL_SSL address, CA file, user and password, or
// skips when the harness has no such listener.
func saslSSLListener(t *testing.T) (addr, caFile, user, password string) {
	t.Helper()
	kafkatest.RequireCI(t)
	kafkatest.ClusterB(t)
	addr, caFile, user, password = os.Getenv(envSASLSSL), os.Getenv(envCA), os.Getenv(envUser), os.Getenv(envPassword)
	if addr == "" || caFile == "" || user == "" {
		if kafkatest.Required() {
			t.Fatalf("%s, %s and %s must be set by kafka.sh start", envSASLSSL, envCA, envUser)
		}
		t.Skipf("cluster B has no SASL_SSL listener (%s unset): re-run scripts/kafka/kafka.sh start", envSASLSSL)
	}
	return addr, caFile, user, password
}

// TestConnSASLSSLProperties mirrors from cluster B's SASL_SSL listener (SCRAM-SHA-512 over
// TLS with the harness's self-signed CA) with the connection in the properties form a
// MirrorMaker 2 file holds: ssl.truststore.type=PEM, ssl.truststore.location and
// sasl.jaas.config. The fetch (byte for byte), the source admin (group offsets, a topic
// config) and the peer (PREPARING's LME lookup) all go over it. Then: an inline
// ssl.truststore.certificates works as well, a wrong password is refused by the broker
// (SASL_AUTHENTICATION_FAILED), and a JKS trust store is refused at CreateClusterMirror.
func TestConnSASLSSLProperties(t *testing.T) {
	addr, caFile, user, password := saslSSLListener(t)
	plainB := kafkatest.ClusterB(t)
	cl := kafkatest.NewClient(t, plainB)
	topic := kafkatest.TopicName(t)
	group := topic + "-group"
	kafkatest.CreateTopic(t, cl, topic, 2, 1, nil)
	pc := kafkatest.NewClient(t, plainB, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	for p := int32(0); p < 2; p++ {
		produce(t, pc, topic, p, "sasl", 50, 10)
	}
	jaas := fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, user, password)
	secure := map[string]string{
		kmirror.KeySecurityProtocol: "SASL_SSL", kmirror.KeySASLMechanism: "SCRAM-SHA-512", kmirror.KeySASLJAASConfig: jaas,
		kmirror.KeySSLTruststoreType: "PEM", kmirror.KeySSLCAFile: caFile,
		kmirror.KeyTopicsInclude: topic, kmirror.KeyGroupsInclude: group,
	}
	start := time.Now()
	f := startFacade(t, []string{addr}, "over-sasl-ssl", 300*time.Millisecond, secure)
	f.start(t, topic)
	for p := int32(0); p < 2; p++ {
		hw := f.waitCaughtUp(t, cl, topic, p)
		require.EqualValues(t, 50, hw)
		l, err := f.dest.Log(topic, p)
		require.NoError(t, err)
		requireSameBatches(t, fmt.Sprintf("%s-%d", topic, p), readSource(t, cl, topic, p).Batches, readLog(t, l))
	}
	t.Logf("mirrored 2x50 records over SASL_SSL %s in %v", addr, time.Since(start))
	// commitSourceOffsets's OffsetCommit names topics; Kafka 4.4 wants ids from v10 on.
	commitSourceOffsets(t, kafkatest.NewClient(t, plainB, kgo.MaxVersions(kversion.V3_9_0())), group, topic, map[int32]int64{0: 7, 1: 21})
	alterSourceTopicConfig(t, cl, topic, "retention.ms", "86400000")
	want := map[kmirror.TopicPartition]int64{{Topic: topic, Partition: 0}: 7, {Topic: topic, Partition: 1}: 21}
	waitFor(t, waitTimeout, "group offsets and the topic config to sync over SASL_SSL", func() (bool, string) {
		got := f.dest.CommittedOffsets(group)
		spec, _ := f.dest.Topic(topic)
		return equalOffsets(got, want) && spec.Configs["retention.ms"] == "86400000",
			fmt.Sprintf("offsets %v, retention.ms %q", got, spec.Configs["retention.ms"])
	})

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	pemBytes, err := os.ReadFile(caFile)
	require.NoError(t, err)
	mc := parseConn(t, addr, secure, kmirror.KeySSLCAFile, "", kmirror.KeySSLTruststoreCerts, string(pemBytes))
	sa, err := metasync.NewKafkaSourceAdmin(mc)
	require.NoError(t, err)
	id, err := sa.ClusterID(ctx)
	require.NoError(t, err, "inline ssl.truststore.certificates")
	require.NotEmpty(t, id)
	require.NoError(t, sa.Close())

	bad := parseConn(t, addr, secure, kmirror.KeySASLJAASConfig, "", kmirror.KeySASLUsername, user, kmirror.KeySASLPassword, password+"-wrong")
	sa, err = metasync.NewKafkaSourceAdmin(bad)
	require.NoError(t, err)
	_, err = sa.ClusterID(ctx)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	require.NoError(t, sa.Close())

	m, err := kmirror.New(kmirror.Config{Destination: kmirror.NewMemoryDestination("jks", fetcher.MemoryLogOptions{}), SyncInterval: -1})
	require.NoError(t, err)
	defer m.Close()
	jks := map[string]string{kmirror.KeyBootstrapServers: addr}
	for k, v := range secure {
		jks[k] = v
	}
	jks[kmirror.KeySSLTruststoreType] = "JKS"
	err = m.CreateClusterMirror(ctx, "jks", jks)
	var ke *kmirror.KeyError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, kmirror.KeySSLTruststoreType, ke.Key)
	require.ErrorIs(t, err, kmirror.ErrUnsupportedStoreType)
}

// parseConn parses the configs of base with bootstrap.servers=addr and the key/value
// pairs kv applied (an empty value removes the key).
func parseConn(t *testing.T, addr string, base map[string]string, kv ...string) kmirror.MirrorConfig {
	t.Helper()
	raw := map[string]string{kmirror.KeyBootstrapServers: addr, kmirror.KeySocketTimeoutMs: "5000"}
	for k, v := range base {
		raw[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(raw, kv[i])
		} else {
			raw[kv[i]] = kv[i+1]
		}
	}
	mc, err := kmirror.ParseMirrorConfig(raw)
	require.NoError(t, err)
	return mc
}
