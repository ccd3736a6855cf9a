package twosites

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkatest"
)

// aclOnC is one literal TOPIC binding on cluster C.
type aclOnC struct {
	topic, principal string
	op               kmsg.ACLOperation
	perm             kmsg.ACLPermissionType
}

func createACLsOnC(t testing.TB, cl *kgo.Client, acls ...aclOnC) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, a.topic, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = a.principal, "*", a.op, a.perm
		req.Creations = append(req.Creations, c)
	}
	for _, r := range request[*kmsg.CreateACLsResponse](t, cl, req).Results {
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "create ACL on C")
	}
}

// deleteACLsOnC deletes the TOPIC bindings on topic of permission perm
// (ACLPermissionTypeAny: all of them).
func deleteACLsOnC(t testing.TB, cl *kgo.Client, topic string, perm kmsg.ACLPermissionType) {
	t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(topic), kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, perm
	req.Filters = []kmsg.DeleteACLsRequestFilter{f}
	for _, r := range request[*kmsg.DeleteACLsResponse](t, cl, req).Results {
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "delete ACLs on C")
	}
}

// fetchCodeOf fetches partition 0 of the topic (by id) from offset 0 and
// returns the partition's code and record bytes.
func fetchCodeOf(t testing.TB, cl *kgo.Client, topic string, id [16]byte) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	p := request[*kmsg.FetchResponse](t, cl, req).Topics[0].Partitions[0]
	return p.ErrorCode, len(p.RecordBatches)
}

// waitFetchCode polls Fetch until it answers code.
func waitFetchCode(t testing.TB, cl *kgo.Client, topic string, id [16]byte, code int16, what string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		got, n := fetchCodeOf(t, cl, topic, id)
		if got == code && (code != 0 || n > 0) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: fetch still answers code %d (%d bytes), want %d", what, got, n, code)
		}
	}
}

// TestSyncedACLsEnforced: a kmirrord site with -enforce-acls mirrors a topic
// of cluster C (real Kafka with an authorizer) with acls.include. An ALLOW
// READ created on C is synced and lets a kgo consumer of the site read the
// mirrored records; a DENY created on C next to it wins once synced;
// deleting the DENY on C gives the consumer its records back, deleting the
// ALLOW too refuses it (no ACL: Kafka's default is to deny). The site's
// clients are User:ANONYMOUS (a plaintext listener); the mirror is set up
// while that principal is a super user.
func TestSyncedACLsEnforced(t *testing.T) {
	c := kafkatest.ClusterC(t)[0]
	topic := fmt.Sprintf("acl-enforced-%d", time.Now().UnixNano())
	ccl := kgoClient(t, c)
	createTopic(t, c, topic, 1)
	t.Cleanup(func() {
		deleteACLsOnC(t, ccl, topic, kmsg.ACLPermissionTypeAny)
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames = []string{topic}
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		req.Topics = []kmsg.DeleteTopicsRequestTopic{dt}
		_, _ = ccl.Request(context.Background(), req)
	})
	produceKgo(t, c, topic, 1, 5, "c")
	id := topicID(t, ccl, topic)
	createACLsOnC(t, ccl, aclOnC{topic, "User:ANONYMOUS", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow})

	// The mirror RPCs are authorized too: the anonymous mirrorctl sets the
	// mirror up as a super user, then the site restarts without one.
	d := newSite(t, "ACL", "-enforce-acls", "-super-users", "User:ANONYMOUS", "-sync-interval", "200ms")
	file := filepath.Join(t.TempDir(), "c-to-d.properties")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf("bootstrap.servers=%s\nfetch.wait.max.ms=100\nacls.include=TOPIC;%s;*;*;*\n", c, topic)), 0o600))
	d.ctl("--create", "--mirror", "c-to-d", "--mirror-config", file)
	d.ctl("--start", "--mirror", "c-to-d", "--topics", topic)
	d.waitPartitions("c-to-d", topic, 1, "caught up", func(p partitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == 5
	})
	d.term()
	d.extraArgs = []string{"-enforce-acls", "-sync-interval", "200ms"}
	d.start()

	dcl := kgoClient(t, d.addr)
	waitFetchCode(t, dcl, topic, id, 0, "the synced ALLOW")
	got := readKgo(t, d.addr, topic, map[int32]int{0: 5})
	require.Len(t, got[0], 5)
	require.Equal(t, "c-p0-v0", got[0][0].Value)

	createACLsOnC(t, ccl, aclOnC{topic, "User:*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny})
	waitFetchCode(t, dcl, topic, id, int16(kerr.TopicAuthorizationFailed.Code), "the synced DENY")
	deleteACLsOnC(t, ccl, topic, kmsg.ACLPermissionTypeDeny)
	waitFetchCode(t, dcl, topic, id, 0, "the DENY removed on C")
	deleteACLsOnC(t, ccl, topic, kmsg.ACLPermissionTypeAny)
	waitFetchCode(t, dcl, topic, id, int16(kerr.TopicAuthorizationFailed.Code), "no ACL left (Kafka's default: denied)")
	d.term()
}
