package dataplane

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirror"
)

// ListGroups filters compare as Kafka's group coordinator does, ignoring case (Java's
// admin client sends TypesFilter "Classic" and "Consumer", kafka-consumer-groups --list
// among them): a classic group is listed for "Classic", not for "Consumer" alone.
func TestListGroupsFiltersIgnoreCase(t *testing.T) {
	s := startSite(t, Config{})
	s.topic(t, "t", 1)
	require.NoError(t, s.dst.CommitOffsets("synced", map[mirror.TopicPartition]int64{{Topic: "t", Partition: 0}: 7}))
	cl := s.client(t)
	list := func(types, states []string) []string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		req.TypesFilter, req.StatesFilter = types, states
		resp := request[*kmsg.ListGroupsResponse](t, cl, req)
		require.Equal(t, int16(0), resp.ErrorCode)
		var names []string
		for _, g := range resp.Groups {
			names = append(names, g.Group)
		}
		return names
	}
	require.Equal(t, []string{"synced"}, list([]string{"Classic", "Consumer"}, nil))
	require.Equal(t, []string{"synced"}, list([]string{"CLASSIC"}, nil))
	require.Equal(t, []string{"synced"}, list([]string{"classic"}, []string{" empty "}))
	require.Equal(t, []string{"synced"}, list(nil, []string{"Empty", "Stable"}))
	require.Empty(t, list([]string{"Consumer"}, nil))
	require.Empty(t, list([]string{"Share"}, nil))
	require.Empty(t, list(nil, []string{"STABLE"}))
}
