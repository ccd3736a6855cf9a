package mirrorsim

import (
	"flag"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
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
	err = runParallel(t, s, *flagFrom, n, runtime.GOMAXPROCS(0), &st)
	t.Logf("%d seeds on FileLogs (fsync policy %d) in %v", n, p, time.Since(start))
	t.Logf("steps run: %s", st.String())
	logFailure(t, err)
	require.NoError(t, err)
}
