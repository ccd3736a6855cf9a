// Package atomicfile replaces small files so that a crash leaves either the
// old content or the new one, never a mix: the data goes to a temporary file
// in the same directory, which is fsynced, renamed over the target, and the
// directory is fsynced so the rename survives.
//
// It is used by the file-backed stores of the library (fetcher.FileLog's
// metadata files, internal/statelog's checkpoint, coordinator.FileStore's meta
// file, mirror/localdest's JSON files). The temporary file is named
// "<name>.<random>.tmp": a reader of the directory can recognise (and remove)
// one left behind by a crash by its ".tmp" suffix.
//
// Errors are the os package's (*os.PathError, *os.LinkError), unwrapped:
// callers add their package prefix.
package atomicfile

import (
	"os"
	"path/filepath"
)

// TempSuffix ends the name of every temporary file WriteFile creates.
const TempSuffix = ".tmp"

// WriteFile replaces dir/name with data: a temporary file in dir, fsync,
// rename over dir/name, fsync of dir. On error the temporary file is removed
// and dir/name is unchanged, unless the error came from the final fsync of
// dir, when the new content may or may not survive a crash.
func WriteFile(dir, name string, data []byte, perm os.FileMode) error {
	return replace(dir, name, data, perm, true)
}

// ReplaceUnsynced replaces dir/name with data as WriteFile does but without
// its fsyncs: a temporary file, then a rename over dir/name. Readers never
// see a mix of old and new content, but a crash may leave the old content,
// the new one, or (on a file system that does not write a renamed file's data
// before the rename) an empty or partial file. It is for files that recovery
// rebuilds from other data, where a write that costs two fsyncs buys nothing.
func ReplaceUnsynced(dir, name string, data []byte, perm os.FileMode) error {
	return replace(dir, name, data, perm, false)
}

func replace(dir, name string, data []byte, perm os.FileMode, durable bool) error {
	tmp, err := os.CreateTemp(dir, name+".*"+TempSuffix)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// SyncDir fsyncs the directory dir, making the creations, renames and
// removals of its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
