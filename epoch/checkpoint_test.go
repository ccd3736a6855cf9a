package epoch

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncodeCheckpoint(t *testing.T) {
	require.Equal(t, "0\n0\n", string(EncodeCheckpoint(nil)))
	require.Equal(t, "0\n3\n0 0\n2 10\n2147483647 9223372036854775807\n",
		string(EncodeCheckpoint([]Entry{{0, 0}, {2, 10}, {math.MaxInt32, math.MaxInt64}})))
}

func TestDecodeCheckpointValid(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Entry
	}{
		{"", nil}, // Kafka creates the file empty
		{"0\n0\n", []Entry{}},
		{"0\n1\n5 100\n", []Entry{{5, 100}}},
		{"0\n2\n0 0\n1 7\n", []Entry{{0, 0}, {1, 7}}},
		{"0\n1\n2147483647 9223372036854775807\n", []Entry{{math.MaxInt32, math.MaxInt64}}},
	} {
		got, err := DecodeCheckpoint([]byte(tc.in))
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
		if tc.in != "" {
			require.Equal(t, tc.in, string(EncodeCheckpoint(got)), "round trip")
		}
	}
}

func TestDecodeCheckpointCorrupt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		line int
		why  string
	}{
		{"1\n0\n", 1, "unsupported version 1"},
		{"x\n0\n", 1, "version"},
		{"0", 1, "not terminated"},
		{"0\n", 2, "missing line"},
		{"0\n2\n1 1\n", 4, "announced 2 entries, found 1"},
		{"0\n1\n1 1\n2 2\n", 4, "bytes after"},
		{"0\n1\n1 1\n\n", 4, "bytes after"},
		{"0\n0\ngarbage", 3, "bytes after"},
		{"0\n-1\n", 2, "entry count"},
		{"0\n1\n-1 5\n", 3, "epoch"},
		{"0\n1\n1 -5\n", 3, "start offset"},
		{"0\n1\n1 x\n", 3, "start offset"},
		{"0\n1\n1  5\n", 3, "start offset"},
		{"0\n1\n1\t5\n", 3, "not \"epoch startOffset\""},
		{"0\n1\n15\n", 3, "not \"epoch startOffset\""},
		{"0\n1\n1 5 6\n", 3, "start offset"},
		{"0\n1\n+1 5\n", 3, "epoch"},
		{"0\n1\n01 5\n", 3, "epoch"},
		{"0\n1\n1 5\r\n", 3, "start offset"},
		{"0\n1\n2147483648 5\n", 3, "int32"},
		{"0\n1\n1 9223372036854775808\n", 3, "int64"},
		{"0\n1\n1 99999999999999999999\n", 3, "int64"},
		{"0\n2\n3 5\n3 6\n", 4, "epoch 3 not above"},
		{"0\n2\n3 5\n2 6\n", 4, "epoch 2 not above"},
		{"0\n2\n3 5\n4 5\n", 4, "start offset 5 not above"},
		{"0\n3\n1 1\n", 4, "announced 3 entries, found 1"},
		{"0\n2147483647\n", 3, "announced 2147483647 entries, found 0"},
		{"0\n1\n1 1", 3, "not terminated"},
		{"00\n0\n", 1, "version"},
	} {
		_, err := DecodeCheckpoint([]byte(tc.in))
		require.Error(t, err, "%q", tc.in)
		require.ErrorIs(t, err, ErrCorruptCheckpoint, "%q", tc.in)
		var ce *CheckpointError
		require.True(t, errors.As(err, &ce), "%q", tc.in)
		require.Equal(t, tc.line, ce.Line, "%q: %v", tc.in, err)
		require.Contains(t, err.Error(), tc.why, "%q", tc.in)
		require.Contains(t, err.Error(), "line "+strconv.Itoa(tc.line))
	}
}

// FuzzDecodeCheckpoint checks that DecodeCheckpoint never panics, that whatever it accepts is
// a valid history that re-encodes to exactly the input, and that EncodeCheckpoint output of
// that history decodes back to it.
func FuzzDecodeCheckpoint(f *testing.F) {
	for _, s := range []string{
		"", "0\n0\n", "0\n1\n5 100\n", "0\n2\n0 0\n1 7\n", "0\n3\n0 0\n2 10\n7 99\n",
		"0\n1\n2147483647 9223372036854775807\n", "1\n0\n", "0\n2\n3 5\n3 6\n", "0\n1\n1  5\n",
		"0\n1\n-1 5\n", "0\n2147483647\n", "0\n1\n1 1", "0\n0\ngarbage", "0\r\n0\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := DecodeCheckpoint(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("error %v does not match ErrCorruptCheckpoint", err)
			}
			return
		}
		if err := validate(entries); err != nil {
			t.Fatalf("accepted an invalid history: %v", err)
		}
		if _, err := NewCache(entries...); err != nil {
			t.Fatalf("NewCache refused decoded entries: %v", err)
		}
		enc := EncodeCheckpoint(entries)
		if len(data) > 0 && string(enc) != string(data) {
			t.Fatalf("re-encoding %q gave %q", data, enc)
		}
		again, err := DecodeCheckpoint(enc)
		if err != nil {
			t.Fatalf("decoding own encoding %q: %v", enc, err)
		}
		if !equalEntries(again, entries) {
			t.Fatalf("round trip %v -> %v", entries, again)
		}
	})
}
