package records

import (
	"math"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

func TestJavaStringHashVectors(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"Aa", 2112},
		{"BB", 2112},
		{"hello", 99162322},
		{"Hello", 69609650},
		{"hello world", 1794106052},
		{"polygenelubricants", math.MinInt32},
		{"é", 233},
		// U+1F600 is the surrogate pair D83D DE00: 55357*31 + 56832.
		{"😀", 1772899},
		// Invalid UTF-8 counts as U+FFFD.
		{"\xff", 0xFFFD},
	} {
		require.Equal(t, tc.want, JavaStringHash(tc.s), "%q", tc.s)
	}
}

// javaHashRef computes the hash with 64-bit arithmetic reduced mod 2^32,
// a different route to the same Java rule.
func javaHashRef(s string) int32 {
	var h uint64
	for _, u := range utf16.Encode([]rune(s)) {
		h = (h*31 + uint64(u)) & 0xffffffff
	}
	return int32(uint32(h))
}

func TestJavaStringHashMatchesReference(t *testing.T) {
	for _, s := range []string{"mirror:AAAAAAAAAAAAAAAAAAAAAA:0", "a long string with ∑ and 🎉 and ascii", "x", "\U0010FFFF\u0000"} {
		require.Equal(t, javaHashRef(s), JavaStringHash(s), "%q", s)
	}
}

func TestAbsAndPartitionFor(t *testing.T) {
	require.Equal(t, int32(0), Abs(math.MinInt32))
	require.Equal(t, int32(math.MaxInt32), Abs(-math.MaxInt32))
	require.Equal(t, int32(5), Abs(-5))
	require.Equal(t, int32(5), Abs(5))

	require.Equal(t, int32(0), PartitionFor("polygenelubricants", 50))
	require.Equal(t, int32(99162322%50), PartitionFor("hello", 50))
	// A negative hash: Java's "foobar".hashCode() is -1268878963.
	require.Equal(t, int32(-1268878963), JavaStringHash("foobar"))
	require.Equal(t, int32(13), PartitionFor("foobar", 50))
	require.Equal(t, int32(-1), PartitionFor("x", 0))
}

func TestStateKey(t *testing.T) {
	id, err := ParseUUID("AAAAAAAAAAAAAAAAAAAAAQ")
	require.NoError(t, err)
	require.Equal(t, "m1:AAAAAAAAAAAAAAAAAAAAAQ:12", StateKey("m1", id, 12))
	require.Equal(t, "m:AAAAAAAAAAAAAAAAAAAAAA:-1", StateKey("m", UUID{}, -1))
}
