package dataplane

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
)

// guardSite is a site with a mirror topic "m" (read-only, as a mirror topic
// is in every state but STOPPED) and a plain topic "p", 2 partitions each
// with 3 records in partition 0.
func guardSite(t *testing.T) (*site, *kgo.Client) {
	t.Helper()
	s := startSite(t, Config{})
	for _, name := range []string{"m", "p"} {
		s.topic(t, name, 2)
		_, err := s.log(t, name, 0).AppendAsLeader(dataBatch(t, 0, 0, 3, -1, -1, false))
		require.NoError(t, err)
	}
	for p := int32(0); p < 2; p++ {
		require.NoError(t, s.dst.SetReadOnly("m", p, true))
	}
	return s, s.client(t)
}

// stopMirror makes "m" writable, as STOPPED does.
func stopMirror(t *testing.T, s *site) {
	t.Helper()
	for p := int32(0); p < 2; p++ {
		require.NoError(t, s.dst.SetReadOnly("m", p, false))
	}
}

func createPartitionsReq(validateOnly bool, topics map[string]int32, order ...string) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis, req.ValidateOnly = 5000, validateOnly
	for _, name := range order {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, topics[name]
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func createPartitionsCodes(resp *kmsg.CreatePartitionsResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		out[t.Topic] = t.ErrorCode
	}
	return out
}

// TestCreatePartitionsGuard: a mirror topic that is not STOPPED is refused
// with INVALID_CLUSTER_MIRROR_STATES and keeps its count; a plain topic in
// the same request grows; an unknown one is UNKNOWN_TOPIC_OR_PARTITION; once
// STOPPED the mirror topic grows too.
func TestCreatePartitionsGuard(t *testing.T) {
	s, cl := guardSite(t)
	counts := map[string]int32{"m": 4, "p": 3, "u": 2}
	resp := request[*kmsg.CreatePartitionsResponse](t, cl, createPartitionsReq(false, counts, "m", "p", "u"))
	require.Equal(t, map[string]int16{"m": codeInvalidTopic, "p": 0, "u": fetcher.CodeUnknownTopicOrPartition},
		createPartitionsCodes(resp))
	m, _ := s.dst.Topic("m")
	p, _ := s.dst.Topic("p")
	require.Equal(t, int32(2), m.Partitions)
	require.Equal(t, int32(3), p.Partitions)
	require.Equal(t, int32(0), s.log(t, "p", 2).LeaderEpoch(), "a new partition is served at epoch 0")

	stopMirror(t, s)
	resp = request[*kmsg.CreatePartitionsResponse](t, cl, createPartitionsReq(false, counts, "m"))
	require.Equal(t, map[string]int16{"m": 0}, createPartitionsCodes(resp))
	m, _ = s.dst.Topic("m")
	require.Equal(t, int32(4), m.Partitions)
}

// TestCreatePartitionsBadInput: shrinking, a hostile count, a topic named
// twice, a foreign replica assignment and ValidateOnly change nothing.
func TestCreatePartitionsBadInput(t *testing.T) {
	s, cl := guardSite(t)
	stopMirror(t, s)
	req := createPartitionsReq(false, map[string]int32{"m": 2, "p": MaxPartitions + 1}, "m", "p")
	dup := kmsg.NewCreatePartitionsRequestTopic()
	dup.Topic, dup.Count = "x", 5
	req.Topics = append(req.Topics, dup, dup)
	resp := request[*kmsg.CreatePartitionsResponse](t, cl, req)
	require.Len(t, resp.Topics, 4)
	require.Equal(t, codeInvalidPartitions, resp.Topics[0].ErrorCode)
	require.Equal(t, codeInvalidPartitions, resp.Topics[1].ErrorCode)
	require.Equal(t, int16(admin.CodeInvalidRequest), resp.Topics[2].ErrorCode)
	require.Equal(t, int16(admin.CodeInvalidRequest), resp.Topics[3].ErrorCode)
	for _, rt := range resp.Topics {
		require.NotNil(t, rt.ErrorMessage, rt.Topic)
	}

	req = createPartitionsReq(false, map[string]int32{"p": 3}, "p")
	a := kmsg.NewCreatePartitionsRequestTopicAssignment()
	a.Replicas = []int32{7}
	req.Topics[0].Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{a}
	resp = request[*kmsg.CreatePartitionsResponse](t, cl, req)
	require.Equal(t, codeInvalidReplicaAssignment, resp.Topics[0].ErrorCode)

	resp = request[*kmsg.CreatePartitionsResponse](t, cl, createPartitionsReq(true, map[string]int32{"p": 3}, "p"))
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode)
	for _, name := range []string{"m", "p"} {
		spec, _ := s.dst.Topic(name)
		require.Equal(t, int32(2), spec.Partitions, name)
	}
	// ValidateOnly answers the guard as the real request would.
	require.NoError(t, s.dst.SetReadOnly("m", 1, true))
	resp = request[*kmsg.CreatePartitionsResponse](t, cl, createPartitionsReq(true, map[string]int32{"m": 3}, "m"))
	require.Equal(t, codeInvalidTopic, resp.Topics[0].ErrorCode)
}

func deleteTopicsCodes(resp *kmsg.DeleteTopicsResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		name := "<nil>"
		if t.Topic != nil {
			name = *t.Topic
		}
		out[name] = t.ErrorCode
	}
	return out
}

// TestDeleteTopicsGuard: the mirror topic is refused and keeps its data,
// the plain one is deleted, an unknown one is UNKNOWN_TOPIC_OR_PARTITION;
// once STOPPED, the mirror topic is deleted by id (v6).
func TestDeleteTopicsGuard(t *testing.T) {
	s, cl := guardSite(t)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 5000
	for _, name := range []string{"m", "p", "u"} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp := request[*kmsg.DeleteTopicsResponse](t, cl, req)
	require.Equal(t, map[string]int16{"m": codeInvalidTopic, "p": 0, "u": fetcher.CodeUnknownTopicOrPartition},
		deleteTopicsCodes(resp))
	// v5 names topics in TopicNames.
	old := kmsg.NewPtrDeleteTopicsRequest()
	old.Version, old.TopicNames = 5, []string{"m", "p"}
	raw, err := s.dp.Serve(t.Context(), old)
	require.NoError(t, err)
	require.Equal(t, map[string]int16{"m": codeInvalidTopic, "p": fetcher.CodeUnknownTopicOrPartition},
		deleteTopicsCodes(raw.(*kmsg.DeleteTopicsResponse)))
	_, ok := s.dst.Topic("p")
	require.False(t, ok)
	mspec, ok := s.dst.Topic("m")
	require.True(t, ok)
	require.Equal(t, int64(3), s.log(t, "m", 0).HighWatermark(), "the mirror topic keeps its records")

	// Bad entries: both a name and an id, neither, an unknown id, a duplicate.
	req = kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	both := kmsg.NewDeleteTopicsRequestTopic()
	both.Topic, both.TopicID = kmsg.StringPtr("m"), mspec.TopicID
	neither := kmsg.NewDeleteTopicsRequestTopic()
	unknownID := kmsg.NewDeleteTopicsRequestTopic()
	unknownID.TopicID = [16]byte{9, 9}
	byName := kmsg.NewDeleteTopicsRequestTopic()
	byName.Topic = kmsg.StringPtr("m")
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = mspec.TopicID
	stopMirror(t, s)
	req.Topics = []kmsg.DeleteTopicsRequestTopic{both, neither, unknownID, byName, byID}
	resp = request[*kmsg.DeleteTopicsResponse](t, cl, req)
	codes := make([]int16, len(resp.Topics))
	for i, rt := range resp.Topics {
		codes[i] = rt.ErrorCode
	}
	invalid := int16(admin.CodeInvalidRequest)
	require.Equal(t, []int16{invalid, invalid, fetcher.CodeUnknownTopicID, invalid, invalid}, codes)
	_, ok = s.dst.Topic("m")
	require.True(t, ok, "nothing is deleted for a topic named twice")

	req.Topics = []kmsg.DeleteTopicsRequestTopic{byID}
	resp = request[*kmsg.DeleteTopicsResponse](t, cl, req)
	require.Equal(t, map[string]int16{"m": 0}, deleteTopicsCodes(resp))
	require.Equal(t, [16]byte(mspec.TopicID), resp.Topics[0].TopicID)
	_, ok = s.dst.Topic("m")
	require.False(t, ok)
}

func deleteRecordsReq(offsets map[string]int64, order ...string) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	for _, name := range order {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = name
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Offset = offsets[name]
		rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{rp}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

type lowCode struct {
	low  int64
	code int16
}

func deleteRecordsResults(resp *kmsg.DeleteRecordsResponse) map[string]lowCode {
	out := map[string]lowCode{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[t.Topic] = lowCode{p.LowWatermark, p.ErrorCode}
		}
	}
	return out
}

// TestDeleteRecordsGuard: the mirror partition is refused and loses
// nothing, the plain one moves its log start, an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION; once STOPPED the mirror partition moves too.
func TestDeleteRecordsGuard(t *testing.T) {
	s, cl := guardSite(t)
	resp := request[*kmsg.DeleteRecordsResponse](t, cl, deleteRecordsReq(map[string]int64{"m": 2, "p": 2}, "m", "p"))
	require.Equal(t, map[string]lowCode{"m": {-1, codeInvalidTopic}, "p": {2, 0}},
		deleteRecordsResults(resp))
	require.Equal(t, int64(0), s.log(t, "m", 0).LogStartOffset())
	require.Equal(t, int64(2), s.log(t, "p", 0).LogStartOffset())

	// kgo sends DeleteRecords to the partition's leader, so an unknown topic
	// is answered by the site directly.
	raw, err := s.dp.Serve(t.Context(), deleteRecordsReq(map[string]int64{"u": 1}, "u"))
	require.NoError(t, err)
	require.Equal(t, map[string]lowCode{"u": {-1, fetcher.CodeUnknownTopicOrPartition}}, deleteRecordsResults(raw.(*kmsg.DeleteRecordsResponse)))

	stopMirror(t, s)
	resp = request[*kmsg.DeleteRecordsResponse](t, cl, deleteRecordsReq(map[string]int64{"m": -1}, "m"))
	require.Equal(t, map[string]lowCode{"m": {3, 0}}, deleteRecordsResults(resp))
	require.Equal(t, int64(3), s.log(t, "m", 0).LogStartOffset())
}

// TestDeleteRecordsBadInput: an offset above the high watermark or below -1,
// and a partition named twice, delete nothing.
func TestDeleteRecordsBadInput(t *testing.T) {
	s, cl := guardSite(t)
	for _, off := range []int64{4, -2} {
		resp := request[*kmsg.DeleteRecordsResponse](t, cl, deleteRecordsReq(map[string]int64{"p": off}, "p"))
		require.Equal(t, map[string]lowCode{"p": {-1, codeOffsetOutOfRange}}, deleteRecordsResults(resp), off)
	}
	req := deleteRecordsReq(map[string]int64{"p": 1}, "p")
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, req.Topics[0].Partitions[0])
	resp, err := s.dp.Serve(t.Context(), req)
	require.NoError(t, err)
	for _, p := range resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions {
		require.Equal(t, int16(admin.CodeInvalidRequest), p.ErrorCode)
	}
	require.Equal(t, int64(0), s.log(t, "p", 0).LogStartOffset())
}

// TestTopicAdminKeysAdvertised: ApiVersions lists the three keys.
func TestTopicAdminKeysAdvertised(t *testing.T) {
	_, cl := guardSite(t)
	resp := request[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	require.Equal(t, [2]int16{0, 3}, got[int16(kmsg.CreatePartitions)])
	require.Equal(t, [2]int16{0, 6}, got[int16(kmsg.DeleteTopics)])
	require.Equal(t, [2]int16{0, 2}, got[int16(kmsg.DeleteRecords)])
}

// TestCreateTopicsPartitionCap: a hostile partition count creates nothing.
func TestCreateTopicsPartitionCap(t *testing.T) {
	s, _ := guardSite(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "huge", 1<<30, -1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err := s.dp.Serve(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, codeInvalidPartitions, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	_, ok := s.dst.Topic("huge")
	require.False(t, ok)
}
