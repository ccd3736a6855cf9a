package main

import (
	"bytes"
	"testing"

	"github.com/kmirror/kmirror/internal/doccheck"
)

// TestFlagsDocIsGenerated checks that docs/CONFIG.md lists kmirrord's flags as
// -help prints them (KMIRROR_UPDATE_DOCS=1 rewrites the list).
func TestFlagsDocIsGenerated(t *testing.T) {
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-help"}, &help); err == nil {
		t.Fatal("-help parsed without flag.ErrHelp")
	}
	doccheck.CheckGenerated(t, "../../docs/CONFIG.md", "kmirrord flags", "```text\n"+help.String()+"```\n",
		"go test -run TestFlagsDocIsGenerated ./examples/kmirrord/")
}
