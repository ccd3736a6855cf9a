package fetcher

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

const (
	crashDirEnv   = "KMIRROR_CRASH_CHILD_DIR"
	crashFsyncEnv = "KMIRROR_CRASH_CHILD_FSYNC"
	crashBatches  = 1500
)

var crashOpts = FileLogOptions{SegmentBytes: 32 << 10, IndexIntervalBytes: 1024}

// crashSequence is the deterministic sequence of batches the crash child
// writes: data batches of varying sizes and epochs, transactions of producer
// 42 opened and committed, and their cumulative next offsets.
var crashSequence = sync.OnceValues(func() ([][]byte, []int64) {
	var seq [][]byte
	var next []int64
	var off int64
	for k := 0; k < crashBatches; k++ {
		ep := int32(k / 100)
		var b []byte
		var err error
		switch k % 20 {
		case 5:
			b, err = records.BuildBatch(records.BatchSpec{BaseOffset: off, PartitionLeaderEpoch: ep, Transactional: true, ProducerID: 42, ProducerEpoch: 1, BaseSequence: int32(k)}, []records.Record{{Value: []byte(fmt.Sprint("txn", k))}})
		case 8:
			b = records.BuildControlBatch(records.ControlBatchSpec{BaseOffset: off, PartitionLeaderEpoch: ep, ProducerID: 42, ProducerEpoch: 1, Type: records.ControlCommit})
		default:
			n := 1 + k*7%5
			recs := make([]records.Record, n)
			for i := range recs {
				recs[i] = records.Record{Key: []byte(strconv.Itoa(k)), Value: make([]byte, 10+k*13%300)}
				recs[i].Value[0] = byte(k)
			}
			b, err = records.BuildBatch(records.BatchSpec{BaseOffset: off, PartitionLeaderEpoch: ep, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: int64(k)}, recs)
		}
		if err != nil {
			panic(err)
		}
		off = records.Batch(b).NextOffset()
		seq = append(seq, b)
		next = append(next, off)
	}
	return seq, next
})

// crashResume returns the index of the first batch after offset end, or -1
// when end is not a batch boundary of the sequence.
func crashResume(end int64) int {
	_, next := crashSequence()
	if end == 0 {
		return 0
	}
	for k, n := range next {
		if n == end {
			return k + 1
		}
	}
	return -1
}

// TestCrashChild is the child process of TestFileLogCrash; it does nothing
// unless started by it. It appends the crash sequence from where the log
// ends, in groups of 1-3 batches, printing "ack <next batch index>" after
// each append, then waits to be killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("child process of TestFileLogCrash")
	}
	opts := crashOpts
	p, err := strconv.Atoi(os.Getenv(crashFsyncEnv))
	require.NoError(t, err)
	opts.Fsync = FsyncPolicy(p)
	l, err := OpenFileLog(dir, opts)
	require.NoError(t, err)
	seq, _ := crashSequence()
	k := crashResume(l.LogEndOffset())
	require.GreaterOrEqual(t, k, 0)
	out := bufio.NewWriter(os.Stdout)
	for k < len(seq) {
		g := min(k+1+k%3, len(seq))
		var buf []byte
		for _, b := range seq[k:g] {
			buf = append(buf, b...)
		}
		require.NoError(t, l.Append(buf))
		k = g
		fmt.Fprintf(out, "ack %d\n", k)
		require.NoError(t, out.Flush())
	}
	fmt.Fprintln(out, "done")
	require.NoError(t, out.Flush())
	select {} // wait for SIGKILL
}

// TestFileLogCrash SIGKILLs a child appending to a FileLog at random points
// and checks that every reopen recovers a CRC-valid prefix of the sequence
// holding every acknowledged append, with the state a reference MemoryLog
// computes for that prefix, and that appending continues to the full
// sequence with byte equality.
func TestFileLogCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	seq, _ := crashSequence()
	var full []byte
	for _, b := range seq {
		full = append(full, b...)
	}
	rng := rand.New(rand.NewSource(1279))
	for _, policy := range []FsyncPolicy{FsyncEveryAppend, FsyncNever} {
		dir := t.TempDir()
		opts := crashOpts
		opts.Fsync = policy
		acked := 0
		for run := 0; run < 10; run++ {
			target := 1 + rng.Intn(25)
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashFsyncEnv+"="+strconv.Itoa(int(policy)))
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			sc := bufio.NewScanner(stdout)
			seen := 0
			for seen < target && sc.Scan() {
				line := sc.Text()
				if k, ok := strings.CutPrefix(line, "ack "); ok {
					n, err := strconv.Atoi(k)
					require.NoError(t, err)
					acked = max(acked, n)
					seen++
				} else if line == "done" {
					break
				}
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			require.Greater(t, seen, 0, "run %d: child made no progress", run)

			l := openFile(t, dir, opts)
			got := readAll(t, l)
			require.True(t, len(got) <= len(full) && string(full[:len(got)]) == string(got), "run %d: recovered log is not a prefix", run)
			k := crashResume(l.LogEndOffset())
			require.GreaterOrEqual(t, k, acked, "run %d (policy %d): acknowledged appends lost", run, policy)
			ref := NewMemoryLog(MemoryLogOptions{})
			if k > 0 {
				require.NoError(t, ref.Append(full[:len(got)]))
			}
			require.Equal(t, ref.LogEndOffset(), l.LogEndOffset())
			require.Equal(t, ref.Epochs().Entries(), l.Epochs().Entries())
			require.Equal(t, ref.OpenTransactions(), l.OpenTransactions())
			require.Equal(t, ref.LastStableOffset(), l.LastStableOffset())
			require.NoError(t, l.Close())
			acked = k
		}
		l := openFile(t, dir, opts)
		// Continue to the full sequence (in groups of 50 batches, so the
		// every-append policy does not fsync a thousand times).
		for k := crashResume(l.LogEndOffset()); k < len(seq); k += 50 {
			var buf []byte
			for _, b := range seq[k:min(k+50, len(seq))] {
				buf = append(buf, b...)
			}
			require.NoError(t, l.Append(buf))
		}
		require.Equal(t, full, readAll(t, l))
		require.NoError(t, l.Close())
		l = openFile(t, dir, opts)
		require.Equal(t, full, readAll(t, l))
		require.NoError(t, l.Close())
	}
}
