//go:build !linux

package fetcher

import (
	"errors"
	"os"
)

// fdatasync is f.Sync where fdatasync(2) does not exist.
func fdatasync(f *os.File) error { return f.Sync() }

// fileSystemOf is 0: no group syncs without syncfs(2).
func fileSystemOf(string) uint64 { return 0 }

func openSyncFS(string) (func() error, error) {
	return nil, errors.New("fetcher: no syncfs on this system")
}
