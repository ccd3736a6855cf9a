package localdest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
)

func TestACLStoreDurableAndPerMirror(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	a := dest.ACL{ResourceType: "TOPIC", ResourceName: "t", PatternType: "LITERAL", Principal: "User:a", Host: "*", Operation: "READ", PermissionType: "ALLOW"}
	b := a
	b.Principal = "User:b"
	g := d.ACLGeneration()
	require.NoError(t, d.ReplaceMirrorACLs("m1", []dest.ACL{a}))
	require.NotEqual(t, g, d.ACLGeneration(), "a replacement changes the generation")
	require.NoError(t, d.ReplaceMirrorACLs("m2", []dest.ACL{a, b}))
	require.NoError(t, d.ReplaceMirrorACLs("m1", nil))
	require.NoError(t, d.Close())
	d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	require.Empty(t, d.MirrorACLs("m1"))
	require.Equal(t, []dest.ACL{a, b}, d.MirrorACLs("m2"))
	require.Equal(t, []dest.ACL{a, b}, d.ACLs())
}
