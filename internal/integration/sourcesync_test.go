package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkatest"
	kmirror "github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// TestACLSync syncs ACLs from cluster C (the harness's cluster with an authorizer; A and B
// run without one, and their ACL APIs answer SECURITY_DISABLED) into the destination's
// ACLStore with acls.include, then deletes one on the source: the next sync cycle removes it
// on the destination too. ACLs the rule does not select are never copied.
func TestACLSync(t *testing.T) {
	brokers := kafkatest.ClusterC(t)
	cl := kafkatest.NewClient(t, brokers)
	prefix := kafkatest.TopicName(t)
	read := aclOf("TOPIC", prefix+"-orders", "User:alice", "READ", "ALLOW")
	deny := aclOf("TOPIC", prefix+"-payments", "User:bob", "WRITE", "DENY")
	other := aclOf("GROUP", prefix+"-group", "User:alice", "READ", "ALLOW") // not selected: a GROUP
	t.Cleanup(func() { deleteSourceACLs(t, cl, false, read, deny, other) }) // C keeps ACLs across runs
	createSourceACLs(t, cl, read, deny, other)

	f := startFacade(t, brokers, "acls-from-c", 200*time.Millisecond, map[string]string{
		kmirror.KeyTopicsInclude: prefix + "-none", kmirror.KeyACLsInclude: "TOPIC;" + prefix + "-.*;*;*;*"})
	waitACLs(t, f, []kmirror.ACL{read, deny})
	require.NotContains(t, f.dest.ACLs(), other)

	deleteSourceACLs(t, cl, true, deny)
	waitACLs(t, f, []kmirror.ACL{read})
	require.Equal(t, []kmirror.ACL{read}, f.dest.ACLs())
}

// TestSourceTopicDeleted deletes a mirrored topic on the source: at the next metadata sync
// the partition is FAILED, not retried (RetryAttempt -1), with a message that names the
// deleted topic, and the data mirrored before is kept. It runs against cluster A (Kafka 4.x)
// and cluster C (Kafka 3.9), each when running.
func TestSourceTopicDeleted(t *testing.T) {
	for _, c := range []kafkatest.Cluster{kafkatest.A, kafkatest.C} {
		t.Run(c.String(), func(t *testing.T) {
			if c == kafkatest.A {
				kafkatest.RequireCI(t)
			}
			sourceTopicDeleted(t, kafkatest.Brokers(t, c))
		})
	}
}

func sourceTopicDeleted(t *testing.T, brokers []string) {
	cl := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	kafkatest.CreateTopic(t, cl, topic, 1, 1, nil)
	pc := kafkatest.NewClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, pc, topic, 0, "before-delete", 100, 25)

	f := startFacade(t, brokers, "deleted", 200*time.Millisecond, map[string]string{kmirror.KeyTopicsInclude: topic})
	f.start(t, topic)
	hw := f.waitCaughtUp(t, cl, topic, 0)
	deleteSourceTopic(t, cl, topic)

	var d kmirror.PartitionDescription
	waitFor(t, waitTimeout, "the partition to fail non-retryably", func() (bool, string) {
		d = f.describe(t, topic, 0)
		return d.State == statemachine.Failed && d.RetryAttempt == records.NonRetryable,
			fmt.Sprintf("state %s, retry attempt %d, message %q", d.State, d.RetryAttempt, d.ErrorMessage)
	})
	t.Logf("after the source topic's deletion: %s (retry attempt %d, previous state %s): %s",
		d.State, d.RetryAttempt, d.PreviousState, d.ErrorMessage)
	require.Contains(t, d.ErrorMessage, fmt.Sprintf("source topic %q was deleted", topic))
	l, err := f.dest.Log(topic, 0)
	require.NoError(t, err)
	require.Equal(t, hw, l.LogEndOffset(), "the mirrored data is kept")
}

func aclOf(resourceType, name, principal, op, perm string) kmirror.ACL {
	return kmirror.ACL{ResourceType: resourceType, ResourceName: name, PatternType: "LITERAL",
		Principal: principal, Host: "*", Operation: op, PermissionType: perm}
}

// aclCodes maps kmirror's ACL names to Kafka's protocol enums.
func aclCodes(t testing.TB, a kmirror.ACL) (kmsg.ACLResourceType, kmsg.ACLOperation, kmsg.ACLPermissionType) {
	t.Helper()
	rt, err := kmsg.ParseACLResourceType(a.ResourceType)
	require.NoError(t, err)
	op, err := kmsg.ParseACLOperation(strings.ReplaceAll(a.Operation, "_", ""))
	require.NoError(t, err)
	perm, err := kmsg.ParseACLPermissionType(a.PermissionType)
	require.NoError(t, err)
	return rt, op, perm
}

func createSourceACLs(t testing.TB, cl *kgo.Client, acls ...kmirror.ACL) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		rt, op, perm := aclCodes(t, a)
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, a.ResourceName, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = a.Principal, a.Host, op, perm
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for i, r := range resp.Results {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "create ACL %v: %s", acls[i], msg)
	}
}

// deleteSourceACLs deletes acls on the source; with exact, each must have existed.
func deleteSourceACLs(t testing.TB, cl *kgo.Client, exact bool, acls ...kmirror.ACL) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, a := range acls {
		rt, op, perm := aclCodes(t, a)
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = rt, kmsg.StringPtr(a.ResourceName), kmsg.ACLResourcePatternTypeLiteral
		f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr(a.Principal), kmsg.StringPtr(a.Host), op, perm
		req.Filters = append(req.Filters, f)
	}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for i, r := range resp.Results {
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "delete ACL %v", acls[i])
		if exact {
			require.Len(t, r.MatchingACLs, 1, "delete ACL %v", acls[i])
		}
	}
}

// waitACLs waits until the mirror's ACLs on the destination are exactly want.
func waitACLs(t testing.TB, f *facade, want []kmirror.ACL) {
	t.Helper()
	slices.SortFunc(want, func(a, b kmirror.ACL) int { return strings.Compare(a.String(), b.String()) })
	waitFor(t, waitTimeout, fmt.Sprintf("%d ACLs on the destination", len(want)), func() (bool, string) {
		got := f.dest.MirrorACLs(f.name)
		return slices.Equal(got, want), fmt.Sprintf("have %v", got)
	})
}

func deleteSourceTopic(t testing.TB, cl *kgo.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 60000
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = append(req.TopicNames, topic)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode), "delete topic %s", topic)
}
