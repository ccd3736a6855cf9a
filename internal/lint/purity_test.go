package lint

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPurePackages fails when a pure package does I/O, reads the clock or starts a goroutine.
func TestPurePackages(t *testing.T) {
	root := filepath.Join("..", "..")
	total := 0
	for _, set := range PureSets {
		vs, n, err := CheckDir(filepath.Join(root, set.Dir), set.Files)
		require.NoError(t, err, set.Dir)
		total += n
		for _, v := range vs {
			t.Errorf("%s must stay pure: %s", set.Dir, v)
		}
	}
	t.Logf("checked %d pure files", total)
}

// TestRuleCatchesViolations proves the rule can fail.
func TestRuleCatchesViolations(t *testing.T) {
	const src = `package bad

import (
	"net"
	"os/exec"
	clock "time"
)

func f() {
	go func() {}()
	_ = clock.Now()
	clock.Sleep(1)
	_ = clock.Duration(1) // allowed: a type, not the clock
	_, _ = net.Dial("tcp", "")
	_ = exec.Command
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, 0)
	require.NoError(t, err)
	var rules []string
	for _, v := range CheckFile(fset, f) {
		rules = append(rules, v.Rule)
	}
	require.Equal(t, []string{
		`imports "net"`, `imports "os/exec"`, "starts a goroutine", "uses time.Now", "uses time.Sleep",
	}, rules, strings.Join(rules, "; "))
}

func TestCleanFilePasses(t *testing.T) {
	const src = `package good

import "time"

func f(now time.Time, d time.Duration) time.Time { return now.Add(d) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "good.go", src, 0)
	require.NoError(t, err)
	require.Empty(t, CheckFile(fset, f))
}
