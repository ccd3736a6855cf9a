package localdest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/statelog"
)

// ErrLocked is returned by OpenFile when the root is open in
// another LocalDestination, in this process or another. The error also matches
// fetcher.ErrLocked.
var ErrLocked = errors.New("mirror: destination root locked")

// LockFile is the lock file of a file destination's root.
const LockFile = ".lock"

// UnwritableRootError reports a destination root kmirror cannot write. It matches
// fs.ErrPermission (also for a read-only file system) and unwraps to the cause.
type UnwritableRootError struct {
	Root string
	Err  error
}

// Error names the root and the cause.
func (e *UnwritableRootError) Error() string {
	return fmt.Sprintf("mirror: destination root %s is not writable: %v", e.Root, e.Err)
}

// Is makes an *UnwritableRootError match fs.ErrPermission.
func (e *UnwritableRootError) Is(target error) bool { return target == fs.ErrPermission }

// Unwrap returns the cause.
func (e *UnwritableRootError) Unwrap() error { return e.Err }

// lockRoot creates root when missing, checks that it is writable (a probe file is
// created and removed) and takes its lock, held until the returned file is closed.
func lockRoot(root string) (*os.File, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, rootError(root, err)
	}
	probe, err := os.CreateTemp(root, ".kmirror-probe-*")
	if err != nil {
		return nil, rootError(root, err)
	}
	_, werr := probe.Write([]byte("probe"))
	cerr := probe.Close()
	rerr := os.Remove(probe.Name())
	if err := errors.Join(werr, cerr, rerr); err != nil {
		return nil, rootError(root, err)
	}
	lock, err := statelog.LockDir(root, LockFile, ErrLocked)
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("%w (%w)", err, fetcher.ErrLocked)
	}
	if err != nil {
		return nil, rootError(root, err)
	}
	return lock, nil
}

// rootError wraps a failure to use root: permission problems and a read-only file system
// become an *UnwritableRootError.
func rootError(root string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return &UnwritableRootError{Root: root, Err: err}
	}
	return fmt.Errorf("mirror: destination root %s: %w", root, err)
}
