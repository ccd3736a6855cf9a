//go:build !linux

package fetcher

import "os"

// fdatasync is f.Sync where fdatasync(2) does not exist.
func fdatasync(f *os.File) error { return f.Sync() }
