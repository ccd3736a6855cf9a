package mirror

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

func TestDestinationRootLocked(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	_, err = OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.ErrorIs(t, err, ErrDestinationLocked, "a second open in the same process")
	require.ErrorIs(t, err, fetcher.ErrLocked)

	// another process: the test binary itself, opening the same root
	if os.Getenv("KMIRROR_LOCK_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDestinationRootLockedChild$")
		cmd.Env = append(os.Environ(), "KMIRROR_LOCK_CHILD="+root)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, d.Close())
	d, err = OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err, "Close released the lock")
	require.NoError(t, d.Close())
}

// TestDestinationRootLockedChild runs in the child process of TestDestinationRootLocked.
func TestDestinationRootLockedChild(t *testing.T) {
	root := os.Getenv("KMIRROR_LOCK_CHILD")
	if root == "" {
		t.Skip("runs as the child of TestDestinationRootLocked")
	}
	_, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.ErrorIs(t, err, ErrDestinationLocked, "another process holds the root")
}

// TestUnwritableRoot: a root the process may not write is an error matching
// fs.ErrPermission. As root (which may write anywhere) the check runs in a child process
// of the test binary with the uid and gid of nobody.
func TestUnwritableRoot(t *testing.T) {
	if dir := os.Getenv("KMIRROR_UNWRITABLE_ROOT"); dir != "" {
		_, err := OpenFileDestination(dir, "dst", fetcher.FileLogOptions{})
		require.ErrorIs(t, err, fs.ErrPermission, "%v", err)
		var ue *UnwritableRootError
		require.ErrorAs(t, err, &ue)
		_, err = OpenFileDestination(filepath.Join(dir, "sub"), "dst", fetcher.FileLogOptions{})
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
	bin := filepath.Join(base, "mirror.test")
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
	_, err := OpenFileDestination(file, "dst", fetcher.FileLogOptions{})
	require.Error(t, err, "a root that is a regular file")
	require.NotErrorIs(t, err, fs.ErrPermission)
}

// TestDefaultStoresAreFileBacked: New on a file destination opens the file stores under
// the root and closes them with the Mirror; a Mirror already on the root keeps a second
// one out; a memory destination keeps the memory stores.
func TestDefaultStoresAreFileBacked(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	m, err := New(Config{Destination: d, SyncInterval: -1})
	require.NoError(t, err)
	require.IsType(t, &coordinator.FileStore{}, m.store)
	require.IsType(t, &FileControllerLog{}, m.cfg.ControllerLog)
	_, err = New(Config{Destination: d, SyncInterval: -1})
	require.ErrorIs(t, err, ErrControllerLogLocked, "the state of one root has one owner")
	require.NoError(t, m.Close())
	for _, dir := range []string{ControllerLogDir, StateStoreDir} {
		_, err := os.Stat(filepath.Join(root, dir))
		require.NoError(t, err)
	}
	m, err = New(Config{Destination: d, SyncInterval: -1})
	require.NoError(t, err, "Close released the stores")
	require.NoError(t, m.Close())

	mem := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	m, err = New(Config{Destination: mem, SyncInterval: -1})
	require.NoError(t, err)
	require.IsType(t, &coordinator.MemoryStore{}, m.store)
	require.IsType(t, &MemoryControllerLog{}, m.cfg.ControllerLog)
	require.NoError(t, m.Close())

	// a store the host passes is used, and not closed by the Mirror
	ms := coordinator.NewMemoryStore()
	m, err = New(Config{Destination: d, Store: ms, ControllerLog: &MemoryControllerLog{}, SyncInterval: -1})
	require.NoError(t, err)
	require.Same(t, ms, m.store)
	require.NoError(t, m.Close())
}

func TestFileControllerLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := OpenFileControllerLog(dir)
	require.NoError(t, err)
	_, err = OpenFileControllerLog(dir)
	require.ErrorIs(t, err, ErrControllerLogLocked)
	c, err := OpenController(ctx, l)
	require.NoError(t, err)
	require.NoError(t, c.CreateMirror(ctx, "m", map[string]string{KeyBootstrapServers: "a:1"}))
	require.NoError(t, c.CreateMirror(ctx, "gone", map[string]string{KeyBootstrapServers: "b:1"}))
	require.NoError(t, c.DeleteMirror(ctx, "gone", -1))
	_, err = l.Append(ctx, []records.ControllerRecord{{}})
	require.Error(t, err, "an invalid record")
	_, err = l.Append(ctx, nil)
	require.Error(t, err)
	mirrors := c.Mirrors()
	require.NoError(t, l.lock.Close()) // killed: no Close

	l2, err := OpenFileControllerLog(dir)
	require.NoError(t, err)
	c2, err := OpenController(ctx, l2)
	require.NoError(t, err)
	require.Equal(t, mirrors, c2.Mirrors())
	require.NoError(t, l2.Close())
	require.NoError(t, l2.Close(), "second Close")
	require.ErrorIs(t, l2.Load(ctx, func(int64, records.ControllerRecord) error { return nil }), ErrControllerLogClosed)
	_, err = l2.Append(ctx, []records.ControllerRecord{{MirrorTombstone: "m"}})
	require.ErrorIs(t, err, ErrControllerLogClosed)

	// a corrupt record inside the clean prefix
	seg := filepath.Join(dir, "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	data[70] ^= 0xff
	require.NoError(t, os.WriteFile(seg, data, 0o644))
	_, err = OpenFileControllerLog(dir)
	require.ErrorIs(t, err, ErrCorruptStateFile)
	require.True(t, errors.Is(err, coordinator.ErrCorruptStateFile))
}
