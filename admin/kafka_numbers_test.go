package admin

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// kafkaTablesJava prints Kafka's ApiKeys, Errors and ACL ResourceType
// tables, one "key|error|resource <number> <NAME>" line each.
const kafkaTablesJava = `import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.resource.ResourceType;

public class KafkaTables {
    public static void main(String[] args) {
        for (ApiKeys k : ApiKeys.values()) System.out.println("key " + k.id + " " + k.name());
        for (Errors e : Errors.values()) System.out.println("error " + e.code() + " " + e.name());
        for (ResourceType r : ResourceType.values()) System.out.println("resource " + r.code() + " " + r.name());
    }
}
`

// kafkaClasspath returns the classpath of the harness's Kafka jars: the
// KMIRROR_KAFKA_CLASSPATH of kafka.sh's env file, or else the classpath file
// that `scripts/kafka/kafka.sh install` writes into its cache
// (KMIRROR_KAFKA_CACHE, default ~/.cache/kmirror/kafka, then the version,
// KMIRROR_KAFKA_VERSION, default 4.4.0). "" when neither exists.
func kafkaClasspath(t *testing.T) string {
	if cp := strings.TrimSpace(os.Getenv("KMIRROR_KAFKA_CLASSPATH")); cp != "" {
		return cp
	}
	cache := os.Getenv("KMIRROR_KAFKA_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache", "kmirror", "kafka")
	}
	version := os.Getenv("KMIRROR_KAFKA_VERSION")
	if version == "" {
		version = "4.4.0"
	}
	b, err := os.ReadFile(filepath.Join(cache, version, "classpath"))
	if err != nil {
		t.Logf("no Kafka classpath file: %v", err)
		return ""
	}
	return strings.TrimSpace(string(b))
}

// kafkaTables compiles and runs kafkaTablesJava against the Kafka jars and
// returns Kafka's API keys, error codes and ACL resource types by number. It skips the test when
// the jars or the JDK are missing, unless KMIRROR_REQUIRE_KAFKA=1.
func kafkaTables(t *testing.T) (keys, codes, resources map[int16]string) {
	skip := func(why string) {
		if os.Getenv("KMIRROR_REQUIRE_KAFKA") == "1" {
			t.Fatalf("%s (KMIRROR_REQUIRE_KAFKA=1): run scripts/kafka/kafka.sh install", why)
		}
		t.Skip(why + ": run scripts/kafka/kafka.sh install")
	}
	cp := kafkaClasspath(t)
	if cp == "" {
		skip("Kafka jars not installed")
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		skip("javac not found")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		skip("java not found")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "KafkaTables.java")
	require.NoError(t, os.WriteFile(src, []byte(kafkaTablesJava), 0o600))
	out, err := exec.Command(javac, "-cp", cp, "-d", dir, src).CombinedOutput()
	require.NoError(t, err, "javac: %s", out)
	cmd := exec.Command(java, "-Xmx128m", "-cp", cp+string(os.PathListSeparator)+dir, "KafkaTables")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	require.NoError(t, err, "java: %s", stderr.String())
	keys, codes, resources = map[int16]string{}, map[int16]string{}, map[int16]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.Len(t, f, 3, "unexpected line %q", sc.Text())
		n, err := strconv.ParseInt(f[1], 10, 16)
		require.NoError(t, err, "line %q", sc.Text())
		switch f[0] {
		case "key":
			keys[int16(n)] = f[2]
		case "error":
			codes[int16(n)] = f[2]
		case "resource":
			resources[int16(n)] = f[2]
		default:
			t.Fatalf("unexpected line %q", sc.Text())
		}
	}
	require.NotEmpty(t, keys, "no ApiKeys printed")
	require.NotEmpty(t, codes, "no Errors printed")
	require.NotEmpty(t, resources, "no ResourceTypes printed")
	return keys, codes, resources
}

// upperSnake turns "CreateClusterMirror" into "CREATE_CLUSTER_MIRROR", the
// form of Kafka's ApiKeys names.
func upperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// collisions compares our numbers (number -> Kafka-style name) with Kafka's
// and describes every clash: one of our numbers that names something else in
// Kafka, or one of our names that Kafka has allocated under another number
// (then the KIP was voted: take Kafka's number).
func collisions(what string, ours, kafka map[int16]string) []string {
	kafkaByName := map[string]int16{}
	for n, name := range kafka {
		kafkaByName[name] = n
	}
	var out []string
	for n, name := range ours {
		if kn, ok := kafka[n]; ok && kn != name {
			out = append(out, fmt.Sprintf("%s %d: kmirror's %s is Kafka's %s", what, n, name, kn))
		}
		if kn, ok := kafkaByName[name]; ok && kn != n {
			out = append(out, fmt.Sprintf("%s %s: kmirror uses %d, Kafka %d", what, name, n, kn))
		}
	}
	sort.Strings(out)
	return out
}

// ourKeys and ourCodes are this package's tables in the form collisions takes.
func ourKeys() map[int16]string {
	m := map[int16]string{}
	for _, a := range APIs() {
		m[a.Key] = upperSnake(a.Name)
	}
	return m
}

func ourCodes() map[int16]string {
	m := map[int16]string{}
	for _, ci := range Codes() {
		m[int16(ci.Code)] = ci.Name
	}
	return m
}

// TestNumbersDoNotCollideWithKafka reads Kafka's own ApiKeys and Errors
// tables from the harness's jars and fails when a mirror API key or an error
// code of this package clashes with them (see collisions). A Kafka upgrade
// in kafka.sh thus flags new clashes.
func TestNumbersDoNotCollideWithKafka(t *testing.T) {
	keys, codes, resources := kafkaTables(t)
	require.Empty(t, collisions("API key", ourKeys(), keys))
	require.Empty(t, collisions("error code", ourCodes(), codes))
	// ACL resource types: Kafka's own have our numbers, and CLUSTER_MIRROR
	// (KIP-1279's, not in Kafka 4.4) takes a code Kafka leaves free.
	ourResources := map[int16]string{}
	for _, r := range []ResourceType{ResourceTopic, ResourceCluster, ResourceClusterMirror} {
		ourResources[int16(r)] = r.String()
	}
	require.Empty(t, collisions("resource type", ourResources, resources))
	require.Equal(t, "TOPIC", resources[int16(ResourceTopic)])
	require.Equal(t, "CLUSTER", resources[int16(ResourceCluster)])
	t.Logf("checked %d API keys and %d error codes against Kafka's %d keys and %d codes",
		len(APIs()), len(Codes()), len(keys), len(codes))
	// The check does catch a clash: the prototype's numbers (ours minus
	// 10000) collide with Kafka 4.4.0 at key 94 and codes 134 and 136.
	old := func(m map[int16]string) map[int16]string {
		o := map[int16]string{}
		for n, name := range m {
			if n >= 10000 {
				n -= 10000
			}
			o[n] = name
		}
		return o
	}
	if keys[94] != "" {
		require.Contains(t, collisions("API key", old(ourKeys()), keys),
			"API key 94: kmirror's CREATE_CLUSTER_MIRROR is Kafka's "+keys[94])
	}
	if codes[134] != "" {
		require.Contains(t, collisions("error code", old(ourCodes()), codes),
			"error code 134: kmirror's READ_ONLY_TOPIC is Kafka's "+codes[134])
	}
}

// TestCollisions checks the comparison itself without Kafka's jars.
func TestCollisions(t *testing.T) {
	kafka := map[int16]string{0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 134: "GROUP_DELETION_FAILED", 140: "READ_ONLY_TOPIC"}
	require.Empty(t, collisions("error code", map[int16]string{0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 10134: "X"}, kafka))
	require.Equal(t, []string{
		"error code 134: kmirror's READ_ONLY_TOPIC is Kafka's GROUP_DELETION_FAILED",
		"error code READ_ONLY_TOPIC: kmirror uses 134, Kafka 140",
	}, collisions("error code", map[int16]string{134: "READ_ONLY_TOPIC"}, kafka))
	require.Equal(t, "CREATE_CLUSTER_MIRROR", upperSnake("CreateClusterMirror"))
	require.Equal(t, "BUMP_LEADER_EPOCHS", upperSnake("BumpLeaderEpochs"))
}
