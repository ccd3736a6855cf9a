package epoch

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustCache(t *testing.T, entries ...Entry) *Cache {
	t.Helper()
	c, err := NewCache(entries...)
	require.NoError(t, err)
	return c
}

func TestNewCacheValidates(t *testing.T) {
	for _, tc := range []struct {
		entries []Entry
		index   int
		why     string
	}{
		{[]Entry{{-1, 0}}, 0, "negative epoch"},
		{[]Entry{{0, -1}}, 0, "negative start offset"},
		{[]Entry{{1, 0}, {1, 5}}, 1, "epoch not above"},
		{[]Entry{{2, 0}, {1, 5}}, 1, "epoch not above"},
		{[]Entry{{1, 5}, {2, 5}}, 1, "start offset not above"},
		{[]Entry{{1, 0}, {2, 5}, {3, 4}}, 2, "start offset not above"},
	} {
		_, err := NewCache(tc.entries...)
		require.ErrorIs(t, err, ErrInvalidEntry, "%v", tc.entries)
		var ee *EntryError
		require.True(t, errors.As(err, &ee))
		require.Equal(t, tc.index, ee.Index)
		require.Contains(t, err.Error(), tc.why)
	}
	c := mustCache(t, Entry{0, 0}, Entry{3, 7})
	require.Equal(t, []Entry{{0, 0}, {3, 7}}, c.Entries())
	empty := mustCache(t)
	require.Zero(t, empty.Len())
	require.Nil(t, empty.Entries())
}

func TestCacheCopies(t *testing.T) {
	in := []Entry{{1, 0}, {2, 5}}
	c := mustCache(t, in...)
	in[0].Epoch = 9
	out := c.Entries()
	out[1].StartOffset = 99
	require.Equal(t, []Entry{{1, 0}, {2, 5}}, c.Entries())
	cl := c.Clone()
	cl.Assign(3, 10)
	c.TruncateFromEnd(5)
	require.Equal(t, []Entry{{1, 0}}, c.Entries())
	require.Equal(t, []Entry{{1, 0}, {2, 5}, {3, 10}}, cl.Entries())
	require.Equal(t, "[1@0 2@5 3@10]", cl.String())
}

// TestAssignKafkaCases restates the behaviour pinned by Kafka's LeaderEpochFileCacheTest.
func TestAssignKafkaCases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		assigns [][2]int64
		results []bool
		want    []Entry
	}{
		{"first", [][2]int64{{2, 10}}, []bool{true}, []Entry{{2, 10}}},
		{"latest epoch again at a higher offset is ignored", [][2]int64{{2, 9}, {2, 10}}, []bool{true, false}, []Entry{{2, 9}}},
		{"latest epoch again at the same offset is ignored", [][2]int64{{2, 6}, {2, 6}}, []bool{true, false}, []Entry{{2, 6}}},
		{"latest epoch at a lower offset moves its start down", [][2]int64{{5, 11}, {6, 12}, {7, 13}, {7, 12}}, []bool{true, true, true, true}, []Entry{{5, 11}, {7, 12}}},
		{"higher epoch at the same offset replaces", [][2]int64{{2, 9}, {3, 9}}, []bool{true, true}, []Entry{{3, 9}}},
		{"higher epoch at a lower offset replaces", [][2]int64{{2, 6}, {3, 5}}, []bool{true, true}, []Entry{{3, 5}}},
		{"lower epoch truncates later epochs", [][2]int64{{1, 5}, {2, 6}, {1, 7}}, []bool{true, true, true}, []Entry{{1, 7}}},
		{"lower epoch at a higher offset keeps older entries", [][2]int64{{0, 0}, {1, 5}, {3, 9}, {2, 12}}, []bool{true, true, true, true}, []Entry{{0, 0}, {1, 5}, {2, 12}}},
		{"negative epoch ignored", [][2]int64{{1, 0}, {-1, 5}}, []bool{true, false}, []Entry{{1, 0}}},
		{"negative offset ignored", [][2]int64{{1, 0}, {2, -1}}, []bool{true, false}, []Entry{{1, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Cache
			for i, a := range tc.assigns {
				require.Equal(t, tc.results[i], c.Assign(int32(a[0]), a[1]), "assign %v", a)
			}
			require.Equal(t, tc.want, c.Entries())
		})
	}
}

func TestEndOffsetFor(t *testing.T) {
	c := mustCache(t, Entry{0, 0}, Entry{2, 13}, Entry{4, 17})
	for _, tc := range []struct {
		req     int32
		epoch   int32
		end     int64
		comment string
	}{
		{UndefinedEpoch, UndefinedEpoch, UndefinedOffset, "undefined epoch requested"},
		{4, 4, 30, "latest epoch → log end"},
		{5, UndefinedEpoch, UndefinedOffset, "above the latest"},
		{0, 0, 13, "first epoch → start of the next"},
		{1, 0, 13, "between 0 and 2 → lower entry's epoch"},
		{2, 2, 17, "middle epoch"},
		{3, 2, 17, "between 2 and 4"},
		{-2, -2, 0, "below the first (Kafka returns the requested epoch)"},
	} {
		e, end := c.EndOffsetFor(tc.req, 30)
		require.Equal(t, tc.epoch, e, tc.comment)
		require.Equal(t, tc.end, end, tc.comment)
	}

	late := mustCache(t, Entry{5, 11}, Entry{6, 12}, Entry{7, 13})
	e, end := late.EndOffsetFor(4, 0)
	require.Equal(t, [2]int64{4, 11}, [2]int64{int64(e), end}, "below the first epoch")

	var empty Cache
	e, end = empty.EndOffsetFor(0, 0)
	require.Equal(t, [2]int64{-1, -1}, [2]int64{int64(e), end})
	e, end = empty.EndOffsetFor(UndefinedEpoch, 73)
	require.Equal(t, [2]int64{-1, -1}, [2]int64{int64(e), end})

	// A long cache exercises the binary search path.
	var long Cache
	for i := int32(0); i < 100; i++ {
		long.Assign(2*i, int64(10*i))
	}
	e, end = long.EndOffsetFor(51, 5000)
	require.Equal(t, [2]int64{50, 260}, [2]int64{int64(e), end})
	e, end = long.EndOffsetFor(198, 5000)
	require.Equal(t, [2]int64{198, 5000}, [2]int64{int64(e), end})
}

func TestTruncateFromEnd(t *testing.T) {
	base := []Entry{{2, 6}, {3, 8}, {4, 11}}
	for _, tc := range []struct {
		off  int64
		want []Entry
	}{
		{11, []Entry{{2, 6}, {3, 8}}},
		{9, []Entry{{2, 6}, {3, 8}}},
		{8, []Entry{{2, 6}}},
		{12, base},
		{6, nil},
		{0, nil},
		{UndefinedOffset, base},
	} {
		c := mustCache(t, base...)
		c.TruncateFromEnd(tc.off)
		require.Equal(t, tc.want, c.Entries(), "TruncateFromEnd(%d)", tc.off)
	}
}

func TestTruncateFromStart(t *testing.T) {
	base := []Entry{{2, 6}, {3, 8}, {4, 11}}
	for _, tc := range []struct {
		off  int64
		want []Entry
	}{
		{8, []Entry{{3, 8}, {4, 11}}},
		{9, []Entry{{3, 9}, {4, 11}}},
		{5, base},
		{6, base},
		{11, []Entry{{4, 11}}},
		{15, []Entry{{4, 15}}},
		{UndefinedOffset, base},
	} {
		c := mustCache(t, base...)
		c.TruncateFromStart(tc.off)
		require.Equal(t, tc.want, c.Entries(), "TruncateFromStart(%d)", tc.off)
	}
	c := mustCache(t, Entry{0, 0}, Entry{1, 7}, Entry{2, 10})
	c.TruncateFromStart(5)
	require.Equal(t, []Entry{{0, 5}, {1, 7}, {2, 10}}, c.Entries())
	var empty Cache
	empty.TruncateFromStart(3)
	empty.TruncateFromEnd(3)
	require.Zero(t, empty.Len())
}

func TestEpochForOffsetLatestEarliest(t *testing.T) {
	c := mustCache(t, Entry{1, 10}, Entry{5, 30})
	for _, tc := range []struct {
		off   int64
		epoch int32
		ok    bool
	}{
		{25, 1, true}, {20, 1, true}, {10, 1, true}, {30, 5, true}, {50, 5, true}, {5, -1, false},
	} {
		e, ok := c.EpochForOffset(tc.off)
		require.Equal(t, tc.epoch, e, "offset %d", tc.off)
		require.Equal(t, tc.ok, ok, "offset %d", tc.off)
	}
	l, ok := c.Latest()
	require.True(t, ok)
	require.Equal(t, Entry{5, 30}, l)
	f, ok := c.Earliest()
	require.True(t, ok)
	require.Equal(t, Entry{1, 10}, f)
	require.Equal(t, int32(5), c.LatestEpoch())

	c.Clear()
	_, ok = c.Latest()
	require.False(t, ok)
	_, ok = c.Earliest()
	require.False(t, ok)
	require.Equal(t, UndefinedEpoch, c.LatestEpoch())
	_, ok = c.EpochForOffset(40)
	require.False(t, ok)
}
