package twosites

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// privateKafka is a one-node Kafka 4.4 cluster that belongs to one test, so
// the test may stop it: scripts/kafka/kafka.sh runs it as its cluster C, with
// its own work directory (under the test's temporary directory) and ports.
type privateKafka struct {
	t       testing.TB
	env     []string // the script's environment for this cluster
	addr    string   // the bootstrap address
	running bool
}

// drillKafkaBasePort is the private cluster's base port for kafka.sh: client
// port base+30, controller port base+130. No other test uses these.
const drillKafkaBasePort = 27400

// startPrivateKafka starts the cluster (15 to 20 s) and stops it when the
// test ends. It skips, or fails with KMIRROR_REQUIRE_KAFKA=1, when Java or
// the Kafka jars are missing.
func startPrivateKafka(t testing.TB, basePort int) *privateKafka {
	t.Helper()
	java(t) // skips or fails without a JDK or the jars
	k := &privateKafka{t: t, env: append(os.Environ(),
		"KMIRROR_KAFKA_CLUSTERS=c",
		"KMIRROR_KAFKA_C_VERSION=4.4.0",
		"KMIRROR_KAFKA_C_WORKDIR="+filepath.Join(t.TempDir(), "kafka"),
		fmt.Sprintf("KMIRROR_KAFKA_C_BASE_PORT=%d", basePort),
		"KMIRROR_KAFKA_EXTRA_CONFIG_C=",
	)}
	t.Cleanup(func() {
		if k.running {
			k.stop()
		}
	})
	k.script("start")
	k.running = true
	k.addr = fmt.Sprintf("127.0.0.1:%d", basePort+30)
	return k
}

// stop stops every broker of the cluster (SIGTERM, then SIGKILL after the
// script's timeout) and waits until they are gone.
func (k *privateKafka) stop() {
	k.t.Helper()
	k.script("stop")
	k.running = false
}

func (k *privateKafka) script(cmd string) {
	k.t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(k.t, ok)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kafka", "kafka.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", script, cmd)
	c.Env = k.env
	out, err := c.CombinedOutput()
	require.NoError(k.t, err, "kafka.sh %s: %s", cmd, out)
	k.t.Logf("private Kafka: kafka.sh %s: %s", cmd, strings.TrimSpace(string(out)))
}
