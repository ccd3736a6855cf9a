package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// PureSet names a directory of the module (relative to its root) whose non-test Go files
// must stay pure. When Files is non-nil only the files it accepts are checked (a package
// such as admin mixes pure message types with a network server).
type PureSet struct {
	Dir   string
	Files func(name string) bool
}

// PureSets is the list of code that must do no I/O. Later packages add themselves here.
var PureSets = []PureSet{
	{Dir: "records"},
	{Dir: "epoch"},
	{Dir: "statemachine"},
	{Dir: "admin/scram"},
	{Dir: "internal/consumergroup"},
	{Dir: "admin", Files: func(name string) bool {
		return name != "server.go" && name != "client.go" && !strings.HasPrefix(name, "server_") && !strings.HasPrefix(name, "client_")
	}},
	{Dir: "coordinator", Files: func(name string) bool { return strings.HasPrefix(name, "shard") }},
}

// forbiddenImports may not be imported by pure code; a prefix match also covers
// sub-packages ("net" forbids "net/http").
var forbiddenImports = []string{"net", "os", "math/rand", "crypto/rand", "syscall", "io/ioutil"}

// forbiddenTimeCalls are the functions of package time that read the clock or sleep.
var forbiddenTimeCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true,
	"Tick": true, "NewTimer": true, "NewTicker": true,
}

// Violation is one breach of the purity rule.
type Violation struct {
	Pos  token.Position
	Rule string
}

// String formats the violation as "file:line:col: rule".
func (v Violation) String() string { return fmt.Sprintf("%s: %s", v.Pos, v.Rule) }

// CheckFile reports the purity violations of one parsed file.
func CheckFile(fset *token.FileSet, f *ast.File) []Violation {
	var out []Violation
	timeName := ""
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		for _, bad := range forbiddenImports {
			if path == bad || strings.HasPrefix(path, bad+"/") {
				out = append(out, Violation{fset.Position(imp.Pos()), fmt.Sprintf("imports %q", path)})
			}
		}
		if path == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, Violation{fset.Position(n.Pos()), "starts a goroutine"})
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && forbiddenTimeCalls[n.Sel.Name] {
				out = append(out, Violation{fset.Position(n.Pos()), "uses time." + n.Sel.Name})
			}
		}
		return true
	})
	return out
}

// CheckDir parses the non-test Go files of dir accepted by filter and reports violations.
// A directory that does not exist yet yields no violations.
func CheckDir(dir string, filter func(string) bool) ([]Violation, int, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, 0, err
	}
	sort.Strings(matches)
	fset := token.NewFileSet()
	var out []Violation
	n := 0
	for _, path := range matches {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") || (filter != nil && !filter(name)) {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return nil, n, err
		}
		if isIgnoredBuild(f) {
			continue
		}
		f, err = parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, n, err
		}
		n++
		out = append(out, CheckFile(fset, f)...)
	}
	return out, n, nil
}

// isIgnoredBuild reports files excluded from normal builds (//go:build ignore, generators).
func isIgnoredBuild(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "ignore") {
				return true
			}
		}
	}
	return false
}
