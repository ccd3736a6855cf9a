package localdest

import (
	"path/filepath"
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

func TestLocalACLsDurableAndApartFromSynced(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	local := dest.ACL{ResourceType: "TOPIC", ResourceName: "t", PatternType: "LITERAL", Principal: "User:alice", Host: "*", Operation: "READ", PermissionType: "ALLOW"}
	synced := local
	synced.Principal = "User:bob"
	both := local
	both.Operation = "WRITE"

	g := d.ACLGeneration()
	require.NoError(t, d.CreateLocalACLs([]dest.ACL{local, both, local}))
	require.NotEqual(t, g, d.ACLGeneration(), "a create changes the generation")
	g = d.ACLGeneration()
	require.NoError(t, d.CreateLocalACLs([]dest.ACL{local}))
	require.Equal(t, g, d.ACLGeneration(), "creating an ACL already there changes nothing")

	// The mirror's sync replaces its own set only: the local ACLs stay.
	require.NoError(t, d.ReplaceMirrorACLs("m1", []dest.ACL{synced, both}))
	require.NoError(t, d.ReplaceMirrorACLs("m1", []dest.ACL{synced, both}))
	require.Equal(t, dest.SortACLs([]dest.ACL{local, both}), d.LocalACLs())
	require.Equal(t, dest.SortACLs([]dest.ACL{local, both, synced}), d.ACLs(), "effective = local + synced, no duplicates")
	require.NoError(t, d.ReplaceMirrorACLs("m1", nil))
	require.Equal(t, dest.SortACLs([]dest.ACL{local, both}), d.ACLs(), "a sync that drops its ACLs leaves the local ones")
	require.NoError(t, d.ReplaceMirrorACLs("m1", []dest.ACL{synced, both}))

	// A local delete removes local ACLs only, and reports what it removed.
	g = d.ACLGeneration()
	removed, err := d.DeleteLocalACLs(func(a dest.ACL) bool { return a.Operation == "WRITE" || a.Principal == "User:bob" })
	require.NoError(t, err)
	require.Equal(t, []dest.ACL{both}, removed)
	require.NotEqual(t, g, d.ACLGeneration())
	require.Equal(t, []dest.ACL{local}, d.LocalACLs())
	require.Equal(t, map[string][]dest.ACL{"m1": dest.SortACLs([]dest.ACL{synced, both})}, d.SyncedACLs())
	removed, err = d.DeleteLocalACLs(func(dest.ACL) bool { return false })
	require.NoError(t, err)
	require.Empty(t, removed)

	require.NoError(t, d.Close())
	d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, []dest.ACL{local}, d.LocalACLs(), "local ACLs survive a restart")
	require.Equal(t, dest.SortACLs([]dest.ACL{local, both, synced}), d.ACLs())
}

func TestLocalACLsWriteFailureChangesNothing(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	a := dest.ACL{ResourceType: "GROUP", ResourceName: "g", PatternType: "PREFIXED", Principal: "User:a", Host: "*", Operation: "READ", PermissionType: "ALLOW"}
	require.NoError(t, d.CreateLocalACLs([]dest.ACL{a}))
	g := d.ACLGeneration()
	d.aclStore().root = filepath.Join(root, "missing", "dir") // every write now fails
	b := a
	b.ResourceName = "h"
	require.Error(t, d.CreateLocalACLs([]dest.ACL{b}))
	_, err = d.DeleteLocalACLs(func(dest.ACL) bool { return true })
	require.Error(t, err)
	require.Equal(t, []dest.ACL{a}, d.LocalACLs())
	require.Equal(t, g, d.ACLGeneration())
}
