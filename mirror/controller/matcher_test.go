package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
)

// TestTopicMatcherAgreesWithMirrorConfig checks that NewTopicMatcher selects exactly
// what a mirror definition with the same topics.include/topics.exclude selects.
func TestTopicMatcherAgreesWithMirrorConfig(t *testing.T) {
	topics := []string{"orders", "orders-eu", "payments", "__consumer_offsets", "x.orders", " orders"}
	for _, tc := range []struct{ include, exclude []string }{
		{nil, nil},
		{[]string{"orders.*"}, nil},
		{[]string{"orders.*", " pay.* "}, []string{"orders-eu"}},
		{[]string{".*"}, []string{"__.*", ""}},
		{[]string{"orders"}, nil}, // whole-name match: not x.orders
	} {
		m, err := NewTopicMatcher(tc.include, tc.exclude)
		require.NoError(t, err)
		cfg, err := ParseMirrorConfig(map[string]string{KeyBootstrapServers: "a:1",
			KeyTopicsInclude: strings.Join(tc.include, ","), KeyTopicsExclude: strings.Join(tc.exclude, ",")})
		require.NoError(t, err)
		for _, topic := range topics {
			require.Equal(t, cfg.IncludesTopic(topic), m.Includes(topic), "%+v %q", tc, topic)
		}
	}
	require.False(t, TopicMatcher{}.Includes("orders"))
}

func TestTopicMatcherRefusesBadPatterns(t *testing.T) {
	for _, p := range []string{"(", "a,b"} {
		_, err := NewTopicMatcher([]string{"ok"}, []string{p})
		requireCode(t, admin.CodeInvalidRequest, err)
	}
}
