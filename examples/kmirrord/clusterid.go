package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/kmirror/kmirror/records"
)

// ClusterIDFile is the file in the data directory that holds the site's
// cluster id, written on first start.
const ClusterIDFile = "kmirrord-cluster-id"

// Errors about the cluster id.
var (
	// ErrClusterIDMismatch: -cluster-id differs from the id the data
	// directory was created with (a usage error: exit code 2).
	ErrClusterIDMismatch = errors.New("kmirrord: -cluster-id differs from the data directory's cluster id")
	// ErrBadClusterIDFile: the stored id is empty or malformed.
	ErrBadClusterIDFile = errors.New("kmirrord: invalid cluster id file")
)

// validClusterID accepts a non-empty id of at most 255 printable,
// non-space characters.
func validClusterID(id string) error {
	if id == "" || len(id) > 255 {
		return fmt.Errorf("cluster id must have 1 to 255 characters, got %d", len(id))
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("cluster id %q contains a space or unprintable character", id)
		}
	}
	return nil
}

// readClusterID returns the id stored in dir ("" when dir or the file does
// not exist yet).
func readClusterID(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, ClusterIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("kmirrord: read cluster id: %w", err)
	}
	id := strings.TrimSuffix(string(b), "\n")
	if err := validClusterID(id); err != nil {
		return "", fmt.Errorf("%w %s: %v", ErrBadClusterIDFile, filepath.Join(dir, ClusterIDFile), err)
	}
	return id, nil
}

// chooseClusterID returns the id to open the site with: the stored one
// (which a different flag contradicts), else the flag, else a random one.
func chooseClusterID(flagID, stored string) (string, error) {
	switch {
	case stored != "" && flagID != "" && flagID != stored:
		return "", &usageError{err: fmt.Errorf("%w: the data directory holds %q, -cluster-id is %q", ErrClusterIDMismatch, stored, flagID)}
	case stored != "":
		return stored, nil
	case flagID != "":
		return flagID, nil
	}
	var u records.UUID
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("kmirrord: random cluster id: %w", err)
	}
	return u.String(), nil
}

// persistClusterID runs with the data directory locked: it checks that the
// stored id is still the one read before the lock (another first start may
// have won the race) and writes id when nothing was stored.
func persistClusterID(dir, id, before string) error {
	now, err := readClusterID(dir)
	if err != nil {
		return err
	}
	if now != before {
		return fmt.Errorf("%w: the data directory's id changed to %q while starting", ErrClusterIDMismatch, now)
	}
	if now != "" {
		return nil
	}
	return writeFileAtomic(dir, ClusterIDFile, []byte(id+"\n"))
}

// writeFileAtomic replaces dir/name: a temporary file, fsync, rename, fsync
// of dir.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("kmirrord: write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("kmirrord: write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("kmirrord: write %s: %w", name, err)
	}
	df, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("kmirrord: sync %s: %w", dir, err)
	}
	defer df.Close()
	if err := df.Sync(); err != nil {
		return fmt.Errorf("kmirrord: sync %s: %w", dir, err)
	}
	return nil
}
