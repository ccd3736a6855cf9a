package localdest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

func reopenDest(t *testing.T, d *LocalDestination) *LocalDestination {
	t.Helper()
	root := d.root
	require.NoError(t, d.Close())
	d2, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d2.Close() })
	return d2
}

func readOnlySet(d *LocalDestination, topic string, partitions int32) []int32 {
	var out []int32
	for p := range partitions {
		if d.ReadOnly(topic, p) {
			out = append(out, p)
		}
	}
	return out
}

// TestReadOnlyJournalAppends: each change of a flag appends one record to the
// journal instead of rewriting every flag; the flags come back from it on reopen, and
// kmirror-topics.json no longer holds them.
func TestReadOnlyJournalAppends(t *testing.T) {
	d := openTopic(t, 8)
	path := filepath.Join(d.root, readOnlyFile)
	require.NoError(t, d.SetReadOnly("t", 1, true))
	first, err := os.Stat(path)
	require.NoError(t, err)
	for _, p := range []int32{2, 3, 5} {
		require.NoError(t, d.SetReadOnly("t", p, true))
	}
	require.NoError(t, d.SetReadOnly("t", 2, false))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Len(t, lines, 6, "header, +1, +2, +3, +5, -2")
	require.True(t, strings.HasPrefix(lines[5], "-t/2 "))
	require.Greater(t, int64(len(data)), first.Size())
	topics, err := os.ReadFile(filepath.Join(d.root, topicsFile))
	require.NoError(t, err)
	require.NotContains(t, string(topics), "read_only")

	d = reopenDest(t, d)
	require.Equal(t, []int32{1, 3, 5}, readOnlySet(d, "t", 8))
}

// TestReadOnlyJournalTornTail: an append cut by a crash (records that do not check,
// up to the end of the file) is dropped and cut off the file; the acknowledged flags
// are all there, and the journal takes appends again.
func TestReadOnlyJournalTornTail(t *testing.T) {
	d := openTopic(t, 8)
	require.NoError(t, d.SetReadOnly("t", 1, true))
	require.NoError(t, d.SetReadOnly("t", 4, true))
	root := d.root
	require.NoError(t, d.Close())
	path := filepath.Join(root, readOnlyFile)
	whole, err := os.ReadFile(path)
	require.NoError(t, err)
	torn := append([]byte{}, whole...)
	torn = append(torn, "+t/6 0\n"...)                                // a whole line whose checksum is wrong
	torn = append(torn, make([]byte, 300)...)                         // zeros a crash left in the extended file
	torn = append(torn, appendReadOnlyRecord(nil, '+', "t/7")[:5]...) // a half-written record
	require.NoError(t, os.WriteFile(path, torn, 0o600))

	d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.Equal(t, []int32{1, 4}, readOnlySet(d, "t", 8))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, whole, after, "the torn tail is cut off")
	require.NoError(t, d.SetReadOnly("t", 7, true))
	d = reopenDest(t, d)
	require.Equal(t, []int32{1, 4, 7}, readOnlySet(d, "t", 8))
}

// TestReadOnlyJournalCorrupt: a record in the middle of the journal that does not
// check is corruption, not a torn append: the destination refuses to open, with a
// *ReadOnlyJournalError naming the offset, and the file is left as it was.
func TestReadOnlyJournalCorrupt(t *testing.T) {
	d := openTopic(t, 8)
	for _, p := range []int32{1, 2, 3} {
		require.NoError(t, d.SetReadOnly("t", p, true))
	}
	root := d.root
	require.NoError(t, d.Close())
	path := filepath.Join(root, readOnlyFile)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	second := strings.Index(string(data), "\n+t/2") + 1
	bad := append([]byte{}, data...)
	bad[second+3] = '9' // +t/2 becomes +t/9, its checksum no longer matches
	require.NoError(t, os.WriteFile(path, bad, 0o600))

	_, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	var je *ReadOnlyJournalError
	require.ErrorAs(t, err, &je)
	require.Equal(t, int64(second), je.Offset)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, bad, after, "nothing cut")

	require.NoError(t, os.WriteFile(path, []byte(appendReadOnlyRecord(nil, '+', "t/1")), 0o600))
	_, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.ErrorAs(t, err, &je, "a journal without its header")
}

// TestReadOnlyJournalCompacts: once the journal holds more than twice as many records
// as flags (plus its slack), the next write replaces it with a snapshot of the live
// flags.
func TestReadOnlyJournalCompacts(t *testing.T) {
	d := openTopic(t, 4)
	for range 2100 {
		require.NoError(t, d.SetReadOnly("t", 0, true))
		require.NoError(t, d.SetReadOnly("t", 0, false))
	}
	require.NoError(t, d.SetReadOnly("t", 3, true))
	d.saveMu.Lock()
	records := d.roJournal.records
	d.saveMu.Unlock()
	require.Less(t, records, 4096, "rewritten as a snapshot on the way")
	d = reopenDest(t, d)
	require.Equal(t, []int32{3}, readOnlySet(d, "t", 4))
}

// TestReadOnlyJournalFailedAppend: after a failed append (which may have left part of
// its records in the file), the next write is a snapshot of the flags as they are, so
// a flag whose removal failed stays read-only across a reopen.
func TestReadOnlyJournalFailedAppend(t *testing.T) {
	d := openTopic(t, 4)
	require.NoError(t, d.SetReadOnly("t", 0, true))
	real := d.writeReadOnly
	var snapshots int
	failing := true
	d.writeReadOnly = func(data []byte, records int, snapshot bool) error {
		if snapshot {
			snapshots++
		}
		if failing {
			// Half the records reach the file before the failure.
			_, _ = d.roJournal.f.Write(data[:len(data)/2])
			return errors.New("disk full")
		}
		return real(data, records, snapshot)
	}
	require.ErrorContains(t, d.SetReadOnly("t", 0, false), "disk full")
	require.True(t, d.ReadOnly("t", 0))
	failing = false
	require.NoError(t, d.SetReadOnly("t", 2, true))
	require.Equal(t, 1, snapshots)
	d = reopenDest(t, d)
	require.Equal(t, []int32{0, 2}, readOnlySet(d, "t", 4))
}

// TestReadOnlyFlagsMoveFromTopicsFile: a root written before the journal keeps its
// flags in kmirror-topics.json; they are read from there, move into the journal at
// the next write, and the topics file is then rewritten without them.
func TestReadOnlyFlagsMoveFromTopicsFile(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	require.NoError(t, d.CreateTopic(t.Context(), dest.TopicSpec{Name: "t", TopicID: records.UUID{1}, Partitions: 4}))
	require.NoError(t, d.Close())
	// The old layout: flags inside the topics file, no journal.
	require.NoError(t, writeJSON(root, topicsFile, &fileDestMeta{
		Topics:   map[string]*fileTopic{"t": {TopicID: records.UUID{1}.String(), Partitions: 4}},
		ReadOnly: map[string]bool{"t/1": true, "t/3": true},
	}))

	d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	require.Equal(t, []int32{1, 3}, readOnlySet(d, "t", 4))
	require.NoError(t, d.SetReadOnly("t", 3, false))
	topics, err := os.ReadFile(filepath.Join(root, topicsFile))
	require.NoError(t, err)
	require.NotContains(t, string(topics), "read_only")
	d = reopenDest(t, d)
	require.Equal(t, []int32{1}, readOnlySet(d, "t", 4))
}
