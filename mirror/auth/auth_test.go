package auth

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/admin/scram"
)

func TestStorePersistsKeysNotPasswords(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	require.NoError(t, err)
	ch, err := ParseAddScram(`SCRAM-SHA-512=[name=alice,password="pa,ss]word",iterations=8192]`)
	require.NoError(t, err)
	require.NoError(t, s.Apply([]Change{ch}))
	data, err := os.ReadFile(filepath.Join(dir, CredentialsFile))
	require.NoError(t, err)
	require.NotContains(t, string(data), "pa,ss]word")
	st, err := os.Stat(filepath.Join(dir, CredentialsFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	s2, err := OpenStore(dir)
	require.NoError(t, err)
	c, found, err := s2.ScramCredential(scram.SHA512, "alice")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, 8192, c.Iterations)
	ok, err := c.VerifyPassword("pa,ss]word")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = c.VerifyPassword("other")
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, s2.Apply([]Change{{User: "alice", Mechanism: scram.SHA512}}))
	s3, err := OpenStore(dir)
	require.NoError(t, err)
	require.Empty(t, s3.Users())
}

func TestOpenStoreRefusesBadFiles(t *testing.T) {
	for name, content := range map[string]string{
		"corrupt":    "{",
		"newer":      `{"version":2,"users":{}}`,
		"mechanism":  `{"version":1,"users":{"a":{"SCRAM-MD5":{"salt":"AA==","iterations":4096}}}}`,
		"iterations": `{"version":1,"users":{"a":{"SCRAM-SHA-256":{"salt":"AA==","iterations":99999999}}}}`,
		"short keys": `{"version":1,"users":{"a":{"SCRAM-SHA-256":{"salt":"AA==","iterations":4096,"stored_key":"AA==","server_key":"AA=="}}}}`,
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, CredentialsFile), []byte(content), 0o600))
		_, err := OpenStore(dir)
		require.ErrorIs(t, err, ErrStore, name)
	}
}

func TestParseAddScramErrors(t *testing.T) {
	for _, s := range []string{
		"SCRAM-MD5=[name=a,password=b]",
		"SCRAM-SHA-256=name=a,password=b",
		"SCRAM-SHA-256=[name=a]",
		"SCRAM-SHA-256=[name=a,password=b,iterations=10]",
		"SCRAM-SHA-256=[name=a,password=b,iterations=100000]",
		"SCRAM-SHA-256=[name=a,password=b,salt=x]",
		`SCRAM-SHA-256=[name=a,password="b]`,
		"SCRAM-SHA-256=[name=a,name=b,password=c]",
	} {
		_, err := ParseAddScram(s)
		require.ErrorIs(t, err, ErrAddScram, s)
	}
}

// site serves the store's APIs and SCRAM log-ins on one server.
func site(t *testing.T, s *Store, authorize Authorize) string {
	srv, err := admin.NewServer(admin.ServerConfig{Handler: admin.UnimplementedHandler{}, Extra: s.APIs(authorize),
		OnError: func(err error) { t.Log(err) }, SASL: &admin.SASLConfig{Mechanisms: []string{admin.MechanismScramSHA256, admin.MechanismScramSHA512}, Credentials: s}})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// client returns the seed broker of a client logging in as user (requests to
// it go straight to the site, with no metadata round trip).
func client(t *testing.T, addr, user, pass string) *kgo.Broker {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		kgo.SASL(kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl.SeedBrokers()[0]
}

func upsert(t *testing.T, m scram.Mechanism, name, password string, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	salt := []byte("0123456789abcdef")
	salted, err := m.SaltedPassword(password, salt, int(iterations))
	require.NoError(t, err)
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, m.Type, iterations, salt, salted
	return u
}

func TestAlterThenLogIn(t *testing.T) {
	s, err := OpenStore(t.TempDir())
	require.NoError(t, err)
	boot, err := ParseAddScram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
	require.NoError(t, err)
	require.NoError(t, s.Apply([]Change{boot}))
	var asked []string
	addr := site(t, s, func(ctx context.Context, op string) bool {
		rc, ok := admin.RequestContextFrom(ctx)
		require.True(t, ok)
		asked = append(asked, op)
		return rc.Principal == "User:admin"
	})
	ctx := context.Background()
	adm := client(t, addr, "admin", "admin-secret")

	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		upsert(t, scram.SHA512, "alice", "alice-secret", 4096),
		upsert(t, scram.SHA256, "alice", "alice-secret", 4096),
		upsert(t, scram.SHA512, "bob", "x", 100), // too few iterations
		upsert(t, scram.SHA512, "carol", "x", 4096),
		upsert(t, scram.SHA512, "carol", "y", 4096), // twice
		upsert(t, scram.SHA512, "", "x", 4096),
		upsert(t, scram.SHA512, strings.Repeat("u", scram.MaxUsername+1), "x", 4096),
	}
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "dave", scram.SHA256.Type
	bad := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	bad.Name, bad.Mechanism = "erin", 9
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del, bad}
	resp, err := alter.RequestWith(ctx, adm)
	require.NoError(t, err)
	codes := map[string]int16{}
	for _, r := range resp.Results {
		codes[r.User] = r.ErrorCode
	}
	require.Equal(t, map[string]int16{"alice": 0, "bob": kerr.UnacceptableCredential.Code, "carol": kerr.DuplicateResource.Code,
		"": kerr.UnacceptableCredential.Code, strings.Repeat("u", scram.MaxUsername+1): kerr.UnacceptableCredential.Code, "dave": kerr.ResourceNotFound.Code, "erin": kerr.UnsupportedSaslMechanism.Code}, codes)

	// alice logs in; bob and carol were not created.
	_, err = kmsg.NewPtrDescribeUserSCRAMCredentialsRequest().RequestWith(ctx, client(t, addr, "alice", "alice-secret"))
	require.NoError(t, err)
	_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, client(t, addr, "carol", "x"))
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)

	// Describe: admin sees both; alice is not authorized (top-level code).
	d := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	dr, err := d.RequestWith(ctx, adm)
	require.NoError(t, err)
	require.Zero(t, dr.ErrorCode)
	require.Len(t, dr.Results, 2)
	require.Equal(t, "admin", dr.Results[0].User)
	require.Equal(t, "alice", dr.Results[1].User)
	require.Len(t, dr.Results[1].CredentialInfos, 2)
	require.Equal(t, int32(4096), dr.Results[1].CredentialInfos[0].Iterations)
	d.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "alice"}, {Name: "zed"}, {Name: "x"}, {Name: "x"}}
	dr, err = d.RequestWith(ctx, adm)
	require.NoError(t, err)
	codes = map[string]int16{}
	for _, r := range dr.Results {
		codes[r.User] = r.ErrorCode
	}
	require.Equal(t, map[string]int16{"alice": 0, "zed": kerr.ResourceNotFound.Code, "x": kerr.DuplicateResource.Code}, codes)
	dr, err = d.RequestWith(ctx, client(t, addr, "alice", "alice-secret"))
	require.NoError(t, err)
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, dr.ErrorCode)
	// alice may not alter.
	alter = kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert(t, scram.SHA512, "alice", "new", 4096)}
	resp, err = alter.RequestWith(ctx, client(t, addr, "alice", "alice-secret"))
	require.NoError(t, err)
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, resp.Results[0].ErrorCode)
	require.Contains(t, asked, OpAlter)
	require.Contains(t, asked, OpDescribe)
	_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, client(t, addr, "alice", "alice-secret"))
	require.NoError(t, err, "the old password still works")
}
