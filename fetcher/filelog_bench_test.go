package fetcher

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// benchChunk returns 1 MiB of batches (64 batches of 16 records of 1 KiB)
// and the offsets it spans.
func benchChunk(b *testing.B) ([]byte, []int, int64) {
	var buf []byte
	var pos []int
	var off int64
	for i := 0; i < 64; i++ {
		recs := make([]records.Record, 16)
		for j := range recs {
			recs[j] = records.Record{Value: make([]byte, 1000)}
		}
		bt, err := records.BuildBatch(records.BatchSpec{BaseOffset: off, PartitionLeaderEpoch: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		require.NoError(b, err)
		pos = append(pos, len(buf))
		buf = append(buf, bt...)
		off += 16
	}
	return buf, pos, off
}

// restamp moves every batch of chunk to start at base (outside the CRC).
func restamp(chunk []byte, pos []int, base int64) {
	for i, p := range pos {
		records.Batch(chunk[p:]).SetBaseOffset(base + int64(i)*16)
	}
}

func BenchmarkFileLogAppend(b *testing.B) {
	for _, c := range []struct {
		name   string
		policy FsyncPolicy
	}{{"fsync=never", FsyncNever}, {"fsync=onflush", FsyncOnFlush}, {"fsync=each", FsyncEveryAppend}} {
		b.Run(c.name, func(b *testing.B) {
			chunk, pos, span := benchChunk(b)
			l := openFile(b, b.TempDir(), FileLogOptions{Fsync: c.policy, SegmentBytes: 64 << 20})
			defer l.Close()
			b.SetBytes(int64(len(chunk)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%256 == 255 { // bound the disk used
					b.StopTimer()
					require.NoError(b, l.TruncateFullyAndStartAt(l.LogEndOffset()))
					b.StartTimer()
				}
				restamp(chunk, pos, l.LogEndOffset())
				if err := l.Append(chunk); err != nil {
					b.Fatal(err)
				}
			}
			_ = span
		})
	}
}

func BenchmarkFileLogRead(b *testing.B) {
	chunk, pos, span := benchChunk(b)
	l := openFile(b, b.TempDir(), FileLogOptions{SegmentBytes: 16 << 20})
	defer l.Close()
	const chunks = 64
	for i := 0; i < chunks; i++ {
		restamp(chunk, pos, int64(i)*span)
		require.NoError(b, l.Append(chunk))
	}
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Start mid-batch to exercise the index lookup.
		off := int64(i%chunks)*span + 5
		got, err := l.Read(off, len(chunk))
		if err != nil || len(got) == 0 {
			b.Fatal(err, len(got))
		}
	}
}

// BenchmarkFileLogOpen reopens a cleanly closed log of 64 MiB in 4 segments
// (1 KiB records in batches of 16 KiB): what a restart costs per partition.
// It reports the bytes the open read (rchar of /proc/self/io) per open.
func BenchmarkFileLogOpen(b *testing.B) {
	chunk, pos, span := benchChunk(b)
	dir := b.TempDir()
	opts := FileLogOptions{SegmentBytes: 16 << 20}
	l := openFile(b, dir, opts)
	for i := 0; i < 64; i++ {
		restamp(chunk, pos, int64(i)*span)
		require.NoError(b, l.Append(chunk))
	}
	require.NoError(b, l.Close())
	before := readChars(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := OpenFileLog(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		if l.LogEndOffset() != 64*span {
			b.Fatal(l.LogEndOffset())
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(readChars(b)-before)/float64(b.N), "read-B/op")
}

// readChars returns the bytes this process read so far (rchar), 0 without
// /proc.
func readChars(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkFileLogIdlePartition opens 2,000 partitions' FileLogs (a lock per
// root, as LocalDestination holds it), appends a batch to each and flushes
// it, then reports what an idle open partition costs: the heap bytes it
// keeps (heap after a GC, and goroutine stacks) and the descriptors the process holds for it, with a
// FileCache of 64 files shared by all.
func BenchmarkFileLogIdlePartition(b *testing.B) {
	const n = 2000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := b.TempDir()
		files := NewFileCache(64)
		batch := buildBatch(b, records.BatchSpec{BaseOffset: 0, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 3, 100)
		fds0 := openDescriptors()
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		b.StartTimer()
		logs := make([]*FileLog, n)
		for p := range logs {
			l, err := OpenFileLog(filepath.Join(root, strconv.Itoa(p)), FileLogOptions{Files: files, DirLockedByCaller: true})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Append(batch); err != nil {
				b.Fatal(err)
			}
			if err := l.Flush(); err != nil {
				b.Fatal(err)
			}
			logs[p] = l
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&m1)
		fds := openDescriptors() - fds0
		used := func(m *runtime.MemStats) int64 { return int64(m.HeapAlloc + m.StackInuse) }
		b.ReportMetric(float64(used(&m1)-used(&m0))/n, "heap+stack-B/partition")
		b.ReportMetric(float64(fds)/n, "fds/partition")
		b.ReportMetric(float64(fds), "fds")
		for _, l := range logs {
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// openDescriptors counts the process's open descriptors, 0 without /proc.
func openDescriptors() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
