package doccheck

import (
	"os"
	"strings"
	"testing"
)

// UpdateEnv names the environment variable that makes CheckGenerated rewrite the
// document instead of failing: KMIRROR_UPDATE_DOCS=1 go test -run ... ./pkg/.
const UpdateEnv = "KMIRROR_UPDATE_DOCS"

// CheckGenerated checks that the section of the document at path between
// "<!-- BEGIN GENERATED: name -->" and "<!-- END GENERATED: name -->" (each on a line
// of its own) is body, and fails t naming the command that regenerates it when it is
// not. With KMIRROR_UPDATE_DOCS=1 it rewrites the section instead. A document
// without the markers fails t.
func CheckGenerated(t testing.TB, path, name, body, regenerate string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	begin, end := "<!-- BEGIN GENERATED: "+name+" -->\n", "<!-- END GENERATED: "+name+" -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section %q", path, name)
	}
	want := doc[:i+len(begin)] + body + doc[j:]
	if want == doc {
		return
	}
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the generated section %q is stale; regenerate it with\n\t%s=1 %s", path, name, UpdateEnv, regenerate)
}
