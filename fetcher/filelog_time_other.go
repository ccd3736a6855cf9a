//go:build !linux

package fetcher

// fileTime is a file timestamp; elsewhere than on Linux none is read, so
// every segment is CRC-checked whole at open.
type fileTime struct{ ns int64 }

func (t fileTime) zero() bool             { return t.ns == 0 }
func (t fileTime) before(u fileTime) bool { return t.ns < u.ns }

func changeTime(string) (fileTime, bool) { return fileTime{}, false }

func modTime(string) (fileTime, bool) { return fileTime{}, false }
