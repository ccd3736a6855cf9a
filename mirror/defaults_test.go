package mirror

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
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
