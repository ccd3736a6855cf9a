package localdest

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

// BenchmarkCloseAtScale measures LocalDestination.Close, the destination's part of
// a site's shutdown, with KMIRROR_CLOSE_PARTITIONS partitions (default 10,000) that
// each appended one batch since their last Flush (so every log fsyncs its segment
// and writes its recovery point at Close); then it reopens the root and checks that
// every partition holds its batch. It reports close-s, and the descriptors the
// process held with every log open.
//
//	go test -run '^$' -bench CloseAtScale -benchtime 1x ./mirror/localdest/
func BenchmarkCloseAtScale(b *testing.B) {
	n := int32(10000)
	if v, err := strconv.Atoi(os.Getenv("KMIRROR_CLOSE_PARTITIONS")); err == nil && v > 0 {
		n = int32(v)
	}
	batch, err := records.BuildBatch(records.BatchSpec{BaseOffset: 0, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]records.Record{{Value: []byte("value")}})
	require.NoError(b, err)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := b.TempDir()
		d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
		require.NoError(b, err)
		require.NoError(b, d.CreateTopic(context.Background(), dest.TopicSpec{Name: "t", TopicID: records.UUID{1}, Partitions: n}))
		forEach(b, n, func(p int32) error {
			l, err := d.Log("t", p)
			if err != nil {
				return err
			}
			return l.Append(batch)
		})
		fds, _ := os.ReadDir("/proc/self/fd")
		b.ReportMetric(float64(len(fds)), "fds-open")
		b.StartTimer()
		start := time.Now()
		require.NoError(b, d.Close())
		b.ReportMetric(time.Since(start).Seconds(), "close-s")
		b.StopTimer()
		d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
		require.NoError(b, err)
		forEach(b, n, func(p int32) error {
			l, err := d.Log("t", p)
			if err != nil {
				return err
			}
			got, err := l.Read(0, 1<<20)
			if err != nil {
				return err
			}
			if string(got) != string(batch) {
				b.Errorf("partition %d holds %d bytes, not its batch", p, len(got))
			}
			return nil
		})
		require.NoError(b, d.Close())
	}
}

// forEach runs fn for partitions 0..n-1 on 8 goroutines and fails at the first error.
func forEach(b *testing.B, n int32, fn func(p int32) error) { forEachN(b, n, 8, fn) }

// forEachN calls fn for each of n partitions from workers goroutines.
func forEachN(b *testing.B, n int32, workers int, fn func(p int32) error) {
	var wg sync.WaitGroup
	next := make(chan int32)
	errs := make(chan error, 8)
	for range workers {
		wg.Go(func() {
			for p := range next {
				if err := fn(p); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for p := range n {
		next <- p
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
}

// BenchmarkSetReadOnlyAtScale measures a failover's and a failback's part in a file
// destination: KMIRROR_READONLY_PARTITIONS partitions (default 100,000) flagged
// read-only by 512 concurrent callers, as a stop's reconcilers do, then cleared the
// same way. It reports flag-s and clear-s, and checks the flags after a reopen.
//
//	go test -run '^$' -bench SetReadOnlyAtScale -benchtime 1x ./mirror/localdest/
func BenchmarkSetReadOnlyAtScale(b *testing.B) {
	n := int32(100000)
	if v, err := strconv.Atoi(os.Getenv("KMIRROR_READONLY_PARTITIONS")); err == nil && v > 0 {
		n = int32(v)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := b.TempDir()
		d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
		require.NoError(b, err)
		require.NoError(b, d.CreateTopic(context.Background(), dest.TopicSpec{Name: "t", TopicID: records.UUID{1}, Partitions: n}))
		b.StartTimer()
		start := time.Now()
		forEachN(b, n, 512, func(p int32) error { return d.SetReadOnly("t", p, true) })
		b.ReportMetric(time.Since(start).Seconds(), "flag-s")
		require.NoError(b, d.Close())
		d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
		require.NoError(b, err)
		for p := range n {
			require.True(b, d.ReadOnly("t", p), "partition %d", p)
		}
		start = time.Now()
		forEachN(b, n, 512, func(p int32) error { return d.SetReadOnly("t", p, false) })
		b.ReportMetric(time.Since(start).Seconds(), "clear-s")
		b.StopTimer()
		require.NoError(b, d.Close())
	}
}
