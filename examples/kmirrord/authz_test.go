package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/dataplane"
)

// TestEveryServedKeyHasAnAuthzRule: every key a full kmirrord -enforce-acls
// listener advertises in ApiVersions (the mirror RPCs, the data plane's keys,
// DescribeConfigs, and any key added later) has an authorization rule;
// ApiVersions, SaslHandshake and SaslAuthenticate are the only keys allowed
// without one, and they are named explicitly.
func TestEveryServedKeyHasAnAuthzRule(t *testing.T) {
	require.Equal(t, map[int16]string{18: "ApiVersions", 17: "SaslHandshake", 36: "SaslAuthenticate"}, unauthorizedKeys)
	for _, sasl := range []bool{false, true} {
		args := []string{"-listen", "127.0.0.1:0", "-data", filepath.Join(t.TempDir(), "site"), "-enforce-acls"}
		if sasl {
			args = append(args, "-sasl-mechanisms", "SCRAM-SHA-256", "-add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]")
		}
		checkServedKeys(t, startRun(t, args...), sasl)
	}
}

// checkServedKeys asks d's ApiVersions (allowed before authentication) and
// requires a rule for every key but the unauthorized ones.
func checkServedKeys(t *testing.T, d *daemonRun, sasl bool) {
	t.Helper()
	defer d.stop(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	require.NoError(t, err)
	keys := resp.(*kmsg.ApiVersionsResponse).ApiKeys
	require.NotEmpty(t, keys)
	var mirrorRPCs, acls, saslKeys int
	for _, k := range keys {
		if _, ok := unauthorizedKeys[k.ApiKey]; ok {
			saslKeys++
			continue
		}
		rule, ok := authzRule(k.ApiKey)
		require.True(t, ok, "key %d (%s) is served without an authorization rule", k.ApiKey, kmsg.NameForKey(k.ApiKey))
		require.NotEmpty(t, rule)
		if _, ok := admin.RequirementFor(k.ApiKey); ok {
			mirrorRPCs++
		}
		switch kmsg.Key(k.ApiKey) {
		case kmsg.CreateACLs, kmsg.DeleteACLs, kmsg.DescribeACLs:
			acls++
		}
	}
	require.Equal(t, 13, mirrorRPCs, "every mirror RPC is advertised")
	require.Equal(t, 3, acls, "the ACL RPCs are served")
	if sasl {
		require.Equal(t, 3, saslKeys, "ApiVersions, SaslHandshake, SaslAuthenticate")
	}
}

// TestUnruledKeyRefusesToStart: -enforce-acls does not serve a key nothing
// authorizes.
func TestUnruledKeyRefusesToStart(t *testing.T) {
	require.NoError(t, checkAuthzRules([]admin.ExtraAPI{{Key: int16(kmsg.Fetch)}, {Key: int16(kmsg.DescribeConfigs)}}))
	err := checkAuthzRules([]admin.ExtraAPI{{Key: int16(kmsg.Fetch)}, {Key: int16(kmsg.AlterPartitionAssignments)}, {Key: int16(kmsg.ElectLeaders)}, {Key: int16(kmsg.DescribeUserSCRAMCredentials)}})
	require.ErrorContains(t, err, "[43 45]")
}

// TestAnonymousCannotRunMirrorRPCs: with -enforce-acls an anonymous client
// gets CLUSTER_MIRROR_AUTHORIZATION_FAILED for the mirror RPCs and
// CLUSTER_AUTHORIZATION_FAILED for the instance RPCs, and nothing is
// created; without it the same create succeeds.
func TestAnonymousCannotRunMirrorRPCs(t *testing.T) {
	for _, enforce := range []bool{true, false} {
		args := []string{"-listen", "127.0.0.1:0", "-data", filepath.Join(t.TempDir(), "site")}
		if enforce {
			args = append(args, "-enforce-acls")
		}
		d := startRun(t, args...)
		kcl, err := kgo.NewClient(append(admin.ClientOpts(), kgo.SeedBrokers(d.addr))...)
		require.NoError(t, err)
		cl := admin.NewClient(kcl)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)

		mirrorDenied, clusterDenied := admin.CodeClusterMirrorAuthorizationFailed, admin.CodeClusterAuthorizationFailed
		cr := admin.NewPtrCreateClusterMirrorRequest()
		cr.MirrorName = "m1"
		cr.Configs = []admin.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: kmsg.StringPtr("127.0.0.1:1")}}
		_, err = cl.CreateClusterMirror(ctx, cr)
		if !enforce {
			require.NoError(t, err)
			cancel()
			kcl.Close()
			d.stop(t)
			continue
		}
		require.ErrorIs(t, err, &admin.Error{Code: mirrorDenied})

		st := admin.NewPtrStopMirrorTopicsRequest()
		st.MirrorName = "m1"
		_, err = cl.StopMirrorTopics(ctx, st)
		require.ErrorIs(t, err, &admin.Error{Code: mirrorDenied})
		del := admin.NewPtrDeleteClusterMirrorsRequest()
		del.MirrorName = "m1"
		_, err = cl.DeleteClusterMirrors(ctx, del)
		require.ErrorIs(t, err, &admin.Error{Code: mirrorDenied})
		wr := admin.NewPtrWriteMirrorStatesRequest()
		wr.MirrorName = "m1"
		_, err = cl.WriteMirrorStates(ctx, wr)
		require.ErrorIs(t, err, &admin.Error{Code: clusterDenied})
		_, err = cl.BumpLeaderEpochs(ctx, admin.NewPtrBumpLeaderEpochsRequest())
		require.ErrorIs(t, err, &admin.Error{Code: clusterDenied})
		_, err = cl.ReadMirrorStates(ctx, admin.NewPtrReadMirrorStatesRequest())
		require.ErrorIs(t, err, &admin.Error{Code: clusterDenied})
		cancel()
		kcl.Close()
		d.stop(t)

		// The refused create left nothing: the same site, restarted with
		// the anonymous client as a super user, has no mirror.
		d = startRun(t, append(args, "-super-users", "User:ANONYMOUS")...)
		kcl, err = kgo.NewClient(append(admin.ClientOpts(), kgo.SeedBrokers(d.addr))...)
		require.NoError(t, err)
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
		list, err := admin.NewClient(kcl).ListClusterMirrors(ctx, admin.NewPtrListClusterMirrorsRequest())
		cancel()
		kcl.Close()
		require.NoError(t, err)
		require.Empty(t, list.Mirrors)
		d.stop(t)
	}
}

// TestMirrorRPCACLHostsAndLocalFile: the mirror RPCs' decision matches the
// binding's host against the client's address, and the site's own ACLs are
// read from the data directory at start: ALL on CLUSTER_MIRROR m1 for the
// anonymous client from another host does not let it create m1; from
// 127.0.0.1 it does (and only m1).
func TestMirrorRPCACLHostsAndLocalFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	for _, tc := range []struct {
		host    string
		allowed bool
	}{{"10.9.9.9", false}, {"127.0.0.1", true}} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
		acls := []mirror.ACL{{ResourceType: dataplane.ResourceClusterMirror, ResourceName: "m1", PatternType: dataplane.PatternLiteral,
			Principal: dataplane.AnonymousPrincipal, Host: tc.host, Operation: dataplane.OpAll, PermissionType: dataplane.PermissionAllow}}
		b, err := json.Marshal(acls)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "kmirror-local-acls.json"), b, 0o600))

		d := startRun(t, "-listen", "127.0.0.1:0", "-data", dir, "-cluster-id", "site", "-enforce-acls")
		kcl, err := kgo.NewClient(append(admin.ClientOpts(), kgo.SeedBrokers(d.addr))...)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for _, name := range []string{"m1", "m2"} {
			cr := admin.NewPtrCreateClusterMirrorRequest()
			cr.MirrorName = name
			cr.Configs = []admin.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: kmsg.StringPtr("127.0.0.1:1")}}
			_, err = admin.NewClient(kcl).CreateClusterMirror(ctx, cr)
			if tc.allowed && name == "m1" {
				require.NoError(t, err, "ACL from %s", tc.host)
			} else {
				require.ErrorIs(t, err, &admin.Error{Code: admin.CodeClusterMirrorAuthorizationFailed}, "%s, ACL from %s", name, tc.host)
			}
		}
		cancel()
		kcl.Close()
		d.stop(t)
	}
}
