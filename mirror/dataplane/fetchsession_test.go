package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// sessionReq is a Fetch in session id at epoch naming partitions ps of spec
// (each at offs[p], 0 when absent) and forgetting forget.
func sessionReq(spec mirror.TopicSpec, id, epoch int32, ps []int32, offs map[int32]int64, forget []int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	req.SessionID, req.SessionEpoch = id, epoch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = spec.Name, spec.TopicID
	for _, p := range ps {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offs[p], 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	if len(ps) > 0 {
		req.Topics = []kmsg.FetchRequestTopic{rt}
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = spec.Name, spec.TopicID, forget
		req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{ft}
	}
	return req
}

// answered lists the partitions of resp with their record bytes.
func answered(resp *kmsg.FetchResponse) map[int32]kmsg.FetchResponseTopicPartition {
	out := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

func TestFetchSessionServed(t *testing.T) {
	s := startSite(t, Config{})
	spec := s.topic(t, "s", 4)
	for p := range int32(4) {
		require.NoError(t, s.log(t, "s", p).Append(dataBatch(t, 0, 0, int(p)+1, -1, -1, false)))
	}
	cl := s.client(t)
	all := []int32{0, 1, 2, 3}
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		return request[*kmsg.FetchResponse](t, cl, req)
	}

	// A full fetch asking for a session gets one and every partition.
	full := fetch(sessionReq(spec, 0, 0, all, nil, nil))
	require.Equal(t, int16(0), full.ErrorCode)
	id := full.SessionID
	require.NotZero(t, id)
	require.Len(t, answered(full), 4)
	require.Equal(t, 1, s.dp.sessions.size())

	// Moving every position: the answer names them (new offsets, nothing read).
	offs := map[int32]int64{0: 1, 1: 2, 2: 3, 3: 4}
	moved := fetch(sessionReq(spec, id, 1, all, offs, nil))
	require.Equal(t, int16(0), moved.ErrorCode)
	require.Equal(t, id, moved.SessionID)
	require.Empty(t, answered(moved), "same high watermarks, no records: nothing to say")

	// Idle: an empty incremental fetch names nothing.
	idle := fetch(sessionReq(spec, id, 2, nil, nil, nil))
	require.Equal(t, int16(0), idle.ErrorCode)
	require.Empty(t, idle.Topics)

	// New data on partition 2 is answered from the session's position.
	require.NoError(t, s.log(t, "s", 2).Append(dataBatch(t, 3, 0, 2, -1, -1, false)))
	data := answered(fetch(sessionReq(spec, id, 3, nil, nil, nil)))
	require.Len(t, data, 1)
	require.Equal(t, int64(5), data[2].HighWatermark)
	require.NotEmpty(t, data[2].RecordBatches)

	// The same epoch again (a replay), an unknown id, a version without
	// topic ids: Kafka's errors, the session untouched.
	require.Equal(t, int16(71), fetch(sessionReq(spec, id, 3, nil, nil, nil)).ErrorCode)
	require.Equal(t, int16(71), fetch(sessionReq(spec, id, 99, nil, nil, nil)).ErrorCode)
	require.Equal(t, int16(70), fetch(sessionReq(spec, id+1, 4, nil, nil, nil)).ErrorCode)
	old := s.client(t, kgo.MaxVersions(kversion.V3_0_0())) // Fetch v12: names, no ids
	resp := request[*kmsg.FetchResponse](t, old, sessionReq(spec, id, 4, nil, nil, nil))
	require.Equal(t, int16(12), resp.Version)
	require.Equal(t, int16(106), resp.ErrorCode)

	// Forgetting partitions, one never added among them: ignored, as Kafka.
	offs[2] = 5
	resp = fetch(sessionReq(spec, id, 4, []int32{2}, offs, []int32{0, 1, 7}))
	require.Equal(t, int16(0), resp.ErrorCode)
	require.Empty(t, resp.Topics)
	require.NoError(t, s.log(t, "s", 0).Append(dataBatch(t, 1, 0, 1, -1, -1, false)))
	require.NoError(t, s.log(t, "s", 3).Append(dataBatch(t, 4, 0, 1, -1, -1, false)))
	got := answered(fetch(sessionReq(spec, id, 5, nil, nil, nil)))
	require.Len(t, got, 1, "partition 0 was forgotten")
	require.NotEmpty(t, got[3].RecordBatches)

	// Forgetting the rest drops the session.
	resp = fetch(sessionReq(spec, id, 6, nil, nil, []int32{2, 3}))
	require.Equal(t, int32(0), resp.SessionID)
	require.Equal(t, 0, s.dp.sessions.size())
	require.Equal(t, int16(70), fetch(sessionReq(spec, id, 7, nil, nil, nil)).ErrorCode)

	// A sessionless full fetch (epoch -1) naming a session closes it.
	id = fetch(sessionReq(spec, 0, 0, all, nil, nil)).SessionID
	require.NotZero(t, id)
	resp = fetch(sessionReq(spec, id, -1, all, nil, nil))
	require.Equal(t, int32(0), resp.SessionID)
	require.Len(t, answered(resp), 4)
	require.Equal(t, int16(70), fetch(sessionReq(spec, id, 1, nil, nil, nil)).ErrorCode)
}

// TestFetchSessionErrorsNamedUntilGone: a partition with an error is named
// in every answer, and once more when the error is gone.
func TestFetchSessionErrorsNamedUntilGone(t *testing.T) {
	s := startSite(t, Config{})
	spec := s.topic(t, "e", 2)
	cl := s.client(t)
	offs := map[int32]int64{1: 5} // past the end: OFFSET_OUT_OF_RANGE
	full := request[*kmsg.FetchResponse](t, cl, sessionReq(spec, 0, 0, []int32{0, 1}, offs, nil))
	id := full.SessionID
	require.NotZero(t, id)
	require.Equal(t, int16(1), answered(full)[1].ErrorCode)
	got := answered(request[*kmsg.FetchResponse](t, cl, sessionReq(spec, id, 1, nil, nil, nil)))
	require.Len(t, got, 1)
	require.Equal(t, int16(1), got[1].ErrorCode)
	offs[1] = 0
	got = answered(request[*kmsg.FetchResponse](t, cl, sessionReq(spec, id, 2, []int32{1}, offs, nil)))
	require.Len(t, got, 1, "the error cleared: named once more")
	require.Equal(t, int16(0), got[1].ErrorCode)
	require.Empty(t, request[*kmsg.FetchResponse](t, cl, sessionReq(spec, id, 3, nil, nil, nil)).Topics)
}

// TestFetchSessionBounds: a client cannot make the site hold more than the
// configured sessions and partitions; past them it is served without a
// session.
func TestFetchSessionBounds(t *testing.T) {
	s := startSite(t, Config{FetchSessionCacheSlots: 2, FetchSessionMaxPartitions: 3})
	spec := s.topic(t, "b", 5)
	cl := s.client(t)
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		resp := request[*kmsg.FetchResponse](t, cl, req)
		require.Equal(t, int16(0), resp.ErrorCode)
		return resp
	}
	huge := fetch(sessionReq(spec, 0, 0, []int32{0, 1, 2, 3}, nil, nil))
	require.Zero(t, huge.SessionID, "four partitions: no session")
	require.Len(t, answered(huge), 4, "served all the same")
	a := fetch(sessionReq(spec, 0, 0, []int32{0}, nil, nil)).SessionID
	b := fetch(sessionReq(spec, 0, 0, []int32{0, 1}, nil, nil)).SessionID
	require.NotZero(t, a)
	require.NotZero(t, b)
	require.Zero(t, fetch(sessionReq(spec, 0, 0, []int32{0, 1, 2}, nil, nil)).SessionID, "full, none evictable yet")
	require.Equal(t, 2, s.dp.sessions.size())
	// Growing a session past the bound drops it; the fetch is served.
	grow := fetch(sessionReq(spec, b, 1, []int32{2, 3}, nil, nil))
	require.Zero(t, grow.SessionID)
	require.Len(t, answered(grow), 2)
	require.Equal(t, 1, s.dp.sessions.size())
	require.Equal(t, int16(70), request[*kmsg.FetchResponse](t, cl, sessionReq(spec, b, 2, nil, nil, nil)).ErrorCode)

	// The bound on all sessions' partitions.
	tight := startSite(t, Config{FetchSessionCachePartitions: 3})
	tspec := tight.topic(t, "b", 3)
	tcl := tight.client(t)
	first := request[*kmsg.FetchResponse](t, tcl, sessionReq(tspec, 0, 0, []int32{0, 1}, nil, nil)).SessionID
	require.NotZero(t, first)
	require.Zero(t, request[*kmsg.FetchResponse](t, tcl, sessionReq(tspec, 0, 0, []int32{0, 1}, nil, nil)).SessionID, "2+2 > 3")
	grown := request[*kmsg.FetchResponse](t, tcl, sessionReq(tspec, first, 1, []int32{2}, nil, nil))
	require.Equal(t, first, grown.SessionID, "3 fit")
	require.Equal(t, 3, tight.dp.sessions.total)

	// Sessions off: full fetches are answered without one.
	off := startSite(t, Config{FetchSessionCacheSlots: -1})
	offSpec := off.topic(t, "b", 1)
	resp := request[*kmsg.FetchResponse](t, off.client(t), sessionReq(offSpec, 0, 0, []int32{0}, nil, nil))
	require.Equal(t, int16(0), resp.ErrorCode)
	require.Zero(t, resp.SessionID)
}

// TestFetchSessionEviction follows Kafka's eviction rules on the cache
// itself, with a clock of its own.
func TestFetchSessionEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newFetchSessions(2, 100, 1000)
	c.now = func() time.Time { return now }
	spec := mirror.TopicSpec{Name: "t", TopicID: [16]byte{1}}
	mk := func(n int, replica int32) int32 {
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(i)
		}
		r := sessionReq(spec, 0, 0, ps, nil, nil)
		r.Version = 16
		r.ReplicaState.ID = replica
		return c.create(r, replica >= 0, r.ResponseKind().(*kmsg.FetchResponse))
	}
	small := mk(1, -1)
	big := mk(5, -1)
	require.NotZero(t, small)
	require.NotZero(t, big)
	require.Zero(t, mk(10, -1), "young sessions are safe from an unprivileged newcomer")
	priv := mk(2, 1)
	require.NotZero(t, priv, "a follower evicts the smallest unprivileged session")
	require.Nil(t, c.sessions[small])
	priv2 := mk(50, 2)
	require.NotZero(t, priv2, "a follower evicts an unprivileged session of any size")
	require.Nil(t, c.sessions[big])
	require.Zero(t, mk(60, 3), "young privileged sessions are safe")
	now = now.Add(FetchSessionEvictAfter / 2)
	c.sessions[priv].lastUsed = now
	now = now.Add(FetchSessionEvictAfter/2 + time.Second) // priv2 unused for longer than the eviction time
	require.NotZero(t, mk(1, -1), "a stale session goes, to anyone")
	require.Nil(t, c.sessions[priv2])
	require.NotNil(t, c.sessions[priv])
	require.Equal(t, 2, c.size())
}

// TestKafkaSourceSessionsAgainstSite mirrors from the data plane through
// fetcher.KafkaSource with sessions: byte for byte, and idle fetches name no
// partition and get none back.
func TestKafkaSourceSessionsAgainstSite(t *testing.T) {
	t.Run("sessions", func(t *testing.T) { mirrorFromSite(t, true) })
	// A site without sessions answers SessionID 0: the source goes on
	// with full fetches, and the mirror is the same.
	t.Run("sessions off", func(t *testing.T) { mirrorFromSite(t, false) })
}

func mirrorFromSite(t *testing.T, sessions bool) {
	cfg := Config{}
	if !sessions {
		cfg.FetchSessionCacheSlots = -1
	}
	s := startSite(t, cfg)
	const n = 50
	spec := s.topic(t, "m", n)
	for p := range int32(n) {
		require.NoError(t, s.log(t, "m", p).Append(dataBatch(t, 0, 0, int(p%5)+1, -1, -1, false)))
	}
	src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{SeedBrokers: []string{s.addr}, MaxWait: 20 * time.Millisecond})
	require.NoError(t, err)
	defer src.Close()
	f, err := fetcher.NewFetcher(src, fetcher.Config{})
	require.NoError(t, err)
	defer f.Close()
	logs := map[int32]fetcher.Log{}
	for p := range int32(n) {
		l := fetcher.NewMemoryLog(fetcher.MemoryLogOptions{})
		_, err := l.BumpLeaderEpoch(999) // the destination's own leader epoch
		require.NoError(t, err)
		logs[p] = l
		require.NoError(t, f.Add(fetcher.PartitionSpec{Topic: "m", TopicID: spec.TopicID, Partition: p, Log: logs[p]}))
	}
	caughtUp := func() bool {
		for p, l := range logs {
			if l.LogEndOffset() != s.log(t, "m", p).LogEndOffset() {
				return false
			}
		}
		return true
	}
	require.Eventually(t, caughtUp, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, s.log(t, "m", 7).Append(dataBatch(t, 3, 0, 4, -1, -1, false)))
	require.Eventually(t, caughtUp, 30*time.Second, 5*time.Millisecond)
	for p, l := range logs {
		want, err := s.log(t, "m", p).Read(0, 1<<20)
		require.NoError(t, err)
		got, err := l.Read(0, 1<<20)
		require.NoError(t, err)
		require.Equal(t, want, got, "partition %d", p)
	}
	if !sessions {
		require.Zero(t, s.dp.sessions.size())
		return
	}
	// The loop's session is the one whose epoch moves: a full fetch cut
	// short by an Add may have left an orphan behind (the broker evicts
	// those, as Kafka does).
	epochs := func() map[int32]int32 {
		s.dp.sessions.mu.Lock()
		defer s.dp.sessions.mu.Unlock()
		out := map[int32]int32{}
		for id, sess := range s.dp.sessions.sessions {
			out[id] = sess.epoch
		}
		return out
	}
	e0 := epochs()
	var live int32
	require.Eventually(t, func() bool {
		for id, e := range epochs() {
			if e >= e0[id]+5 && e0[id] > 0 {
				live = id
				return true
			}
		}
		return false
	}, 30*time.Second, 5*time.Millisecond, "idle fetches are incremental fetches of one session")
	s.dp.sessions.mu.Lock()
	defer s.dp.sessions.mu.Unlock()
	require.Equal(t, n, s.dp.sessions.sessions[live].size)
}

// TestFetchSessionACLs: an incremental fetch authorizes every partition of
// its session, named or not: a READ revoked after the session was made
// refuses the partition (TOPIC_AUTHORIZATION_FAILED), no records leak, and
// restoring it serves the data again from the session's position.
func TestFetchSessionACLs(t *testing.T) {
	s := aclSite(t)
	cl := s.client(t)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTopic, "L", "orders", OpRead)}))
	spec, _ := s.dst.Topic("orders")
	full := request[*kmsg.FetchResponse](t, cl, sessionReq(spec, 0, 0, []int32{0}, map[int32]int64{0: 3}, nil))
	require.Equal(t, int16(0), answered(full)[0].ErrorCode)
	id := full.SessionID
	require.NotZero(t, id)

	_, err := s.log(t, "orders", 0).AppendAsLeader(dataBatch(t, 3, 0, 2, -1, -1, false))
	require.NoError(t, err)
	require.NoError(t, s.dst.ReplaceMirrorACLs("m", nil))
	got := answered(request[*kmsg.FetchResponse](t, cl, sessionReq(spec, id, 1, nil, nil, nil)))
	require.Equal(t, codeTopicAuthorizationFailed, got[0].ErrorCode)
	require.Empty(t, got[0].RecordBatches)

	require.NoError(t, s.dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTopic, "L", "orders", OpRead)}))
	got = answered(request[*kmsg.FetchResponse](t, cl, sessionReq(spec, id, 2, nil, nil, nil)))
	require.Equal(t, int16(0), got[0].ErrorCode)
	require.NotEmpty(t, got[0].RecordBatches)
	require.Equal(t, int64(5), got[0].HighWatermark)
}

// TestFetchSessionQuietPartitions: partitions a session found caught up are
// not read again while their logs stay put, yet an append by the mirror
// (straight to the log, no Produce to wake the fetch) is answered at once,
// a long-polling fetch ends on it, and a deleted topic is reported.
func TestFetchSessionQuietPartitions(t *testing.T) {
	s := startSite(t, Config{PollInterval: 5 * time.Millisecond})
	spec := s.topic(t, "q", 3)
	s.topic(t, "busy", 1)
	cl := s.client(t)
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		resp := request[*kmsg.FetchResponse](t, cl, req)
		require.Equal(t, int16(0), resp.ErrorCode)
		return resp
	}
	id := fetch(sessionReq(spec, 0, 0, []int32{0, 1, 2}, nil, nil)).SessionID
	require.NotZero(t, id)
	require.Empty(t, fetch(sessionReq(spec, id, 1, nil, nil, nil)).Topics)
	// Another log of the process moves: the quiet ones are checked one by one.
	require.NoError(t, s.log(t, "busy", 0).Append(dataBatch(t, 0, 0, 1, -1, -1, false)))
	require.Empty(t, fetch(sessionReq(spec, id, 2, nil, nil, nil)).Topics)
	require.NoError(t, s.log(t, "q", 1).Append(dataBatch(t, 0, 0, 2, -1, -1, false)))
	got := answered(fetch(sessionReq(spec, id, 3, nil, nil, nil)))
	require.Len(t, got, 1)
	require.NotEmpty(t, got[1].RecordBatches)
	require.Equal(t, int64(2), got[1].HighWatermark)

	// A long poll of the quiet session ends with an append of the mirror.
	offs := map[int32]int64{1: 2}
	require.Empty(t, fetch(sessionReq(spec, id, 4, []int32{1}, offs, nil)).Topics)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = s.log(t, "q", 2).Append(dataBatch(t, 0, 0, 1, -1, -1, false))
	}()
	req := sessionReq(spec, id, 5, nil, nil, nil)
	req.MaxWaitMillis = 20_000
	start := time.Now()
	got = answered(fetch(req))
	require.NotEmpty(t, got[2].RecordBatches)
	require.Less(t, time.Since(start), 15*time.Second, "woken by the append, not by MaxWait")

	// A deleted topic is answered, quiet or not.
	require.NoError(t, s.dst.DeleteTopic(context.Background(), "q"))
	got = answered(fetch(sessionReq(spec, id, 6, nil, nil, nil)))
	require.Len(t, got, 3)
	for p, a := range got {
		require.Equal(t, int16(100), a.ErrorCode, "partition %d", p) // UNKNOWN_TOPIC_ID
	}
}
