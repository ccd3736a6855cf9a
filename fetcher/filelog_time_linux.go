package fetcher

import "syscall"

// fileTime is a file timestamp of the file system's clock, in nanoseconds.
type fileTime struct{ ns int64 }

func (t fileTime) zero() bool             { return t.ns == 0 }
func (t fileTime) before(u fileTime) bool { return t.ns < u.ns }

// changeTime is path's status change time (ctime): any write, truncation
// or timestamp change of the file moves it, and no call sets it back.
func changeTime(path string) (fileTime, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileTime{}, false
	}
	return fileTime{st.Ctim.Nano()}, true
}

// modTime is path's modification time (mtime).
func modTime(path string) (fileTime, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileTime{}, false
	}
	return fileTime{st.Mtim.Nano()}, true
}
