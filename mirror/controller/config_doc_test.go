package controller

import (
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/doccheck"
)

// configDocPath is docs/CONFIG.md from this package.
const configDocPath = "../../docs/CONFIG.md"

// TestConfigDocIsGenerated checks that the tables of docs/CONFIG.md are what
// ConfigDoc renders from the config table (KMIRROR_UPDATE_DOCS=1 rewrites them).
func TestConfigDocIsGenerated(t *testing.T) {
	mt, ct, err := ConfigDoc()
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "go test -run TestConfigDocIsGenerated ./mirror/controller/"
	doccheck.CheckGenerated(t, configDocPath, "mirror configs", mt, cmd)
	doccheck.CheckGenerated(t, configDocPath, "connection configs", ct, cmd)
}

// TestConfigDocRefusesDrift checks that a key without a row, or a row of an
// unknown key, is an error rather than a silently shorter table.
func TestConfigDocRefusesDrift(t *testing.T) {
	saved := knownKeys
	t.Cleanup(func() { knownKeys = saved })
	knownKeys = map[string]configKey{}
	for k, v := range saved {
		knownKeys[k] = v
	}
	knownKeys["undocumented.key"] = configKey{}
	if _, _, err := ConfigDoc(); err == nil || !strings.Contains(err.Error(), "undocumented.key") {
		t.Fatalf("a key without a row: err = %v", err)
	}
	delete(knownKeys, "undocumented.key")
	delete(knownKeys, KeyFetchMaxBytes)
	if _, _, err := ConfigDoc(); err == nil || !strings.Contains(err.Error(), KeyFetchMaxBytes) {
		t.Fatalf("a row of an unknown key: err = %v", err)
	}
}
