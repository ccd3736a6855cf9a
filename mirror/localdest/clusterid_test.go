package localdest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
)

// A root keeps the cluster id it was created with: reopening it under another id is
// refused with a typed error and changes nothing.
func TestReopenUnderAnotherClusterIDRefused(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "site-a", fetcher.FileLogOptions{})
	require.NoError(t, err)
	require.NoError(t, d.Close())

	_, err = OpenFile(root, "site-b", fetcher.FileLogOptions{})
	require.ErrorIs(t, err, ErrClusterIDMismatch)
	var me *ClusterIDMismatchError
	require.True(t, errors.As(err, &me))
	require.Equal(t, ClusterIDMismatchError{Root: root, Stored: "site-a", Given: "site-b"}, *me)

	d, err = OpenFile(root, "site-a", fetcher.FileLogOptions{}) // the refusal left the root as it was
	require.NoError(t, err)
	require.Equal(t, "site-a", d.ClusterID())
	require.NoError(t, d.Close())

	d, err = OpenFile(root, "", fetcher.FileLogOptions{}) // not given: the stored id
	require.NoError(t, err)
	require.Equal(t, "site-a", d.ClusterID())
	require.NoError(t, d.Close())
}
