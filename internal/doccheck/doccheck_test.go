package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory (this package is internal/doccheck).
const repoRoot = "../.."

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// backticked finds `names` in a line.
var backticked = regexp.MustCompile("`([^`]+)`")

// fileName matches what the file map cites as a file or folder of its row: a Go file
// (possibly with a * glob), a script, or a folder ending in /.
var fileName = regexp.MustCompile(`^[A-Za-z0-9_*.-]+(/[A-Za-z0-9_*.-]+)*(\.go|\.sh|/)$`)

// TestDesignFileMapPathsExist reads the file map of docs/DESIGN.md (rows
// "| `dir/` | ... |") and checks that every Go file, data file and folder a row
// cites exists in that row's directory (a name with * must match at least one file).
func TestDesignFileMapPathsExist(t *testing.T) {
	doc := read(t, "docs/DESIGN.md")
	_, fileMap, ok := strings.Cut(doc, "## File map")
	if !ok {
		t.Fatal("docs/DESIGN.md has no '## File map' section")
	}
	if next := strings.Index(fileMap, "\n## "); next >= 0 {
		fileMap = fileMap[:next]
	}
	rows := 0
	for _, line := range strings.Split(fileMap, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		dir, _, _ := strings.Cut(strings.Trim(strings.TrimSpace(cells[1]), "`"), "`") // the first of "`a/`, `b/`"
		if strings.HasSuffix(dir, ".go") {                                            // a row about one top-level file
			if _, err := os.Stat(filepath.Join(repoRoot, dir)); err != nil {
				t.Errorf("file map row %q: %v", dir, err)
			}
			continue
		}
		rows++
		if _, err := os.Stat(filepath.Join(repoRoot, dir)); err != nil {
			t.Errorf("file map row %q: the folder does not exist", dir)
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
			name := m[1]
			if !fileName.MatchString(name) || strings.HasPrefix(name, "__") {
				continue // a type, a function, a Kafka topic name, ...
			}
			if dir == "examples/" && !strings.Contains(name, "/") && strings.HasSuffix(name, ".go") {
				continue // examples cites files of its programs by their program's name
			}
			pattern := filepath.Join(repoRoot, dir, strings.TrimSuffix(name, "/"))
			found, err := filepath.Glob(pattern)
			if err != nil || len(found) == 0 {
				if strings.Contains(name, "/") { // a path from the repository root
					if f, _ := filepath.Glob(filepath.Join(repoRoot, strings.TrimSuffix(name, "/"))); len(f) > 0 {
						continue
					}
				}
				t.Errorf("docs/DESIGN.md file map, row %s: %s does not exist", dir, name)
			}
		}
	}
	if rows < 10 {
		t.Fatalf("read only %d rows of the file map: has its form changed?", rows)
	}
}

// docs lists the prose documents of the repository: the README, docs/*.md and every
// doc.go.
func docs(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	md, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range md {
		rel, _ := filepath.Rel(repoRoot, f)
		out = append(out, rel)
	}
	err = filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "doc.go" {
			rel, _ := filepath.Rel(repoRoot, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// outside matches references that a reader of a clone cannot follow: paths that
// leave the repository and numbered issues of a tracker the repository does not carry.
var outside = []*regexp.Regexp{
	regexp.MustCompile(`\.\./shared|outside (this|the) repository`),
	regexp.MustCompile(`(?i)\bissues? #?\d+\b`),
}

// TestDocsStayInsideTheRepository fails on a document that cites a file outside the
// repository or an issue number.
func TestDocsStayInsideTheRepository(t *testing.T) {
	for _, rel := range docs(t) {
		for i, line := range strings.Split(read(t, rel), "\n") {
			for _, re := range outside {
				if m := re.FindString(line); m != "" {
					t.Errorf("%s:%d cites %q: %s", rel, i+1, m, strings.TrimSpace(line))
				}
			}
		}
	}
}

// repoPath matches a backticked path from the repository root: a top-level folder
// of the repository, then more of the path.
var repoPath = regexp.MustCompile("`((?:admin|coordinator|epoch|examples|fetcher|internal|mirror|records|scripts|statemachine|docs)/[A-Za-z0-9_./*-]+)`")

// goSymbol matches a path that ends in a Go name of its package (pkg/path.Name).
var goSymbol = regexp.MustCompile(`^(.*[a-z0-9])\.[A-Z][A-Za-z0-9_]*$`)

// TestDocsCitePathsThatExist checks every backticked path from the repository root in
// the README and docs/*.md.
func TestDocsCitePathsThatExist(t *testing.T) {
	for _, rel := range docs(t) {
		if strings.HasSuffix(rel, "doc.go") {
			continue
		}
		for i, line := range strings.Split(read(t, rel), "\n") {
			for _, m := range repoPath.FindAllStringSubmatch(line, -1) {
				p := strings.TrimSuffix(m[1], "/")
				if sym := goSymbol.FindStringSubmatch(p); sym != nil {
					p = sym[1] // a package's name: `examples/kmirrord.TestHostileFrames`
				}
				if found, err := filepath.Glob(filepath.Join(repoRoot, p)); err != nil || len(found) == 0 {
					t.Errorf("%s:%d cites %s, which does not exist", rel, i+1, m[1])
				}
			}
		}
	}
}

// TestReadmeSnippetIsTheExample checks that the README's library snippet (the first
// Go block under "## Use it") is, line for line, the body of mirror's Example_readme
// between its README markers, so the README shows code that compiles and runs.
func TestReadmeSnippetIsTheExample(t *testing.T) {
	src := read(t, "mirror/readme_example_test.go")
	_, body, ok := strings.Cut(src, "// README:BEGIN\n")
	body, _, ok2 := strings.Cut(body, "\t// README:END")
	if !ok || !ok2 {
		t.Fatal("mirror/readme_example_test.go has no README:BEGIN/README:END markers")
	}
	var want []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		want = append(want, strings.TrimPrefix(l, "\t"))
	}
	readme := read(t, "README.md")
	_, use, ok := strings.Cut(readme, "## Use it")
	_, block, ok2 := strings.Cut(use, "```go\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no Go block under '## Use it'")
	}
	got := strings.Split(strings.TrimRight(block, "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("README.md's 'Use it' snippet differs from mirror.Example_readme; it should read:\n%s", strings.Join(want, "\n"))
	}
}
