package mirrorsim

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

var flagPowerLossSeeds = flag.Int("sim.powerloss.seeds", 200, "number of seeds TestSimFileLogsPowerLoss runs")

// fileLogOptions are the FileLog options of the FileLog simulations: small segments,
// so logs roll, and sparse indexes.
func fileLogOptions(p fetcher.FsyncPolicy) fetcher.FileLogOptions {
	return fetcher.FileLogOptions{SegmentBytes: 512, IndexIntervalBytes: 128, Fsync: p}
}

// TestSimFileLogs runs the seeds on FileLogs that crash by closing without a flush and
// reopening from disk (process crashes: FsyncNever, so nothing is fsynced and the run is
// not bound by the disk).
func TestSimFileLogs(t *testing.T) {
	t.Parallel() // bound by the disk: runs alongside the CPU-bound TestSimSeeds
	n := *flagSeeds
	if testing.Short() {
		n = min(n, 100)
	}
	runFileLogs(t, n, fetcher.FsyncNever)
}

// TestSimFileLogsPowerLoss runs seeds on FileLogs with FsyncOnFlush whose every other
// crash is a power loss that drops what was not flushed (FileLogFactory). It is bound
// by the disk's fsync latency (about 12 seeds a second here), hence its own seed count
// (-sim.powerloss.seeds).
func TestSimFileLogsPowerLoss(t *testing.T) {
	t.Parallel()
	n := *flagPowerLossSeeds
	if testing.Short() {
		n = min(n, 30)
	}
	runFileLogs(t, n, fetcher.FsyncOnFlush)
}

func runFileLogs(t *testing.T, n int, p fetcher.FsyncPolicy) {
	s, err := New(Options{Steps: *flagSteps, LogFactory: FileLogFactory(t.TempDir(), fileLogOptions(p))})
	require.NoError(t, err)
	start := time.Now()
	var st stats
	// The runs wait on the disk (fsyncs of the FileLogs' metadata files) more than they
	// compute: more of them at once than there are CPUs.
	par := *flagPar
	if par <= 0 {
		par = 4 * runtime.GOMAXPROCS(0)
	}
	err = runParallel(t, s, *flagFrom, n, par, &st)
	t.Logf("%d seeds on FileLogs (fsync policy %d) in %v (%d at once)", n, p, time.Since(start), par)
	t.Logf("steps run: %s", st.String())
	logFailure(t, err)
	require.NoError(t, err)
}

// TestFileLogFactoryCrashes checks the crashes of FileLogFactory's logs through the
// simulation's own crash path: the first reopen is a power loss that drops the
// unflushed batch, the second a process crash that keeps it.
func TestFileLogFactoryCrashes(t *testing.T) {
	f := FileLogFactory(t.TempDir(), fileLogOptions(fetcher.FsyncOnFlush))
	spec := LogSpec{Seed: 1, Site: "s0", Topic: "t", Partition: 0}
	l, err := f(spec)
	require.NoError(t, err)
	w := &watchedLog{l: l, n: newNotifier(), spec: spec}
	_, err = w.BumpLeaderEpoch(4)
	require.NoError(t, err)
	batch := func(v string) []byte {
		b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]records.Record{{Value: []byte(v)}})
		require.NoError(t, err)
		return b
	}
	_, err = w.AppendAsLeader(batch("flushed"))
	require.NoError(t, err)
	require.NoError(t, w.Flush())
	_, err = w.AppendAsLeader(batch("unflushed"))
	require.NoError(t, err)
	require.EqualValues(t, 2, w.LogEndOffset())

	require.NoError(t, w.crash(f, false)) // power loss
	require.EqualValues(t, 1, w.LogEndOffset(), "the unflushed batch survived a power loss")
	require.EqualValues(t, 5, w.LeaderEpoch(), "the leader epoch is durable")

	_, err = w.AppendAsLeader(batch("unflushed again"))
	require.NoError(t, err)
	require.NoError(t, w.crash(f, false)) // process crash
	require.EqualValues(t, 2, w.LogEndOffset(), "a process crash lost written data")
	bs, _, err := readLog(w)
	require.NoError(t, err)
	require.Len(t, bs, 2)

	dir := w.inner().(*durableFileLog).dir
	require.NoError(t, w.discard())
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "Discard keeps the directory")

	l, err = f(spec) // a new run of the seed starts empty
	require.NoError(t, err)
	require.EqualValues(t, 0, l.LogEndOffset())
	require.NoError(t, l.(*durableFileLog).Discard())
}

// TestLogFactoryError checks that an error of the factory, here at the reopen after a
// crash, fails the run with it.
func TestLogFactoryError(t *testing.T) {
	errBroken := errors.New("storage unavailable")
	files := FileLogFactory(t.TempDir(), fileLogOptions(fetcher.FsyncNever))
	s, err := New(Options{LogFactory: func(spec LogSpec) (fetcher.Log, error) {
		if spec.Reopen {
			return nil, errBroken
		}
		return files(spec)
	}})
	require.NoError(t, err)
	err = s.RunSeeds(1, 50)
	require.ErrorIs(t, err, errBroken)
	require.NotErrorIs(t, err, ErrInvariant)
}

// TestFileLogFactoryCloseIsACrash checks that closing a FileLogFactory log leaves the
// files as a crash would: the leader-epoch checkpoint that Close's flush would rewrite
// for an unflushed batch of a new epoch keeps its content from before.
func TestFileLogFactoryCloseIsACrash(t *testing.T) {
	root := t.TempDir()
	f := FileLogFactory(root, fileLogOptions(fetcher.FsyncOnFlush))
	spec := LogSpec{Seed: 2, Site: "s0", Topic: "t", Partition: 0}
	l, err := f(spec)
	require.NoError(t, err)
	b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []records.Record{{Value: []byte("v")}})
	require.NoError(t, err)
	_, err = l.BumpLeaderEpoch(-1)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(b)
	require.NoError(t, err)
	require.NoError(t, l.Flush())
	_, err = l.BumpLeaderEpoch(0)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(b) // epoch 1, not flushed: the checkpoint on disk lacks it
	require.NoError(t, err)
	ckpt := filepath.Join(l.(*durableFileLog).dir, fetcher.CheckpointFileName)
	// Absent when the Flush was within fetcher's RecoveryPointInterval: it
	// stays absent.
	before, errBefore := os.ReadFile(ckpt)
	require.NoError(t, l.Close())
	after, errAfter := os.ReadFile(ckpt)
	require.Equal(t, os.IsNotExist(errBefore), os.IsNotExist(errAfter), "Close created or removed the checkpoint")
	require.Equal(t, string(before), string(after), "Close rewrote the checkpoint")
	spec.Reopen = true
	l, err = f(spec) // the first reopen is a power loss
	require.NoError(t, err)
	require.EqualValues(t, 1, l.LogEndOffset())
	require.EqualValues(t, 1, l.LeaderEpoch())
	require.NoError(t, l.(*durableFileLog).Discard())
}
