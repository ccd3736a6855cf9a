package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

func newFileStore(t testing.TB, dir string, n int32) *FileStore {
	t.Helper()
	s, err := NewFileStore(dir, FileStoreOptions{NumPartitions: n})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestPropertyFileStoreAgrees runs random sequences through a runtime over the
// MemoryStore and over a FileStore: the histories must be identical, and so must the
// state a new FileStore on the same directory (a restart) reloads.
func TestPropertyFileStoreAgrees(t *testing.T) {
	const seqs, length = 100, 25
	rng := rand.New(rand.NewPCG(12, 1279))
	for seq := range seqs {
		ops := genOps(rng, length)
		want := history(t, NewMemoryStore(), ops)
		dir := t.TempDir()
		fs := newFileStore(t, dir, 3)
		require.Equal(t, want, history(t, fs, ops), "sequence %d", seq)
		require.NoError(t, fs.Close())
		fs2 := newFileStore(t, dir, 3)
		require.Equal(t, want[len(want)-len(finalState(t, NewMemoryStore(), 2)):], finalState(t, fs2, 3), "sequence %d after a restart", seq)
		require.NoError(t, fs2.Close())
	}
}

func TestFileStoreRestartAndCompaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := NewFileStore(dir, FileStoreOptions{NumPartitions: 2, CompactMinRecords: 50})
	require.NoError(t, err)
	require.Empty(t, loadAll(t, s, 0, 1))
	sh := NewShard()
	apply := func(recs []records.StateRecord) {
		require.NoError(t, s.Append(ctx, 0, 1, recs))
		for _, r := range recs {
			require.NoError(t, sh.Replay(r))
		}
	}
	for i := range 200 {
		for _, m := range []string{"keep", "gone"} {
			w := sh.WriteMirrorStates(WriteRequest{MirrorName: m, Partitions: []WritePartition{{TopicID: topicFoo, Partition: int32(i % 7),
				State: statemachine.Failed, LeaderEpoch: int32(i), StateEpoch: -1, LastMirrorEpoch: int32(i), LastMirrorOffset: int64(i)}}})
			apply(w.Records)
		}
	}
	apply(sh.DeleteMirror("gone").Records)
	before := sh.Dump()
	// no Close: a killed process
	s.lock.Close()
	s2 := newFileStore(t, dir, 2)
	got := loadAll(t, s2, 0, 1)
	require.Less(t, len(got), 400, "compaction removed superseded records")
	re := NewShard()
	for _, r := range got {
		require.NoError(t, re.Replay(r))
		if r.PartitionStateKey != nil {
			require.NotEqual(t, "gone", r.PartitionStateKey.MirrorName, "tombstones and the values they deleted are compacted away")
		}
	}
	require.Equal(t, before, re.Dump())
	require.Empty(t, loadAll(t, s2, 1, 1))
}

func TestFileStoreOwnership(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t, t.TempDir(), 1)
	rec := []records.StateRecord{stateRec("m", 0, statemachine.Mirroring, 1)}
	require.ErrorIs(t, s.Append(ctx, 0, 1, rec), ErrNotOwner, "not loaded")
	loadAll(t, s, 0, 2)
	require.NoError(t, s.Append(ctx, 0, 2, rec))
	require.ErrorIs(t, s.Append(ctx, 0, 1, rec), ErrFenced)
	require.ErrorIs(t, s.Load(ctx, 0, 1, func(records.StateRecord) error { return nil }), ErrFenced)
	require.ErrorIs(t, s.Append(ctx, 0, 3, rec), ErrNotOwner)
	require.Len(t, loadAll(t, s, 0, 3), 1)
	require.ErrorIs(t, s.Append(ctx, 0, 2, rec), ErrFenced, "replaced by epoch 3")
	s.Unload(0, 3)
	require.ErrorIs(t, s.Append(ctx, 0, 3, rec), ErrNotOwner, "unloaded")
	require.Error(t, s.Load(ctx, 1, 1, func(records.StateRecord) error { return nil }), "partition out of range")
	require.Error(t, s.Append(ctx, 0, 3, []records.StateRecord{{}}), "invalid record")
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Load(ctx, 0, 4, func(records.StateRecord) error { return nil }), ErrClosed)
}

func TestFileStoreOpenErrors(t *testing.T) {
	dir := t.TempDir()
	s := newFileStore(t, dir, 3)
	_, err := NewFileStore(dir, FileStoreOptions{NumPartitions: 3})
	require.ErrorIs(t, err, ErrStoreLocked, "a second store on the directory")
	loadAll(t, s, 0, 1)
	require.NoError(t, s.Append(context.Background(), 0, 1, []records.StateRecord{stateRec("m", 0, statemachine.Mirroring, 1)}))
	require.NoError(t, s.Close())

	_, err = NewFileStore(dir, FileStoreOptions{NumPartitions: 4})
	require.ErrorIs(t, err, ErrTopicMismatch, "another partition count")

	seg := filepath.Join(s.PartitionDir(0), "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	data[len(data)-2] ^= 0xff
	require.NoError(t, os.WriteFile(seg, data, 0o644))
	s = newFileStore(t, dir, 3)
	err = s.Load(context.Background(), 0, 1, func(records.StateRecord) error { return nil })
	require.ErrorIs(t, err, ErrCorruptStateFile, "a corrupt record of a cleanly closed log")
	require.NoError(t, s.Close())

	meta := filepath.Join(dir, FileStoreMetaFile)
	require.NoError(t, os.WriteFile(meta, []byte("kmirror-file-store 2\npartitions 3\n"), 0o644))
	_, err = NewFileStore(dir, FileStoreOptions{NumPartitions: 3})
	require.ErrorIs(t, err, ErrStateFileVersion)
	require.NoError(t, os.WriteFile(meta, []byte("garbage"), 0o644))
	_, err = NewFileStore(dir, FileStoreOptions{NumPartitions: 3})
	require.ErrorIs(t, err, ErrCorruptStateFile)
}

// TestFileStoreKafkaDumpLog checks that Kafka's DumpLogSegments reads a state partition
// and prints the records (with the jars of scripts/kafka/kafka.sh, as the FileLog test).
func TestFileStoreKafkaDumpLog(t *testing.T) {
	cp := os.Getenv("KMIRROR_KAFKA_CLASSPATH")
	if cp == "" {
		if os.Getenv("KMIRROR_REQUIRE_KAFKA") == "1" {
			t.Fatal("KMIRROR_KAFKA_CLASSPATH is not set: run scripts/kafka/kafka.sh install and source its env file")
		}
		t.Skip("Kafka jars not installed: run scripts/kafka/kafka.sh install and source its env file")
	}
	dir := t.TempDir()
	s := newFileStore(t, dir, 1)
	loadAll(t, s, 0, 1)
	for i := range 5 {
		require.NoError(t, s.Append(context.Background(), 0, 1, []records.StateRecord{stateRec("m", int32(i), statemachine.Mirroring, 1),
			{PartitionStateKey: &records.MirrorPartitionStateKey{MirrorName: "m", TopicID: topicFoo, Partition: 100}}}))
	}
	require.NoError(t, s.Close())
	seg := filepath.Join(s.PartitionDir(0), "00000000000000000000.log")
	out, err := exec.Command("java", "-Xmx256m", "-cp", cp, "org.apache.kafka.tools.DumpLogSegments",
		"--files", seg, "--deep-iteration", "--print-data-log").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("%s", out)
	for _, bad := range []string{"Exception", "corrupt", "isvalid: false"} {
		require.NotContains(t, string(out), bad)
	}
	require.Equal(t, 5, strings.Count(string(out), "baseOffset:"), "five batches")
	require.Equal(t, 10, strings.Count(string(out), "| offset:"), "ten records")
	require.Contains(t, string(out), fmt.Sprintf("lastOffset: %d", 9))
}
