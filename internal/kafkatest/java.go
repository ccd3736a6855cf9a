package kafkatest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Java returns the java binary and the classpath of the Kafka jars that
// scripts/kafka/kafka.sh install resolved (KMIRROR_KAFKA_CLASSPATH when set,
// else the cache's classpath file of KMIRROR_KAFKA_VERSION, default 4.4.0),
// for tests that run Kafka's own tools and clients as JVM processes. It skips
// when either is missing, and fails instead with KMIRROR_REQUIRE_KAFKA=1.
func Java(t testing.TB) (bin, classpath string) {
	t.Helper()
	skip := func(why string) {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s (%s=1): run scripts/kafka/kafka.sh install", why, EnvRequire)
		}
		t.Skip(why + ": run scripts/kafka/kafka.sh install")
	}
	cp := strings.TrimSpace(os.Getenv("KMIRROR_KAFKA_CLASSPATH"))
	if cp == "" {
		cache := strings.TrimSpace(os.Getenv(EnvCache))
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				skip("no home directory for the Kafka cache")
			}
			cache = filepath.Join(home, ".cache", "kmirror", "kafka")
		}
		version := os.Getenv("KMIRROR_KAFKA_VERSION")
		if version == "" {
			version = "4.4.0"
		}
		b, err := os.ReadFile(filepath.Join(cache, version, "classpath"))
		if err != nil {
			skip("Kafka jars not installed")
		}
		cp = strings.TrimSpace(string(b))
	}
	bin, err := exec.LookPath("java")
	if err != nil {
		skip("java not found")
	}
	return bin, cp
}
