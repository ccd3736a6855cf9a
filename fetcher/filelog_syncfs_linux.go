//go:build linux && (amd64 || arm64)

package fetcher

import (
	"os"
	"syscall"
)

// syncFS asks the kernel to write every dirty page and inode of the file system
// holding dir (syncfs(2)). It only saves work for the fsyncs that follow it, which
// give the durability and report the errors, so its own failure is ignored.
func syncFS(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(sysSyncfs, fd, 0, 0)
	})
}

// sysSyncfs is syncfs's system call number on linux/amd64 and linux/arm64
// (the syscall package has no constant for it).
const sysSyncfs = syncfsNumber
