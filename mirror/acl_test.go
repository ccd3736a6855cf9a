package mirror

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
)

func createACL(t *testing.T, cl *kgo.Client, rt kmsg.ACLResourceType, name, principal string, op kmsg.ACLOperation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Zero(t, resp.Results[0].ErrorCode, "%v", resp.Results[0].ErrorMessage)
}

func deleteACL(t *testing.T, cl *kgo.Client, rt kmsg.ACLResourceType, name string) {
	t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = rt, &name, kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Filters = append(req.Filters, f)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Zero(t, resp.Results[0].ErrorCode)
}

// TestACLSyncFromKafka: the ACLs of a kfake source selected by acls.include are copied
// to the destination by the metadata sync (sarama DescribeAcls); an ACL removed on the
// source is removed on the destination at the next cycle; others are never copied.
func TestACLSyncFromKafka(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	createACL(t, cl, kmsg.ACLResourceTypeTopic, "orders", "User:alice", kmsg.ACLOperationRead)
	createACL(t, cl, kmsg.ACLResourceTypeTopic, "orders-dlq", "User:bob", kmsg.ACLOperationWrite)
	createACL(t, cl, kmsg.ACLResourceTypeTopic, "secret", "User:alice", kmsg.ACLOperationRead)
	createACL(t, cl, kmsg.ACLResourceTypeGroup, "g1", "User:alice", kmsg.ACLOperationRead)

	dest := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { require.NoError(t, dest.Close()) })
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil }))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers:   strings.Join(src.ListenAddrs(), ","),
		"mirror.acls.include": "TOPIC;orders.*;*;ALLOW,GROUP;g.*;READ;ALLOW;User:alice"}))
	require.NoError(t, m.Sync(ctx))
	want := []ACL{
		{ResourceType: "GROUP", ResourceName: "g1", PatternType: "LITERAL", Principal: "User:alice", Host: "*", Operation: "READ", PermissionType: "ALLOW"},
		{ResourceType: "TOPIC", ResourceName: "orders", PatternType: "LITERAL", Principal: "User:alice", Host: "*", Operation: "READ", PermissionType: "ALLOW"},
		{ResourceType: "TOPIC", ResourceName: "orders-dlq", PatternType: "LITERAL", Principal: "User:bob", Host: "*", Operation: "WRITE", PermissionType: "ALLOW"},
	}
	require.Equal(t, want, dest.MirrorACLs("k"), "secret is not included")

	deleteACL(t, cl, kmsg.ACLResourceTypeTopic, "orders-dlq")
	require.NoError(t, m.Sync(ctx))
	require.Equal(t, []ACL{want[0], want[1]}, dest.MirrorACLs("k"), "a removal on the source propagates")
	require.Equal(t, []ACL{want[0], want[1]}, dest.ACLs())
}

// TestACLStoreDurableAndPerMirror: a file destination keeps the ACLs of each mirror
// across a reopen; replacing one mirror's set leaves the other's alone.
