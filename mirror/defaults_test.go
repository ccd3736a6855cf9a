package mirror

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

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
