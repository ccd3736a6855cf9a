package controller

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	configDocPath  = "../../docs/CONFIG.md"
	configDocBegin = "<!-- BEGIN mirror config table: generated from mirror/controller configTable; KMIRROR_UPDATE_DOCS=1 go test -run TestConfigDocMatchesTable ./mirror/controller/ -->\n"
	configDocEnd   = "<!-- END mirror config table -->\n"
)

// configDocTable renders configTable as the Markdown table of docs/CONFIG.md.
func configDocTable() string {
	var b strings.Builder
	b.WriteString("| canonical key | also accepted | default | meaning |\n|---|---|---|---|\n")
	aliases := map[string][]string{}
	for alias, k := range keyAliases {
		aliases[k] = append(aliases[k], "`"+alias+"`")
	}
	connection := false
	for _, k := range configTable {
		if k.doc == "" {
			if !connection {
				b.WriteString("| `security.protocol`, `sasl.*`, `ssl.*` | | PLAINTEXT | the connection: see *The connection* below |\n")
				connection = true
			}
			continue
		}
		shown := k.shown
		if shown == "" {
			shown = "`" + k.def + "`"
			if k.def == "" {
				shown = "`\"\"`"
			}
		}
		b.WriteString("| `" + k.key + "` | " + strings.Join(aliases[k.key], ", ") + " | " + shown + " | " + k.doc + " |\n")
	}
	return b.String()
}

// docs/CONFIG.md shows the table of configTable, and names every key of it; with
// KMIRROR_UPDATE_DOCS=1 the test writes the table instead.
func TestConfigDocMatchesTable(t *testing.T) {
	raw, err := os.ReadFile(configDocPath)
	require.NoError(t, err)
	doc := string(raw)
	i, j := strings.Index(doc, configDocBegin), strings.Index(doc, configDocEnd)
	require.True(t, i >= 0 && j > i, "docs/CONFIG.md has no generated mirror config table")
	want := doc[:i+len(configDocBegin)] + configDocTable() + doc[j:]
	if os.Getenv("KMIRROR_UPDATE_DOCS") == "1" && want != doc {
		require.NoError(t, os.WriteFile(configDocPath, []byte(want), 0o644))
		doc = want
	}
	require.Equal(t, want, doc, "docs/CONFIG.md is not the config table: KMIRROR_UPDATE_DOCS=1 go test -run TestConfigDocMatchesTable ./mirror/controller/")
	for _, k := range configTable {
		require.Contains(t, doc, "`"+k.key+"`", "docs/CONFIG.md does not name %s", k.key)
	}
}
