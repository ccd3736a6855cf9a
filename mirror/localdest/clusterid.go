package localdest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kmirror/kmirror/internal/atomicfile"
)

// clusterIDFile holds the cluster id a file destination's root was first opened with.
const clusterIDFile = "kmirror-cluster-id"

// ErrClusterIDMismatch is matched by the *ClusterIDMismatchError of OpenFile.
var ErrClusterIDMismatch = errors.New("mirror: destination root belongs to another cluster id")

// ClusterIDMismatchError refuses to open a file destination's root under another
// cluster id than the one it was created with: the mirrors, states and group offsets
// under it belong to that cluster, and peers know the site by it.
type ClusterIDMismatchError struct {
	Root, Stored, Given string
}

// Error implements error.
func (e *ClusterIDMismatchError) Error() string {
	return fmt.Sprintf("mirror: destination root %s has cluster id %q, not %q", e.Root, e.Stored, e.Given)
}

// Is matches ErrClusterIDMismatch.
func (e *ClusterIDMismatchError) Is(target error) bool { return target == ErrClusterIDMismatch }

// checkClusterID returns the cluster id of root: the stored one, which a different
// non-empty given id contradicts (*ClusterIDMismatchError); else given, stored from
// now on ("" stores nothing: the id was not given).
func checkClusterID(root, given string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, clusterIDFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if given != "" {
			if err := atomicfile.WriteFile(root, clusterIDFile, []byte(given+"\n"), 0o644); err != nil {
				return "", fmt.Errorf("mirror: store the cluster id of %s: %w", root, err)
			}
		}
		return given, nil
	case err != nil:
		return "", fmt.Errorf("mirror: read the cluster id of %s: %w", root, err)
	}
	stored := strings.TrimSuffix(string(b), "\n")
	if stored == "" {
		return "", fmt.Errorf("mirror: %s is empty", filepath.Join(root, clusterIDFile))
	}
	if given != "" && given != stored {
		return "", &ClusterIDMismatchError{Root: root, Stored: stored, Given: given}
	}
	return stored, nil
}
