package dataplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// anon is the principal of the test clients (plaintext: no authentication).
const anon = AnonymousPrincipal

func allow(resType, pattern, name, op string) mirror.ACL {
	return acl(resType, pattern, name, anon, "*", op, PermissionAllow)
}

// aclSite is a site enforcing ACLs with topic "orders" (3 records) and
// topic "other".
func aclSite(t *testing.T) *site {
	t.Helper()
	s := startSite(t, Config{EnforceACLs: true})
	s.topic(t, "orders", 1)
	s.topic(t, "other", 1)
	_, err := s.log(t, "orders", 0).AppendAsLeader(dataBatch(t, 0, 0, 3, -1, -1, false))
	require.NoError(t, err)
	return s
}

func TestEveryKeyHasAnAuthzRule(t *testing.T) {
	for _, a := range apis {
		_, ok := authzRules[a.key]
		require.True(t, ok, "key %d has no authorization rule", a.key)
	}
	require.Len(t, authzRules, len(apis))
}

func TestEnforceACLsNeedsAnACLStore(t *testing.T) {
	dst := mirror.NewMemoryDestination("c", fetcher.MemoryLogOptions{})
	defer dst.Close()
	_, err := New(Config{Destination: struct{ mirror.Destination }{dst}, AdvertisedHost: "h", AdvertisedPort: 1, EnforceACLs: true})
	require.ErrorIs(t, err, ErrConfig)
}

func fetchCode(t *testing.T, cl *kgo.Client, s *site) int16 {
	t.Helper()
	spec, _ := s.dst.Topic("orders")
	return request[*kmsg.FetchResponse](t, cl, fetchReq(spec, 0, 0, nil)).Topics[0].Partitions[0].ErrorCode
}

// consume reads topic from the start with a kgo consumer until it has n
// records, or returns the first fetch error.
func consume(t *testing.T, s *site, topic string, n int) ([]string, error) {
	t.Helper()
	cl := s.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var vals []string
	for len(vals) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return vals, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return vals, ferr
		}
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	return vals, nil
}

// TestACLSyncChangesWhatAConsumerFetches: with no ACL a kgo consumer is
// refused (TOPIC_AUTHORIZATION_FAILED); an ALLOW synced by a mirror lets it
// read; a DENY synced next to it wins; the sync removing them refuses again.
func TestACLSyncChangesWhatAConsumerFetches(t *testing.T) {
	s := aclSite(t)
	_, err := consume(t, s, "orders", 3)
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)

	require.NoError(t, s.dst.ReplaceMirrorACLs("m1", []mirror.ACL{allow(ResourceTopic, "L", "orders", OpRead)}))
	vals, err := consume(t, s, "orders", 3)
	require.NoError(t, err)
	require.Equal(t, []string{"v0", "v1", "v2"}, vals)

	cl := s.client(t)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m2", []mirror.ACL{acl(ResourceTopic, "P", "ord", WildcardPrincipal, "*", OpRead, PermissionDeny)}))
	require.Equal(t, codeTopicAuthorizationFailed, fetchCode(t, cl, s))
	_, err = consume(t, s, "orders", 3)
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)

	require.NoError(t, s.dst.ReplaceMirrorACLs("m2", nil))
	require.Equal(t, int16(0), fetchCode(t, cl, s))
	require.NoError(t, s.dst.ReplaceMirrorACLs("m1", nil))
	require.Equal(t, codeTopicAuthorizationFailed, fetchCode(t, cl, s))
}

// TestACLHostAndSuperUser: an ACL for another host does not apply to the
// loopback client; one for 127.0.0.1 does; a super user needs none.
func TestACLHostAndSuperUser(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{acl(ResourceTopic, "L", "orders", anon, "10.9.9.9", OpRead, PermissionAllow)}))
	require.Equal(t, codeTopicAuthorizationFailed, fetchCode(t, cl, s))
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{acl(ResourceTopic, "L", "orders", anon, "127.0.0.1", OpRead, PermissionAllow)}))
	require.Equal(t, int16(0), fetchCode(t, cl, s))

	su := startSite(t, Config{EnforceACLs: true, ACLPolicy: ACLPolicy{SuperUsers: []string{anon}}})
	su.topic(t, "orders", 1)
	require.Equal(t, int16(0), fetchCode(t, su.client(t), su))
}

// TestMetadataACLs: all topics lists only the describable ones; a named
// topic the principal may not describe is TOPIC_AUTHORIZATION_FAILED, an
// unknown one too (existence is not disclosed).
func TestMetadataACLs(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTopic, "L", "orders", OpWrite)})) // WRITE implies DESCRIBE
	all := request[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
	require.Len(t, all.Topics, 1)
	require.Equal(t, "orders", *all.Topics[0].Topic)

	req := kmsg.NewPtrMetadataRequest()
	for _, n := range []string{"orders", "other", "nope"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	codes := map[string]int16{}
	for _, rt := range request[*kmsg.MetadataResponse](t, cl, req).Topics {
		codes[*rt.Topic] = rt.ErrorCode
	}
	require.Equal(t, map[string]int16{"orders": 0, "other": codeTopicAuthorizationFailed, "nope": codeTopicAuthorizationFailed}, codes)

	// Only refused topics named: an empty list is asked, never all.
	req.Topics = req.Topics[1:2]
	resp := request[*kmsg.MetadataResponse](t, cl, req)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, codeTopicAuthorizationFailed, resp.Topics[0].ErrorCode)
}

// TestProduceACLs: WRITE on the topic appends; without it the partition is
// TOPIC_AUTHORIZATION_FAILED and nothing is appended; a transactional
// produce without WRITE on the id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func TestProduceACLs(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTopic, "L", "other", OpWrite)}))
	req := produceReq("other", 0, dataBatch(t, 0, 0, 1, -1, -1, false))
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = dataBatch(t, 0, 0, 1, -1, -1, false)
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = append(req.Topics, rt)
	codes := map[string]int16{}
	for _, rt := range request[*kmsg.ProduceResponse](t, cl, req).Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	require.Equal(t, map[string]int16{"other": 0, "orders": codeTopicAuthorizationFailed}, codes)
	require.Equal(t, int64(1), s.log(t, "other", 0).LogEndOffset())
	require.Equal(t, int64(3), s.log(t, "orders", 0).LogEndOffset())

	txn := produceReq("other", 0, dataBatch(t, 0, 0, 1, 5, 0, true))
	txn.TransactionID = kmsg.StringPtr("tx")
	resp, err := s.dp.Serve(t.Context(), txn)
	require.NoError(t, err)
	require.Equal(t, codeTxnIDAuthorizationFailed, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)

	// acks 0: a refusal cannot be answered, so it is an error (the
	// connection closes).
	zero := produceReq("orders", 0, dataBatch(t, 0, 0, 1, -1, -1, false))
	zero.Acks = 0
	_, err = s.dp.Serve(t.Context(), zero)
	require.ErrorIs(t, err, ErrUnauthorized)
	require.Equal(t, int64(3), s.log(t, "orders", 0).LogEndOffset())
}

// TestIdempotentProducerACLs: a kgo producer (idempotent) needs WRITE on a
// topic (or IDEMPOTENT_WRITE on the cluster) for InitProducerId.
func TestIdempotentProducerACLs(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	ipid := request[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
	require.Equal(t, codeClusterAuthorizationFailed, ipid.ErrorCode)

	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTopic, "L", "other", OpWrite)}))
	pcl := s.client(t, kgo.DefaultProduceTopic("other"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, pcl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr())
	err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("y")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	require.Equal(t, int64(3), s.log(t, "orders", 0).LogEndOffset())
}

// TestGroupACLs: OffsetCommit needs READ on the group (every partition
// GROUP_AUTHORIZATION_FAILED) and on the topic; OffsetFetch needs DESCRIBE
// on the group; FindCoordinator DESCRIBE on the group; ListGroups lists only
// describable groups.
func TestGroupACLs(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	commit := func(group, topic string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 9, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 2
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		// Served directly: kgo would first ask FindCoordinator, refused too.
		resp, err := s.dp.Serve(t.Context(), req)
		require.NoError(t, err)
		return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	require.Equal(t, codeGroupAuthorizationFailed, commit("g", "orders"))
	_, err := cl.Request(t.Context(), kmsg.NewPtrOffsetCommitRequest())
	require.ErrorIs(t, err, kerr.GroupAuthorizationFailed, "kgo's coordinator lookup is refused")
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceGroup, "P", "g", OpRead), allow(ResourceTopic, "L", "orders", OpRead)}))
	require.Equal(t, codeTopicAuthorizationFailed, commit("g", "other"))
	require.Empty(t, s.dst.CommittedOffsets("g"))
	require.Equal(t, int16(0), commit("g", "orders"))
	require.Equal(t, map[mirror.TopicPartition]int64{{Topic: "orders", Partition: 0}: 2}, s.dst.CommittedOffsets("g"))
	require.NoError(t, s.dst.CommitOffsets("h", map[mirror.TopicPartition]int64{{Topic: "orders", Partition: 0}: 1}))

	fetchGroup := kmsg.NewPtrOffsetFetchRequest()
	fetchGroup.Version = 7
	fetchGroup.Group = "h"
	resp, err := s.dp.Serve(t.Context(), fetchGroup)
	require.NoError(t, err)
	require.Equal(t, codeGroupAuthorizationFailed, resp.(*kmsg.OffsetFetchResponse).ErrorCode)
	require.Empty(t, resp.(*kmsg.OffsetFetchResponse).Topics)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g1", "h"}
	codes := map[string]int16{}
	for _, c := range request[*kmsg.FindCoordinatorResponse](t, cl, fc).Coordinators {
		codes[c.Key] = c.ErrorCode
	}
	require.Equal(t, map[string]int16{"g1": 0, "h": codeGroupAuthorizationFailed}, codes)

	lg := request[*kmsg.ListGroupsResponse](t, cl, kmsg.NewPtrListGroupsRequest())
	var groups []string
	for _, g := range lg.Groups {
		groups = append(groups, g.Group)
	}
	require.Equal(t, []string{"g"}, groups)
}

// TestTopicAdminACLs: CreatePartitions needs ALTER, DeleteTopics and
// DeleteRecords DELETE on the topic; refused, nothing changes.
func TestTopicAdminACLs(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTopic, "L", "other", OpAll)}))
	cp := request[*kmsg.CreatePartitionsResponse](t, cl, createPartitionsReq(false, map[string]int32{"orders": 2, "other": 2}, "orders", "other"))
	require.Equal(t, map[string]int16{"orders": codeTopicAuthorizationFailed, "other": 0}, createPartitionsCodes(cp))
	spec, _ := s.dst.Topic("orders")
	require.Equal(t, int32(1), spec.Partitions)

	dr, err := s.dp.Serve(t.Context(), deleteRecordsReq(map[string]int64{"orders": 1}, "orders"))
	require.NoError(t, err)
	require.Equal(t, map[string]lowCode{"orders": {-1, codeTopicAuthorizationFailed}}, deleteRecordsResults(dr.(*kmsg.DeleteRecordsResponse)))
	require.Equal(t, int64(0), s.log(t, "orders", 0).LogStartOffset())

	req := kmsg.NewPtrDeleteTopicsRequest()
	for _, n := range []string{"orders", "other"} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	require.Equal(t, map[string]int16{"orders": codeTopicAuthorizationFailed, "other": 0},
		deleteTopicsCodes(request[*kmsg.DeleteTopicsResponse](t, cl, req)))
	_, ok := s.dst.Topic("orders")
	require.True(t, ok)
}

// TestTransactionACLs: InitProducerId, AddPartitionsToTxn and EndTxn need
// WRITE on the transactional id; a topic refused in AddPartitionsToTxn
// leaves the others OPERATION_NOT_ATTEMPTED.
func TestTransactionACLs(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 10000
	_, err := cl.Request(t.Context(), ip)
	require.ErrorIs(t, err, kerr.TransactionalIDAuthorizationFailed, "kgo's coordinator lookup is refused")
	raw, err := s.dp.Serve(t.Context(), ip)
	require.NoError(t, err)
	require.Equal(t, codeTxnIDAuthorizationFailed, raw.(*kmsg.InitProducerIDResponse).ErrorCode)

	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTransactional, "L", "tx", OpWrite),
		allow(ResourceTopic, "L", "other", OpWrite)}))
	got := request[*kmsg.InitProducerIDResponse](t, cl, ip)
	require.Equal(t, int16(0), got.ErrorCode)

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "tx", got.ProducerID, got.ProducerEpoch
	for _, n := range []string{"orders", "other"} {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = n, []int32{0}
		add.Topics = append(add.Topics, rt)
	}
	resp, err := s.dp.Serve(t.Context(), add)
	require.NoError(t, err)
	codes := map[string]int16{}
	for _, rt := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	require.Equal(t, map[string]int16{"orders": codeTopicAuthorizationFailed, "other": codeOperationNotAttempted}, codes)

	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch = "other-tx", got.ProducerID, got.ProducerEpoch
	resp, err = s.dp.Serve(t.Context(), end)
	require.NoError(t, err)
	require.Equal(t, codeTxnIDAuthorizationFailed, resp.(*kmsg.EndTxnResponse).ErrorCode)
}

func TestAuthorizationErrorsAreKafkas(t *testing.T) {
	for code, want := range map[int16]error{
		codeTopicAuthorizationFailed: kerr.TopicAuthorizationFailed, codeGroupAuthorizationFailed: kerr.GroupAuthorizationFailed,
		codeClusterAuthorizationFailed: kerr.ClusterAuthorizationFailed, codeTxnIDAuthorizationFailed: kerr.TransactionalIDAuthorizationFailed,
	} {
		require.True(t, errors.Is(kerr.ErrorForCode(code), want), "code %d", code)
	}
}

// TestAllowed: the host-facing check answers like the data plane's keys,
// and allows everything without EnforceACLs.
func TestAllowed(t *testing.T) {
	open := startSite(t, Config{})
	require.True(t, open.dp.Allowed(t.Context(), OpDescribeConfigs, ResourceTopic, "x"))
	s := aclSite(t)
	require.False(t, s.dp.Allowed(t.Context(), OpDescribeConfigs, ResourceTopic, "orders"))
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTopic, "L", "orders", OpAlterConfigs)}))
	require.True(t, s.dp.Allowed(t.Context(), OpDescribeConfigs, ResourceTopic, "orders"), "ALTER_CONFIGS implies DESCRIBE_CONFIGS")
}

// TestConsumerGroupACLs: ConsumerGroupHeartbeat needs READ on the group and
// DESCRIBE on each subscribed topic; ConsumerGroupDescribe DESCRIBE on the
// group and on its assigned topics.
func TestConsumerGroupACLs(t *testing.T) {
	s := aclSite(t)
	hbReq := func() *kmsg.ConsumerGroupHeartbeatRequest {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, "g", "m", 1000
		r.SubscribedTopicNames, r.Topics = []string{"orders"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	}
	serve := func(r kmsg.Request) kmsg.Response {
		resp, err := s.dp.Serve(t.Context(), r)
		require.NoError(t, err)
		return resp
	}
	require.Equal(t, codeGroupAuthorizationFailed, serve(hbReq()).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
	require.Nil(t, s.dp.groupReg.ownerOf("g"), "refused, no group is made")
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceGroup, "L", "g", OpRead)}))
	resp := serve(hbReq()).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, codeTopicAuthorizationFailed, resp.ErrorCode)
	require.Contains(t, *resp.ErrorMessage, "orders")
	require.Nil(t, s.dp.groupReg.ownerOf("g"), "refused, no group is made")

	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceGroup, "L", "g", OpRead), allow(ResourceTopic, "L", "orders", OpRead)}))
	require.Zero(t, serve(hbReq()).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
	require.NotNil(t, s.dp.groupReg.ownerOf("g"))

	desc := kmsg.NewPtrConsumerGroupDescribeRequest()
	desc.Groups = []string{"g"}
	g := serve(desc).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	require.Zero(t, g.ErrorCode, "READ implies DESCRIBE")
	require.Len(t, g.Members, 1)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceGroup, "L", "g", OpDescribe)}))
	g = serve(desc).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	require.Equal(t, codeTopicAuthorizationFailed, g.ErrorCode)
	require.Empty(t, g.Members)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", nil))
	g = serve(desc).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	require.Equal(t, codeGroupAuthorizationFailed, g.ErrorCode)
}
