package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment variables written to <workdir>/env by scripts/kafka/kafka.sh start.
const (
	// EnvA holds cluster A's bootstrap addresses, comma-separated.
	EnvA = "KMIRROR_KAFKA_A"
	// EnvB holds cluster B's bootstrap address.
	EnvB = "KMIRROR_KAFKA_B"
	// EnvClasspath holds the Java classpath of the installed Kafka jars.
	EnvClasspath = "KMIRROR_KAFKA_CLASSPATH"
	// EnvWorkdir holds the directory with the nodes' data, logs and the env file.
	EnvWorkdir = "KMIRROR_KAFKA_WORKDIR"
	// EnvScript holds the absolute path of kafka.sh.
	EnvScript = "KMIRROR_KAFKA_SCRIPT"
	// EnvDumpLogClass holds the main class of Kafka's DumpLogSegments tool.
	EnvDumpLogClass = "KMIRROR_KAFKA_DUMP_LOG_CLASS"
	// EnvVersion holds the Kafka version the script installed.
	EnvVersion = "KMIRROR_KAFKA_VERSION"
	// EnvRequire, set to 1 together with CI=true, turns a missing cluster into a failure.
	EnvRequire = "KMIRROR_REQUIRE_KAFKA"
)

// DefaultDumpLogClass is DumpLogSegments' main class in Kafka 4.1 and later; 4.0 has
// kafka.tools.DumpLogSegments. The script records the right one in EnvDumpLogClass.
const DefaultDumpLogClass = "org.apache.kafka.tools.DumpLogSegments"

// skipMessage is the reason a test skips when the clusters are not running.
const skipMessage = "real Kafka not running: run scripts/kafka/kafka.sh start and source <workdir>/env"

// scriptTimeout bounds one run of kafka.sh stop-node/start-node or of DumpLogSegments.
const scriptTimeout = 3 * time.Minute

// ErrNotRunning is returned by [Bootstrap] when a cluster's variable is not set.
var ErrNotRunning = errors.New("kafkatest: real Kafka not running")

// Cluster names one of the script's clusters.
type Cluster string

const (
	// A is the three-node cluster (node ids 1, 2, 3).
	A Cluster = "a"
	// B is the one-node cluster (node id 1).
	B Cluster = "b"
)

func (c Cluster) envVar() string {
	switch c {
	case B:
		return EnvB
	case C:
		return EnvC
	}
	return EnvA
}

// String returns "A", "B" or "C".
func (c Cluster) String() string { return strings.ToUpper(string(c)) }

// Required reports whether a missing cluster must fail rather than skip a test: CI=true and
// KMIRROR_REQUIRE_KAFKA=1.
func Required() bool {
	return os.Getenv("CI") == "true" && os.Getenv(EnvRequire) == "1"
}

// Bootstrap returns a cluster's bootstrap addresses from the environment, or ErrNotRunning.
func Bootstrap(c Cluster) ([]string, error) {
	v := strings.TrimSpace(os.Getenv(c.envVar()))
	if v == "" {
		return nil, fmt.Errorf("%w: %s is not set", ErrNotRunning, c.envVar())
	}
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s is empty", ErrNotRunning, c.envVar())
	}
	return out, nil
}

// Brokers returns cluster c's bootstrap addresses. When the environment is missing it skips
// the test, or fails it when [Required] is true ([RequiredC] for cluster C). The test holds the clusters exclusively
// until it ends (see holdClusters), so tests of different packages never disturb each other.
func Brokers(t testing.TB, c Cluster) []string {
	t.Helper()
	if c == C {
		return ClusterC(t)
	}
	addrs, err := Bootstrap(c)
	if err != nil {
		missing(t, err)
	}
	holdClusters(t)
	return addrs
}

// ClusterA returns cluster A's bootstrap addresses (three brokers), skipping or failing the
// test as [Brokers] does.
func ClusterA(t testing.TB) []string {
	t.Helper()
	return Brokers(t, A)
}

// ClusterB returns cluster B's bootstrap address (one broker), skipping or failing the test as
// [Brokers] does.
func ClusterB(t testing.TB) []string {
	t.Helper()
	return Brokers(t, B)
}

// RequireCI fails the test when [Required] is true and any variable the harness needs is
// missing. Outside such a CI run it does nothing; tests still skip through [Brokers].
func RequireCI(t testing.TB) {
	t.Helper()
	if !Required() {
		return
	}
	for _, v := range []string{EnvA, EnvB, EnvClasspath, EnvWorkdir} {
		if strings.TrimSpace(os.Getenv(v)) == "" {
			t.Fatalf("CI requires real Kafka (%s=1) but %s is not set: %s", EnvRequire, v, skipMessage)
		}
	}
}

func missing(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("CI requires real Kafka (%s=1): %v; %s", EnvRequire, err, skipMessage)
	}
	t.Skip(skipMessage)
}

// Workdir returns the script's work directory, skipping or failing the test when unset.
func Workdir(t testing.TB) string {
	t.Helper()
	d := os.Getenv(EnvWorkdir)
	if d == "" {
		missing(t, fmt.Errorf("%w: %s is not set", ErrNotRunning, EnvWorkdir))
	}
	return d
}

// Script returns the path of kafka.sh: EnvScript, or the copy next to this package's source.
func Script(t testing.TB) string {
	t.Helper()
	if s := os.Getenv(EnvScript); s != "" {
		return s
	}
	return sourceScript(t)
}

// sourceScript returns the kafka.sh of the checkout this package's source is in.
func sourceScript(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatalf("kafkatest: cannot locate kafka.sh: set %s", EnvScript)
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kafka", "kafka.sh")
}

// StopBroker stops node nodeID of cluster c (SIGTERM, so the broker shuts down in a controlled
// way) and keeps its data. A cleanup started by this call starts the node again at the end of
// the test if the test has not done so, so later tests see a complete cluster.
func StopBroker(t testing.TB, c Cluster, nodeID int32) {
	t.Helper()
	Brokers(t, c)
	runScript(t, "stop-node", string(c), strconv.Itoa(int(nodeID)))
	t.Cleanup(func() {
		// start-node is idempotent: it only waits for the cluster when the node already runs.
		runScript(t, "start-node", string(c), strconv.Itoa(int(nodeID)))
	})
}

// StartBroker starts node nodeID of cluster c again and waits until the cluster's metadata
// lists all its brokers.
func StartBroker(t testing.TB, c Cluster, nodeID int32) {
	t.Helper()
	Brokers(t, c)
	runScript(t, "start-node", string(c), strconv.Itoa(int(nodeID)))
}

func runScript(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	script := Script(t)
	onC := len(args) > 1 && args[1] == string(C)
	if s := os.Getenv(EnvCScript); onC && s != "" {
		script = s // the script that started C, which knows cluster C
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	if onC {
		cmd.Env = append(os.Environ(), "KMIRROR_KAFKA_CLUSTERS=c") // C runs in its own invocation
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("kafka.sh %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
}

// NodeDataDir returns the log directory (log.dirs) of node nodeID of cluster c.
func NodeDataDir(t testing.TB, c Cluster, nodeID int32) string {
	t.Helper()
	if c == C {
		return filepath.Join(workdirC(t), fmt.Sprintf("%s%d", string(c), nodeID), "data")
	}
	return filepath.Join(Workdir(t), fmt.Sprintf("%s%d", string(c), nodeID), "data")
}

// SegmentFiles returns the .log segment files of one partition on node nodeID of cluster c,
// in offset order (Kafka names segments by zero-padded base offset).
func SegmentFiles(t testing.TB, c Cluster, nodeID int32, topic string, partition int32) []string {
	t.Helper()
	dir := filepath.Join(NodeDataDir(t, c, nodeID), fmt.Sprintf("%s-%d", topic, partition))
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatalf("kafkatest: list segments in %s: %v", dir, err)
	}
	return files
}

// DumpLogSegments runs Kafka's DumpLogSegments tool at batch level (no --deep-iteration) on
// files and returns its standard output. It fails the test when the tool fails or
// EnvClasspath is unset.
func DumpLogSegments(t testing.TB, files ...string) string {
	t.Helper()
	out, err := dumpLogSegments(files)
	if errors.Is(err, ErrNotRunning) {
		missing(t, err)
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

func dumpLogSegments(files []string) (string, error) {
	cp := os.Getenv(EnvClasspath)
	if cp == "" {
		return "", fmt.Errorf("%w: %s is not set", ErrNotRunning, EnvClasspath)
	}
	if len(files) == 0 {
		return "", errors.New("kafkatest: DumpLogSegments needs at least one file")
	}
	class := os.Getenv(EnvDumpLogClass)
	if class == "" {
		class = DefaultDumpLogClass
	}
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-cp", cp, class, "--files", strings.Join(files, ","))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kafkatest: %s %s: %w\n%s", class, strings.Join(files, ","), err, stderr.String())
	}
	return string(out), nil
}
