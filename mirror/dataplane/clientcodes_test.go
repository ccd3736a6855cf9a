package dataplane

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
)

// TestForClient: kmirror's codes answered to the four client write keys
// become INVALID_TOPIC_EXCEPTION with the mirror code's name in front of the
// message, where the version has a message; other keys and codes pass.
func TestForClient(t *testing.T) {
	ro, states := int16(admin.CodeReadOnlyTopic), int16(admin.CodeInvalidClusterMirrorStates)
	for _, c := range []struct {
		key      kmsg.Key
		version  int16
		code     int16
		wantCode int16
		wantMsg  string
	}{
		{kmsg.Produce, 9, ro, 17, "READ_ONLY_TOPIC: why"},
		{kmsg.Produce, 7, ro, 17, ""},
		{kmsg.DeleteRecords, 2, states, 17, ""},
		{kmsg.CreatePartitions, 0, states, 17, "INVALID_CLUSTER_MIRROR_STATES: why"},
		{kmsg.DeleteTopics, 5, states, 17, "INVALID_CLUSTER_MIRROR_STATES: why"},
		{kmsg.DeleteTopics, 4, states, 17, ""},
		{kmsg.Produce, 9, codeInvalidRecord, codeInvalidRecord, "why"},
		{kmsg.Fetch, 12, ro, ro, "why"},
	} {
		code, msg := forClient(c.key, c.version, c.code, "why")
		require.Equal(t, [2]any{c.wantCode, c.wantMsg}, [2]any{code, msg}, "%v v%d code %d", c.key, c.version, c.code)
	}
}

// TestTxnProduceToMirrorTopic: a read-only (mirror) partition cannot be added
// to a transaction (READ_ONLY_TOPIC), and a transactional Produce to it is
// refused like a plain one (INVALID_TOPIC_EXCEPTION, not retriable: the client
// aborts); nothing is appended and no marker is written.
func TestTxnProduceToMirrorTopic(t *testing.T) {
	s := startSite(t, Config{MaxTransactionTimeout: time.Minute})
	s.topic(t, "m", 1)
	require.NoError(t, s.dst.SetReadOnly("m", 0, true))
	x := &rawTxn{t: t, dp: s.dp, id: "to-mirror"}
	require.Equal(t, int16(0), x.init())
	require.Equal(t, []int16{codeInvalidTopic}, x.add("m", 0))
	p := x.produce("m", 0, 0, 2)
	require.Equal(t, codeInvalidTopic, p.ErrorCode)
	require.NotNil(t, p.ErrorMessage)
	require.Contains(t, *p.ErrorMessage, "READ_ONLY_TOPIC: ")
	require.Contains(t, *p.ErrorMessage, "mirror")
	require.Equal(t, int64(0), s.log(t, "m", 0).LogEndOffset())
	// Nothing was added, so the transaction is empty: ending it is INVALID_TXN_STATE,
	// as Kafka's coordinator answers an EndTxn of an empty transaction.
	require.Equal(t, int16(48), x.end(3, false))
	require.Equal(t, int64(0), s.log(t, "m", 0).LogEndOffset(), "no marker where nothing was written")
}
