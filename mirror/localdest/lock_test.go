package localdest

import (
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
)

func TestDestinationRootLocked(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	_, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.ErrorIs(t, err, ErrLocked, "a second open in the same process")
	require.ErrorIs(t, err, fetcher.ErrLocked)

	// another process: the test binary itself, opening the same root
	if os.Getenv("KMIRROR_LOCK_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDestinationRootLockedChild$")
		cmd.Env = append(os.Environ(), "KMIRROR_LOCK_CHILD="+root)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, d.Close())
	d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err, "Close released the lock")
	require.NoError(t, d.Close())
}

// TestDestinationRootLockedChild runs in the child process of TestDestinationRootLocked.
func TestDestinationRootLockedChild(t *testing.T) {
	root := os.Getenv("KMIRROR_LOCK_CHILD")
	if root == "" {
		t.Skip("runs as the child of TestDestinationRootLocked")
	}
	_, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.ErrorIs(t, err, ErrLocked, "another process holds the root")
}

// TestUnwritableRoot: a root the process may not write is an error matching
// fs.ErrPermission. As root (which may write anywhere) the check runs in a child process
// of the test binary with the uid and gid of nobody.
func TestUnwritableRoot(t *testing.T) {
	if dir := os.Getenv("KMIRROR_UNWRITABLE_ROOT"); dir != "" {
		_, err := OpenFile(dir, "dst", fetcher.FileLogOptions{})
		require.ErrorIs(t, err, fs.ErrPermission, "%v", err)
		var ue *UnwritableRootError
		require.ErrorAs(t, err, &ue)
		_, err = OpenFile(filepath.Join(dir, "sub"), "dst", fetcher.FileLogOptions{})
		require.ErrorIs(t, err, fs.ErrPermission, "a root that cannot be created: %v", err)
		return
	}
	base, err := os.MkdirTemp("", "kmirror-unwritable-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	root := filepath.Join(base, "root")
	require.NoError(t, os.Mkdir(root, 0o555))
	require.NoError(t, os.Chmod(base, 0o755))
	if os.Geteuid() != 0 {
		t.Setenv("KMIRROR_UNWRITABLE_ROOT", root)
		TestUnwritableRoot(t)
		return
	}
	// The child needs a copy of the test binary it may execute.
	bin := filepath.Join(base, "localdest.test")
	copyFile(t, os.Args[0], bin)
	cmd := exec.Command(bin, "-test.run=^TestUnwritableRoot$", "-test.count=1")
	cmd.Env = append(os.Environ(), "KMIRROR_UNWRITABLE_ROOT="+root, "GOCOVERDIR="+base)
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child as nobody: %s", out)
	require.Contains(t, string(out), "PASS")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// TestRootErrorMapping: the causes an unwritable root can have all match
// fs.ErrPermission; others do not.
func TestRootErrorMapping(t *testing.T) {
	for _, cause := range []error{syscall.EACCES, syscall.EPERM, syscall.EROFS, &fs.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}} {
		err := rootError("/x", cause)
		require.ErrorIs(t, err, fs.ErrPermission, "%v", cause)
		require.ErrorIs(t, err, cause)
	}
	require.NotErrorIs(t, rootError("/x", syscall.ENOSPC), fs.ErrPermission)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := OpenFile(file, "dst", fetcher.FileLogOptions{})
	require.Error(t, err, "a root that is a regular file")
	require.NotErrorIs(t, err, fs.ErrPermission)
}
