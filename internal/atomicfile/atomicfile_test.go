package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writers are the two ways of replacing a file; both must replace whole
// files and leave no temporary behind.
var writers = map[string]func(dir, name string, data []byte, perm os.FileMode) error{
	"WriteFile":       WriteFile,
	"ReplaceUnsynced": ReplaceUnsynced,
}

func TestWriteFileReplaces(t *testing.T) {
	for name, write := range writers {
		t.Run(name, func(t *testing.T) { testReplaces(t, write) })
	}
}

func testReplaces(t *testing.T, write func(dir, name string, data []byte, perm os.FileMode) error) {
	dir := t.TempDir()
	for _, content := range []string{"first\n", "second, longer\n", ""} {
		if err := write(dir, "state", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "state"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Fatalf("content %q, want %q", got, content)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", fi.Mode().Perm())
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only the file (no temporary left)", len(ents))
	}
}

// TestWriteFileFailureKeepsOld: a rename that cannot happen (the target is a
// non-empty directory) leaves the target as it was and no temporary file.
func TestWriteFileFailureKeepsOld(t *testing.T) {
	for name, write := range writers {
		t.Run(name, func(t *testing.T) { testFailureKeepsOld(t, write) })
	}
}

func testFailureKeepsOld(t *testing.T, write func(dir, name string, data []byte, perm os.FileMode) error) {
	dir := t.TempDir()
	target := filepath.Join(dir, "state")
	if err := os.MkdirAll(filepath.Join(target, "child"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := write(dir, "state", []byte("x"), 0o644)
	var le *os.LinkError
	if !errors.As(err, &le) {
		t.Fatalf("err %v, want an *os.LinkError from the rename", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), TempSuffix) {
			t.Fatalf("temporary %s left behind", e.Name())
		}
	}
}

func TestWriteFileMissingDir(t *testing.T) {
	err := WriteFile(filepath.Join(t.TempDir(), "missing"), "state", []byte("x"), 0o644)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err %v, want Is(os.ErrNotExist)", err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SyncDir err %v, want Is(os.ErrNotExist)", err)
	}
}
