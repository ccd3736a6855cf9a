package twosites

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
)

// certPKI is a CA with the certificates the authorization tests use, as PEM
// files (each a certificate followed by its unencrypted PKCS#8 key, the
// keystore form Kafka's PEM support and mirrorctl both read).
type certPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
	pool   *x509.CertPool
}

func newTestPKI(t *testing.T) *certPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kmirror test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &certPKI{dir: t.TempDir(), ca: ca, caKey: key, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = filepath.Join(p.dir, "ca.pem")
	require.NoError(t, os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return p
}

// issue writes a certificate for CN=cn (a server one for 127.0.0.1 when
// server) and returns its file and the loaded pair.
func (p *certPKI) issue(t *testing.T, cn string, server bool) (string, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	data := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})...)
	file := filepath.Join(p.dir, cn+".pem")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	pair, err := tls.X509KeyPair(data, data)
	require.NoError(t, err)
	return file, pair
}

// clientProps writes the client properties (Kafka's and mirrorctl's
// --command-config) of a TLS client with keystore (none: no certificate).
func (p *certPKI) clientProps(t *testing.T, name, keystore string) string {
	t.Helper()
	props := "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=" + p.caFile + "\n"
	if keystore != "" {
		props += "ssl.keystore.type=PEM\nssl.keystore.location=" + keystore + "\n"
	}
	file := filepath.Join(p.dir, name+".properties")
	require.NoError(t, os.WriteFile(file, []byte(props), 0o600))
	return file
}

// tlsClient is a kgo client of addr over TLS with cert (nil: none).
func (p *certPKI) tlsClient(t *testing.T, addr string, cert *tls.Certificate, opts ...kgo.Opt) *kgo.Client {
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return kgoClient(t, addr, append(opts, kgo.DialTLSConfig(cfg))...)
}

// ctlAs runs mirrorctl against s with the client properties props.
func ctlAs(s *site, props string, args ...string) (stdout, stderr string, code int) {
	saved := s.ctlArgs
	s.ctlArgs = []string{"--command-config", props}
	defer func() { s.ctlArgs = saved }()
	return s.ctlCode(args...)
}

// aclTool runs Kafka 4.4's kafka-acls (org.apache.kafka.tools.AclCommand) against
// addr as props.
func aclTool(t *testing.T, addr, props string, args ...string) string {
	t.Helper()
	return runJava(t, "org.apache.kafka.tools.AclCommand", "", append([]string{"--bootstrap-server", addr, "--command-config", props}, args...)...)
}

// TestAuthorizationOverTheWire: a kmirrord site with -enforce-acls on a
// mutual-TLS listener, principals by client certificate (User:CN=admin a
// super user, User:CN=alice, and User:CN=mallory, granted nothing):
//   - Kafka's kafka-acls adds topic, group and cluster ACLs for alice that
//     then take effect on the data plane, lists them, and removes them;
//   - a CreateAcls of the CLUSTER_MIRROR resource type (which kafka-acls
//     cannot name; a kgo request, then mirrorctl --remove-acl/--add-acl)
//     lets alice describe mirror m1 only: her describe of m2, her stop of
//     m1 and her own grants are refused (CLUSTER_MIRROR_AUTHORIZATION_FAILED,
//     CLUSTER_AUTHORIZATION_FAILED) and m1 keeps mirroring;
//   - mallory (like an anonymous client: TestAnonymousCannotRunMirrorRPCs of
//     kmirrord) cannot create, start, stop or delete mirrors, nor call
//     WriteMirrorStates or BumpLeaderEpochs, and nothing changes.
func TestAuthorizationOverTheWire(t *testing.T) {
	pki := newTestPKI(t)
	serverPEM, _ := pki.issue(t, "site-a", true)
	adminPEM, adminCert := pki.issue(t, "admin", false)
	alicePEM, aliceCert := pki.issue(t, "alice", false)
	adminProps := pki.clientProps(t, "admin", adminPEM)
	aliceProps := pki.clientProps(t, "alice", alicePEM)
	// -tls-client-ca requires a certificate of every client: the
	// unauthorized client is mallory, authenticated and granted nothing.
	malloryPEM, malloryCert := pki.issue(t, "mallory", false)
	anonProps := pki.clientProps(t, "mallory", malloryPEM)

	src := newSite(t, "SRC")
	createTopic(t, src.addr, "orders", 1)
	produceKgo(t, src.addr, "orders", 1, 5, "src")

	a := newSite(t, "A", "-enforce-acls", "-super-users", "User:CN=admin",
		"-tls-cert", serverPEM, "-tls-key", serverPEM, "-tls-client-ca", pki.caFile)
	a.ctlArgs = []string{"--command-config", adminProps}
	a.createMirror("m1", src)
	a.createMirror("m2", src)
	a.ctl("--start", "--mirror", "m1", "--topics", "orders")
	a.waitPartitions("m1", "orders", 1, "caught up", func(p partitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == 5
	})
	adminCl := pki.tlsClient(t, a.addr, &adminCert)
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "local", 1, 1
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	require.Equal(t, int16(0), request[*kmsg.CreateTopicsResponse](t, adminCl, ct).Topics[0].ErrorCode)

	alice := pki.tlsClient(t, a.addr, &aliceCert)
	anon := pki.tlsClient(t, a.addr, &malloryCert)
	metadataCode := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("local")
		req.Topics = []kmsg.MetadataRequestTopic{mt}
		return request[*kmsg.MetadataResponse](t, cl, req).Topics[0].ErrorCode
	}
	groupCode := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{"g1"}
		return request[*kmsg.FindCoordinatorResponse](t, cl, req).Coordinators[0].ErrorCode
	}
	clusterCode := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
		req.Resources = []kmsg.DescribeConfigsRequestResource{rr}
		return request[*kmsg.DescribeConfigsResponse](t, cl, req).Resources[0].ErrorCode
	}
	const topicDenied, groupDenied, clusterDenied = 29, 30, 31
	require.Equal(t, int16(topicDenied), metadataCode(alice))
	require.Equal(t, int16(groupDenied), groupCode(alice))
	require.Equal(t, int16(clusterDenied), clusterCode(alice))

	// Kafka's own tool, as the super user.
	aclTool(t, a.addr, adminProps, "--add", "--allow-principal", "User:CN=alice", "--operation", "Read", "--topic", "local", "--group", "g1")
	aclTool(t, a.addr, adminProps, "--add", "--allow-principal", "User:CN=alice", "--operation", "DescribeConfigs", "--cluster")
	require.Equal(t, int16(0), metadataCode(alice), "the topic ACL takes effect")
	require.Equal(t, int16(0), groupCode(alice), "the group ACL takes effect")
	require.Equal(t, int16(0), clusterCode(alice), "the cluster ACL takes effect")
	require.Equal(t, int16(topicDenied), metadataCode(anon), "for alice only")
	list := aclTool(t, a.addr, adminProps, "--list")
	for _, want := range []string{"resourceType=TOPIC, name=local", "resourceType=GROUP, name=g1", "resourceType=CLUSTER, name=kafka-cluster",
		"principal=User:CN=alice, host=*, operation=READ, permissionType=ALLOW", "operation=DESCRIBE_CONFIGS"} {
		require.Contains(t, list, want)
	}
	aclTool(t, a.addr, adminProps, "--remove", "--force", "--topic", "local", "--group", "g1", "--cluster")
	require.NotContains(t, aclTool(t, a.addr, adminProps, "--list"), "User:CN=alice")
	require.Equal(t, int16(topicDenied), metadataCode(alice), "the removed topic ACL no longer applies")
	require.Equal(t, int16(groupDenied), groupCode(alice))
	require.Equal(t, int16(clusterDenied), clusterCode(alice))

	// Alice may not create ACLs herself.
	grant := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(admin.ResourceClusterMirror), "m1", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:CN=alice", "*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow
	grant.Creations = []kmsg.CreateACLsRequestCreation{c}
	require.Equal(t, int16(clusterDenied), request[*kmsg.CreateACLsResponse](t, alice, grant).Results[0].ErrorCode)
	_, errOut, code := ctlAs(a, aliceProps, "--describe", "--mirror", "m1")
	require.Equal(t, 1, code, "before the grant: %s", errOut)
	require.Contains(t, errOut, "CLUSTER_MIRROR_AUTHORIZATION_FAILED")

	// DESCRIBE on CLUSTER_MIRROR m1, created over the wire by the super user.
	require.Equal(t, int16(0), request[*kmsg.CreateACLsResponse](t, adminCl, grant).Results[0].ErrorCode)
	out, errOut, code := ctlAs(a, aliceProps, "--describe", "--mirror", "m1")
	require.Equal(t, 0, code, "alice describes m1: %s", errOut)
	require.Contains(t, out, "orders")
	_, errOut, code = ctlAs(a, aliceProps, "--describe", "--mirror", "m2")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "CLUSTER_MIRROR_AUTHORIZATION_FAILED")
	_, errOut, code = ctlAs(a, aliceProps, "--stop", "--mirror", "m1", "--topics", "orders")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "CLUSTER_MIRROR_AUTHORIZATION_FAILED")
	_, errOut, code = ctlAs(a, aliceProps, "--add-acl", "--mirror", "m2", "--principal", "User:CN=alice", "--operation", "Describe")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "CLUSTER_AUTHORIZATION_FAILED", "alice may not grant herself more")

	// mirrorctl's ACL verbs: removing the grant refuses alice again, adding
	// it back lets her describe m1 again.
	require.Contains(t, a.ctl("--remove-acl", "--mirror", "m1", "--principal", "User:CN=alice", "--operation", "Describe"), "Removed ACL ALLOW DESCRIBE")
	_, errOut, code = ctlAs(a, aliceProps, "--describe", "--mirror", "m1")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "CLUSTER_MIRROR_AUTHORIZATION_FAILED")
	require.Contains(t, a.ctl("--add-acl", "--mirror", "m1", "--principal", "User:CN=alice", "--operation", "Describe"), "Added ACL ALLOW DESCRIBE")
	_, errOut, code = ctlAs(a, aliceProps, "--describe", "--mirror", "m1")
	require.Equal(t, 0, code, errOut)

	// Mallory: every mirror change and instance RPC refused.
	cfgFile := filepath.Join(t.TempDir(), "m3.properties")
	require.NoError(t, os.WriteFile(cfgFile, []byte("bootstrap.servers="+src.addr+"\n"), 0o600))
	for _, args := range [][]string{
		{"--create", "--mirror", "m3", "--mirror-config", cfgFile},
		{"--start", "--mirror", "m2", "--topics", "orders"},
		{"--stop", "--mirror", "m1", "--topics", "orders"},
		{"--pause", "--mirror", "m1", "--topics", "orders"},
		{"--delete", "--mirror", "m2"},
	} {
		_, errOut, code := ctlAs(a, anonProps, args...)
		require.Equal(t, 1, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "CLUSTER_MIRROR_AUTHORIZATION_FAILED", "%v", args)
	}
	for _, cert := range []*tls.Certificate{&malloryCert, &aliceCert} {
		acl := admin.NewClient(pki.tlsClient(t, a.addr, cert, admin.ClientOpts()...))
		wr := admin.NewPtrWriteMirrorStatesRequest()
		wr.MirrorName = "m1"
		_, err := acl.WriteMirrorStates(t.Context(), wr)
		require.ErrorIs(t, err, &admin.Error{Code: admin.CodeClusterAuthorizationFailed})
		bump := admin.NewPtrBumpLeaderEpochsRequest()
		bt := admin.NewBumpLeaderEpochsRequestTopic()
		bt.TopicName = "orders"
		bt.Partitions = []admin.BumpLeaderEpochsRequestTopicPartition{{PartitionIndex: 0, MinLeaderEpoch: 1000}}
		bump.Topics = []admin.BumpLeaderEpochsRequestTopic{bt}
		_, err = acl.BumpLeaderEpochs(t.Context(), bump)
		require.ErrorIs(t, err, &admin.Error{Code: admin.CodeClusterAuthorizationFailed})
	}

	// Nothing changed: m1 and m2 only, m1 still mirroring at the same epoch.
	out = a.ctl("--list")
	require.Contains(t, out, "m1")
	require.Contains(t, out, "m2")
	require.NotContains(t, out, "m3")
	ps := a.describe("m1", "orders")
	require.Len(t, ps, 1)
	require.Equal(t, "MIRRORING", ps[0].State)
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("orders")
	md.Topics = []kmsg.MetadataRequestTopic{mt}
	epoch := request[*kmsg.MetadataResponse](t, adminCl, md).Topics[0].Partitions[0].LeaderEpoch
	require.Less(t, epoch, int32(1000), "the refused bump did not raise the leader epoch")
}
