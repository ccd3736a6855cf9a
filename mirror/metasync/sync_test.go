package metasync

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/mirror/controller"
)

func TestMatchProperty(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"mirror.*", "mirror.support.unclean.leader.election", true},
		{"mirror.*", "mirror.", true},
		{"mirror.*", "retention.ms", false},
		{"min.insync.replicas", "min.insync.replicas", true},
		{"min.insync.replicas", "min.insync.replicas.x", false},
		{"*.ms", "retention.ms", true},
		{"*throttled*", "leader.replication.throttled.replicas", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"*", "", true},
		{"", "x", false},
	} {
		require.Equal(t, tc.want, controller.MatchProperty([]string{tc.pattern}, tc.name), "%+v", tc)
	}
}
