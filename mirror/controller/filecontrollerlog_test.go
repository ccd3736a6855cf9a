package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/records"
)

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
