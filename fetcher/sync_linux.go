package fetcher

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// fdatasync syncs f's data and the metadata needed to read it back (not its
// times), which is all an in-place overwrite of a file of unchanged size
// needs.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// fileSystemOf returns the device of dir's filesystem for group syncs, 0
// when they are off: syncfs(2) reports the filesystem's writeback errors
// only since Linux 5.8, and before a failed writeback would go unnoticed.
func fileSystemOf(dir string) uint64 {
	if !syncfsReportsErrors() {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0
	}
	return uint64(st.Dev) + 1 // never 0
}

// openSyncFS opens dir and returns a syncfs(2) of its filesystem through
// that descriptor, which stays open for the process's life: syncfs reports
// the writeback errors since the descriptor was opened.
func openSyncFS(dir string) (func() error, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return func() error {
		for {
			err := unix.Syncfs(int(f.Fd()))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return os.NewSyscallError("syncfs", err)
			}
			return nil
		}
	}, nil
}

var syncfsErrors = sync.OnceValue(func() bool {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return false
	}
	var rel []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(rel), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 8
})

func syncfsReportsErrors() bool { return syncfsErrors() }
