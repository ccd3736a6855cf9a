package kafkatest

import (
	"os"
	"strings"
	"testing"
)

// Cluster C is an older source: one Kafka 3.9 node with an authorizer, started by a
// separate invocation of the script (KMIRROR_KAFKA_CLUSTERS=c) beside A and B, with its own
// work directory, ports and env file (/tmp/kmirror-kafka-c/env by default).
const (
	// C is the one-node cluster of an older Kafka version (node id 1).
	C Cluster = "c"

	// EnvC holds cluster C's bootstrap address.
	EnvC = "KMIRROR_KAFKA_C"
	// EnvCVersion holds the Kafka version cluster C runs.
	EnvCVersion = "KMIRROR_KAFKA_C_VERSION"
	// EnvCWorkdir holds cluster C's work directory (its nodes' data and logs, its env file).
	EnvCWorkdir = "KMIRROR_KAFKA_C_WORKDIR"
	// EnvCScript holds the absolute path of the kafka.sh that started cluster C.
	EnvCScript = "KMIRROR_KAFKA_C_SCRIPT"
	// EnvRequireC, set to 1, turns a missing cluster C into a failure (with or without CI).
	EnvRequireC = "KMIRROR_REQUIRE_KAFKA_C"
)

// skipMessageC is the reason a test skips when cluster C is not running.
const skipMessageC = "Kafka cluster C not running: run KMIRROR_KAFKA_CLUSTERS=c scripts/kafka/kafka.sh start and source /tmp/kmirror-kafka-c/env"

// RequiredC reports whether a missing cluster C must fail rather than skip a test.
func RequiredC() bool { return os.Getenv(EnvRequireC) == "1" }

// ClusterC returns cluster C's bootstrap address (one broker). When EnvC is unset it skips
// the test, or fails it when [RequiredC] is true. Like [Brokers], the test holds the
// clusters' lock until it ends.
func ClusterC(t testing.TB) []string {
	t.Helper()
	addrs, err := Bootstrap(C)
	if err != nil {
		if RequiredC() {
			t.Fatalf("%s=1 requires Kafka cluster C: %v; %s", EnvRequireC, err, skipMessageC)
		}
		t.Skip(skipMessageC)
	}
	holdClusters(t)
	return addrs
}

// VersionC returns the Kafka version of cluster C from the environment, or "" when unset.
func VersionC() string { return strings.TrimSpace(os.Getenv(EnvCVersion)) }

// workdirC returns cluster C's work directory, skipping or failing the test when unset.
func workdirC(t testing.TB) string {
	t.Helper()
	d := strings.TrimSpace(os.Getenv(EnvCWorkdir))
	if d == "" {
		if RequiredC() {
			t.Fatalf("%s=1 requires Kafka cluster C: %s is not set; %s", EnvRequireC, EnvCWorkdir, skipMessageC)
		}
		t.Skip(skipMessageC)
	}
	return d
}
