package main

import (
	"bytes"
	"testing"

	"github.com/kmirror/kmirror/internal/doccheck"
)

// TestFlagsDocIsGenerated checks that docs/CONFIG.md lists mirrorctl's flags as
// -help prints them (KMIRROR_UPDATE_DOCS=1 rewrites the list).
func TestFlagsDocIsGenerated(t *testing.T) {
	var help, stderr bytes.Buffer
	if code := run([]string{"-help"}, &help, &stderr); code != exitOK {
		t.Fatalf("-help exited %d: %s", code, stderr.String())
	}
	doccheck.CheckGenerated(t, "../../docs/CONFIG.md", "mirrorctl flags", "```text\n"+help.String()+"```\n",
		"go test -run TestFlagsDocIsGenerated ./examples/mirrorctl/")
}
