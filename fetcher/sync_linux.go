package fetcher

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data and the metadata needed to read it back (not its
// times), which is all an in-place overwrite of a file of unchanged size
// needs.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
