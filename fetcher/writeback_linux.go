package fetcher

import (
	"os"
	"syscall"
)

// startWriteback asks the kernel to start writing f's dirty pages in [off,
// off+n) to the device without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE). It is only a hint that lets the disk work while the
// mirror keeps fetching, so that a later fsync finds little left to write;
// durability still comes from that fsync. Errors are ignored: a write error
// is reported by the fsync that follows.
func startWriteback(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SyncFileRange(int(fd), off, n, 2 /* SYNC_FILE_RANGE_WRITE */)
	})
}
