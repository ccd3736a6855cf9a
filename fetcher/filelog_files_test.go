package fetcher

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// The many-partitions child: TestFileLogManyPartitionsChild, run by
// re-executing the test binary with manyChildEnv naming a directory, lowers
// RLIMIT_NOFILE to manyChildNoFile and works manyChildPartitions FileLogs
// there with the process-wide DefaultFileCache.
const (
	manyChildEnv        = "KMIRROR_FILELOG_MANY_CHILD"
	manyChildNoFile     = 1024
	manyChildPartitions = 10000
)

// TestFileLogManyPartitions: with RLIMIT_NOFILE at 1024, a process opens
// 10,000 FileLogs (a host's lock per root, as LocalDestination holds it:
// DirLockedByCaller), appends to each, reads each back byte for byte while
// all are open, closes them, reopens them all and reads everything again.
// Before the FileCache every open log held its lock file and its active
// segment's .log and .index: the child ran out of descriptors near 340 logs.
func TestFileLogManyPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 partitions")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileLogManyPartitionsChild$", "-test.v")
	cmd.Env = append(os.Environ(), manyChildEnv+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child failed:\n%s", tail(out, 4000))
	require.Contains(t, string(out), "many-partitions ok")
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func TestFileLogManyPartitionsChild(t *testing.T) {
	root := os.Getenv(manyChildEnv)
	if root == "" {
		t.Skip("run as a child by TestFileLogManyPartitions")
	}
	lim := syscall.Rlimit{Cur: manyChildNoFile, Max: manyChildNoFile}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	files := DefaultFileCache()
	require.LessOrEqual(t, files.Max(), manyChildNoFile/2, "the default bound leaves half the limit to the rest")

	batch := func(p int, base int64) []byte {
		return buildBatch(t, records.BatchSpec{BaseOffset: base, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 3, 50+p%200)
	}
	dir := func(p int) string { return filepath.Join(root, "t-"+strconv.Itoa(p)) }
	logs := make([]*FileLog, manyChildPartitions)
	// parallel runs fn for every partition on 16 goroutines and returns the
	// first error.
	parallel := func(fn func(p int) error) error {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
		)
		next := make(chan int)
		for range 16 {
			wg.Go(func() {
				for p := range next {
					if err := fn(p); err != nil {
						mu.Lock()
						if first == nil {
							first = fmt.Errorf("partition %d: %w", p, err)
						}
						mu.Unlock()
					}
				}
			})
		}
		for p := range manyChildPartitions {
			next <- p
		}
		close(next)
		wg.Wait()
		return first
	}
	readBack := func(p int, want []byte) error {
		got, err := logs[p].Read(0, 1<<20)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("read %d bytes, not the %d appended", len(got), len(want))
		}
		return nil
	}
	opts := FileLogOptions{DirLockedByCaller: true}
	require.NoError(t, parallel(func(p int) (err error) {
		if logs[p], err = OpenFileLog(dir(p), opts); err != nil {
			return err
		}
		if err := logs[p].Append(batch(p, 0)); err != nil {
			return err
		}
		return logs[p].Append(batch(p, 3))
	}))
	require.NoError(t, parallel(func(p int) error {
		return readBack(p, append(batch(p, 0), batch(p, 3)...))
	}))
	st := files.Stats()
	require.LessOrEqual(t, st.Open, st.Max)
	require.NotZero(t, st.Evictions, "10,000 partitions' files do not fit in %d", st.Max)
	require.NoError(t, parallel(func(p int) error { return logs[p].Close() }))
	require.Zero(t, files.Stats().Open, "closed logs hold no descriptor")

	// Reopen every log: the data is durable, and appends go on where they were.
	require.NoError(t, parallel(func(p int) (err error) {
		if logs[p], err = OpenFileLog(dir(p), opts); err != nil {
			return err
		}
		if end := logs[p].LogEndOffset(); end != 6 {
			return fmt.Errorf("log end %d after reopen, want 6", end)
		}
		return logs[p].Append(batch(p, 6))
	}))
	require.NoError(t, parallel(func(p int) error {
		return readBack(p, append(append(batch(p, 0), batch(p, 3)...), batch(p, 6)...))
	}))
	require.NoError(t, parallel(func(p int) error { return logs[p].Close() }))
	fmt.Println("many-partitions ok")
}

// TestFileCacheEvictionConcurrent: with a cache of 4 files shared by 8 logs,
// concurrent appenders, readers and flushers keep evicting each other's
// files; every read returns whole batches that were appended, every append
// lands, and the logs reopen with all of it (run it under -race).
func TestFileCacheEvictionConcurrent(t *testing.T) {
	files := NewFileCache(4)
	root := t.TempDir()
	const nLogs, nBatches = 8, 60
	logs := make([]*FileLog, nLogs)
	opts := FileLogOptions{Files: files, SegmentBytes: 4 << 10, IndexIntervalBytes: 256}
	for i := range logs {
		logs[i] = openFile(t, filepath.Join(root, strconv.Itoa(i)), opts)
	}
	want := func(i int, base int64) []byte {
		return buildBatch(t, records.BatchSpec{BaseOffset: base, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 2, 100+i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range logs {
		wg.Go(func() { // the writer
			for b := range int64(nBatches) {
				if err := logs[i].Append(want(i, 2*b)); err != nil {
					errs <- err
					return
				}
				if b%7 == 0 {
					if err := logs[i].Flush(); err != nil {
						errs <- err
						return
					}
				}
			}
		})
		wg.Go(func() { // a reader checking every batch it can see
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range 300 {
				end := logs[i].LogEndOffset()
				if end == 0 {
					continue
				}
				off := rng.Int64N(end) &^ 1
				got, err := logs[i].Read(off, 1)
				if err != nil {
					errs <- fmt.Errorf("log %d read %d: %w", i, off, err)
					return
				}
				if w := want(i, off); !bytes.HasPrefix(got, w) {
					errs <- fmt.Errorf("log %d read %d: %d bytes, not the batch appended there", i, off, len(got))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := files.Stats()
	require.NotZero(t, st.Evictions)
	require.LessOrEqual(t, st.Open, st.Max)
	for i, l := range logs {
		require.NoError(t, l.Close())
		l = openFile(t, filepath.Join(root, strconv.Itoa(i)), opts)
		require.Equal(t, int64(2*nBatches), l.LogEndOffset())
		var all []byte
		for b := range int64(nBatches) {
			all = append(all, want(i, 2*b)...)
		}
		var got []byte
		for off := int64(0); off < l.LogEndOffset(); {
			part, err := l.Read(off, 1<<20)
			require.NoError(t, err)
			require.NotEmpty(t, part)
			got = append(got, part...)
			infos := splitOrFail(t, part, off)
			off = infos[len(infos)-1].next()
		}
		require.Equal(t, all, got, "log %d", i)
		require.NoError(t, l.Close())
	}
	require.Zero(t, files.Stats().Open)
}

func splitOrFail(t *testing.T, b []byte, from int64) []batchInfo {
	infos, err := splitBatches(b, from)
	require.NoError(t, err)
	return infos
}

// TestFileCacheTooManyOpenFiles: when the process is out of descriptors and
// the cache has none idle to close, the log's operation fails with
// ErrTooManyOpenFiles (and the errno), the log stays usable, and the same
// operation succeeds once descriptors are free.
func TestFileCacheTooManyOpenFiles(t *testing.T) {
	files := NewFileCache(2)
	l := openFile(t, t.TempDir(), FileLogOptions{Files: files, DirLockedByCaller: true})
	b := buildBatch(t, records.BatchSpec{BaseOffset: 0, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 1, 10)
	require.NoError(t, l.Append(b))
	require.NoError(t, l.Flush())
	// Close the log's idle files, then use up the process's descriptors.
	files.mu.Lock()
	v := files.evictLocked(0)
	files.mu.Unlock()
	closeVictims(v)
	held := holdAllDescriptors(t)
	_, err := l.Read(0, 1<<20)
	require.ErrorIs(t, err, ErrTooManyOpenFiles)
	require.ErrorIs(t, err, syscall.EMFILE)
	err = l.Append(buildBatch(t, records.BatchSpec{BaseOffset: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 1, 10))
	require.ErrorIs(t, err, ErrTooManyOpenFiles)
	other := filepath.Join(t.TempDir(), "other")
	_, err = OpenFileLog(other, FileLogOptions{Files: files, DirLockedByCaller: true})
	require.ErrorIs(t, err, ErrTooManyOpenFiles, "an open that cannot read its files")
	for _, f := range held {
		f.Close()
	}
	got, err := l.Read(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, b, got)
	require.Equal(t, int64(1), l.LogEndOffset(), "the failed append changed nothing")
	require.NoError(t, l.Close())
}

// holdAllDescriptors lowers RLIMIT_NOFILE to what is open plus a few (the
// limit is restored at cleanup) and opens files until EMFILE.
func holdAllDescriptors(t *testing.T) []*os.File {
	var old syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old))
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	lim := syscall.Rlimit{Cur: uint64(len(ents) + 64), Max: old.Max}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	var held []*os.File
	t.Cleanup(func() {
		for _, f := range held {
			f.Close()
		}
		require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old))
	})
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			require.True(t, errors.Is(err, syscall.EMFILE), "%v", err)
			return held
		}
		held = append(held, f)
	}
}

// TestFileLogOpenTrustsRecoveryPoint: a log whose segment files have not
// changed since its recovery point was written opens with only the batch
// headers read below the recovery point (no CRC checked), and with the same
// data, epochs and end; a segment changed after the recovery point is
// checked whole (TestFileLogCorruptionRefused damages files after a clean
// Close and sees every damage refused).
func TestFileLogOpenTrustsRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	l := openFile(t, dir, corruptOpts)
	all := appendN(t, l, 40)
	epochs := l.Epochs()
	require.NoError(t, l.Close())
	rp := filepath.Join(dir, RecoveryPointFileName)
	checked := func() (n int) {
		l := openFile(t, dir, corruptOpts)
		defer func() { require.NoError(t, l.Close()) }()
		for _, s := range l.segs {
			n += s.crcChecked
		}
		require.Greater(t, len(l.segs), 4)
		require.Equal(t, int64(120), l.LogEndOffset())
		require.Equal(t, epochs, l.Epochs())
		require.Empty(t, l.Discarded())
		var got []byte
		for off := int64(0); off < 120; {
			part, err := l.Read(off, 1<<20)
			require.NoError(t, err)
			got = append(got, part...)
			infos := splitOrFail(t, part, off)
			off = infos[len(infos)-1].next()
		}
		require.Equal(t, all, got)
		return n
	}
	// The recovery point written after the segments' last change (its
	// modification time set ahead of theirs, as the file system's coarse
	// clock may give both the same time in a test).
	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(rp, later, later))
	require.Zero(t, checked(), "no CRC checked below a recovery point newer than every segment")
	// A recovery point older than the segments' last change: checked whole.
	earlier := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(rp, earlier, earlier))
	require.Equal(t, 40, checked())
}
