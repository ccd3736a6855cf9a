package records

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUUIDText(t *testing.T) {
	require.Equal(t, "AAAAAAAAAAAAAAAAAAAAAA", UUID{}.String())
	one := UUID{15: 1}
	require.Equal(t, "AAAAAAAAAAAAAAAAAAAAAQ", one.String())
	all := UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	require.Equal(t, "_____________________w", all.String(), "URL-safe alphabet")
	for _, u := range []UUID{{}, one, all, testTopicID} {
		got, err := ParseUUID(u.String())
		require.NoError(t, err)
		require.Equal(t, u, got)
	}
	for _, bad := range []string{"", "AAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ==",
		"AAAAAAAAAAAAAAAAAAAA+/", "AAAAAAAAAAAAAAAAAAAAAB", "AAAAAAAAAAAAAAAAAAAA A"} {
		_, err := ParseUUID(bad)
		require.ErrorIs(t, err, ErrBadUUID, "%q", bad)
	}
}
