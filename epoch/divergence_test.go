package epoch

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLeaderDivergenceAndCheckFetch(t *testing.T) {
	// Leader log: epoch 0 at 0..4, epoch 3 at 5..9, epoch 5 from 10, LEO 15, log start 2.
	c := mustCache(t, Entry{0, 2}, Entry{3, 5}, Entry{5, 10})
	const logStart, leo = 2, 15
	for _, tc := range []struct {
		lfe      int32
		fo       int64
		diverged bool
		d        Divergence
		oor      string
	}{
		{lfe: UndefinedEpoch, fo: 7}, // not given: no check
		{lfe: -5, fo: 7},             // any negative is "not given"
		{lfe: 5, fo: 15},             // caught up
		{lfe: 5, fo: 12},             // inside the latest epoch
		{lfe: 5, fo: 16, diverged: true, d: Divergence{5, 15}}, // ahead of the leader's LEO
		{lfe: 3, fo: 10}, // epoch 3 ends at 10 exactly
		{lfe: 3, fo: 11, diverged: true, d: Divergence{3, 10}},                   // follower has more of epoch 3
		{lfe: 4, fo: 10, diverged: true, d: Divergence{3, 10}},                   // epoch 4 unknown to the leader
		{lfe: 1, fo: 3, diverged: true, d: Divergence{0, 5}},                     // epoch 1 unknown, offset fine
		{lfe: 6, fo: 15, oor: "end offset of the last fetched epoch is unknown"}, // above the latest
		{lfe: 0, fo: 1, oor: "below the log start"},                              // below log start
	} {
		name := fmt.Sprintf("lfe=%d fo=%d", tc.lfe, tc.fo)
		d, div, err := CheckFetch(c, logStart, leo, tc.lfe, tc.fo)
		if tc.oor != "" {
			require.ErrorIs(t, err, ErrOffsetOutOfRange, name)
			var oe *OutOfRangeError
			require.True(t, errors.As(err, &oe))
			require.Contains(t, err.Error(), tc.oor, name)
			require.False(t, div)
			continue
		}
		require.NoError(t, err, name)
		require.Equal(t, tc.diverged, div, name)
		ld, ldiv := LeaderDivergence(c, leo, tc.lfe, tc.fo)
		require.Equal(t, tc.diverged, ldiv, name)
		if tc.diverged {
			require.Equal(t, tc.d, d, name)
			require.Equal(t, tc.d, ld, name)
		}
	}
	// LeaderDivergence flags the unknown-epoch case with an undefined divergence.
	d, div := LeaderDivergence(c, leo, 6, 15)
	require.True(t, div)
	require.Equal(t, Divergence{UndefinedEpoch, UndefinedOffset}, d)
	d, div = LeaderDivergence(&Cache{}, 0, 0, 0)
	require.True(t, div)
	require.Equal(t, Divergence{UndefinedEpoch, UndefinedOffset}, d)
}

func TestFollowerTruncation(t *testing.T) {
	// Follower: epoch 1 at 0..3, epoch 2 at 4..7, epoch 4 from 8, LEO 12.
	c := mustCache(t, Entry{1, 0}, Entry{2, 4}, Entry{4, 8})
	const leo = 12
	for _, tc := range []struct {
		d        Divergence
		off      int64
		complete bool
		why      string
	}{
		{Divergence{2, 6}, 6, true, "known epoch, leader's end first"},
		{Divergence{2, 9}, 8, true, "known epoch, own end first"},
		{Divergence{4, 10}, 10, true, "latest epoch: own end is the LEO"},
		{Divergence{4, 20}, 12, true, "never above the LEO"},
		{Divergence{3, 9}, 8, false, "epoch 3 unknown: end of own epoch 2"},
		{Divergence{0, 3}, 0, true, "epoch below the first: own answer (0, 0), nothing kept"},
		{Divergence{7, 5}, 5, true, "epoch above the latest: leader's offset"},
		{Divergence{7, 50}, 12, true, "epoch above the latest: capped at the LEO"},
		{Divergence{UndefinedEpoch, 5}, 5, true, "undefined epoch: leader's offset"},
		{Divergence{2, UndefinedOffset}, 12, true, "undefined offset: stay at the fetch offset"},
	} {
		off, complete := FollowerTruncation(c, leo, tc.d)
		require.Equal(t, tc.off, off, tc.why)
		require.Equal(t, tc.complete, complete, tc.why)
		require.Equal(t, tc.off, FollowerTruncationOffset(c, leo, tc.d), tc.why)
	}
	var empty Cache
	require.Equal(t, int64(3), FollowerTruncationOffset(&empty, 10, Divergence{2, 3}))
}

func TestLMETruncationOffset(t *testing.T) {
	// Log start 5: epoch 0 at 5..9, epoch 2 at 10..19, epoch 7 from 20, LEO 25.
	c := mustCache(t, Entry{0, 5}, Entry{2, 10}, Entry{7, 20})
	for _, tc := range []struct {
		lme  int32
		off  int64
		full bool
	}{
		{-1, 5, true},
		{-7, 5, true},
		{0, 10, false},
		{1, 10, false},
		{2, 20, false},
		{6, 20, false},
		{7, 25, false},
		{9, 25, false},
	} {
		off, full := LMETruncationOffset(c, 5, 25, tc.lme)
		require.Equal(t, tc.off, off, "lme %d", tc.lme)
		require.Equal(t, tc.full, full, "lme %d", tc.lme)
	}
	// An epoch below every local epoch keeps nothing.
	late := mustCache(t, Entry{4, 5}, Entry{6, 9})
	off, full := LMETruncationOffset(late, 5, 12, 3)
	require.Equal(t, int64(5), off)
	require.False(t, full)
	// The cache's first epoch starts below the log start (stale): nothing kept, full.
	stale := mustCache(t, Entry{4, 0}, Entry{6, 3})
	off, full = LMETruncationOffset(stale, 5, 12, 4)
	require.Equal(t, int64(5), off)
	require.True(t, full)
	// No history at all: full truncation.
	off, full = LMETruncationOffset(&Cache{}, 3, 9, 4)
	require.Equal(t, int64(3), off)
	require.True(t, full)
}

func TestFence(t *testing.T) {
	for _, tc := range []struct {
		stored, requested, next int32
		ok                      bool
	}{
		{5, UndefinedEpoch, 5, true},
		{UndefinedEpoch, UndefinedEpoch, UndefinedEpoch, true},
		{5, 4, 5, false},
		{5, 0, 5, false},
		{5, 5, 5, true},
		{5, 6, 6, true},
		{UndefinedEpoch, 0, 0, true},
		{0, math.MaxInt32, math.MaxInt32, true},
		{3, -2, 3, false},
	} {
		next, ok := Fence(tc.stored, tc.requested)
		require.Equal(t, tc.next, next, "Fence(%d, %d)", tc.stored, tc.requested)
		require.Equal(t, tc.ok, ok, "Fence(%d, %d)", tc.stored, tc.requested)
	}
	// The b1/b2 example of KIP-1279 §9.6, leader-epoch half.
	highest := int32(1)
	highest, _ = Fence(highest, 2) // b2's read raises the highest epoch
	_, ok := Fence(highest, 1)     // b1's in-flight write
	require.False(t, ok)
	_, ok = Fence(highest, 2) // b2's write
	require.True(t, ok)
}

var sinkEpoch int32
var sinkOK bool

func BenchmarkFence(b *testing.B) {
	b.ReportAllocs()
	stored := int32(7)
	for i := 0; b.Loop(); i++ {
		next, ok := Fence(stored, int32(i&15)-1)
		sinkEpoch, sinkOK = next, ok
	}
}

func BenchmarkEndOffsetFor(b *testing.B) {
	for _, n := range []int{4, 64} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var c Cache
			for i := range n {
				c.Assign(int32(3*i), int64(100*i))
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				e, _ := c.EndOffsetFor(int32(i%(3*n)), int64(100*n))
				sinkEpoch = e
			}
		})
	}
}

func BenchmarkAssignTruncate(b *testing.B) {
	var c Cache
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e := int32(i % 64)
		if e == 0 {
			c.Clear()
		}
		c.Assign(e, int64(i%64)*10)
	}
}

func BenchmarkDecodeCheckpoint(b *testing.B) {
	entries := make([]Entry, 32)
	for i := range entries {
		entries[i] = Entry{int32(i * 2), int64(i) * 1_000_003}
	}
	data := EncodeCheckpoint(entries)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCheckpoint(data); err != nil {
			b.Fatal(err)
		}
	}
}
