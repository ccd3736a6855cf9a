package dataplane

import (
	"context"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// startFileSite is startSite over a file destination, whose logs read into
// the data plane's reused buffers.
func startFileSite(t *testing.T) *site {
	t.Helper()
	dst, err := mirror.OpenFileDestination(t.TempDir(), "cluster-"+t.Name(), fetcher.FileLogOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dst.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dp, err := New(Config{Destination: dst, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(ln.Addr().(*net.TCPAddr).Port)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dp.Close()) })
	srv, err := admin.NewServer(admin.ServerConfig{Handler: admin.UnimplementedHandler{}, Extra: dp.APIs()})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, admin.ErrServerClosed)
	})
	return &site{dst: dst, dp: dp, addr: ln.Addr().String()}
}

// TestFetchReusedBuffersKeepEveryResponse: concurrent fetches of different
// partitions and offsets from a file destination, whose reads go into pooled
// buffers, each get exactly their log's bytes: a buffer is reused only after
// the response holding it was written.
func TestFetchReusedBuffersKeepEveryResponse(t *testing.T) {
	s := startFileSite(t)
	spec := s.topic(t, "pooled", 4)
	want := map[[2]int64][]byte{} // partition, offset -> bytes
	for p := int32(0); p < 4; p++ {
		l := s.log(t, "pooled", p)
		_, ok := l.(bufferReader)
		require.True(t, ok, "a file log reads into buffers")
		for b := int64(0); b < 8; b++ {
			require.NoError(t, l.Append(dataBatch(t, b*10, 0, 10, -1, 0, false)))
		}
		for off := int64(0); off < 80; off += 10 {
			got, err := l.Read(off, 1<<20)
			require.NoError(t, err)
			want[[2]int64{int64(p), off}] = got
		}
	}
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		cl := s.client(t, kgo.RetryTimeout(0))
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p, off := int32((c+i)%4), int64((i*3+c)%8)*10
				resp, err := fetchReq(spec, p, off, nil).RequestWith(context.Background(), cl)
				if !assertFetch(t, err, resp, want[[2]int64{int64(p), off}]) {
					return
				}
			}
		}(c)
	}
	wg.Wait()
}

// assertFetch checks one fetch response carries exactly recs.
func assertFetch(t *testing.T, err error, resp *kmsg.FetchResponse, recs []byte) bool {
	return assertNoErr(t, err) && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 &&
		assertBytes(t, recs, resp.Topics[0].Partitions[0].RecordBatches)
}

func assertNoErr(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("fetch: %v", err)
	}
	return err == nil
}

func assertBytes(t *testing.T, want, got []byte) bool {
	if string(want) != string(got) {
		t.Errorf("fetched %d bytes, want %d, not the log's", len(got), len(want))
		return false
	}
	return true
}

// TestReadBuffersPooling: a Fetch served outside an admin server (Serve)
// reads into fresh memory; lent buffers go back on release only.
func TestReadBuffersPooling(t *testing.T) {
	require.Nil(t, fetchBuffers(context.Background()))
	part := partition{log: fetcher.NewMemoryLog(fetcher.MemoryLogOptions{})}
	rb := &readBuffers{}
	_, wrapped := part.pooled(rb, true).log.(pooledLog)
	require.False(t, wrapped, "a memory log has no ReadBuffer")
	rb.keep(make([]byte, 10))
	require.Empty(t, rb.lent, "a read too small to pool is not kept")
	rb.keep(make([]byte, minPooledRead))
	require.Len(t, rb.lent, 1)
	rb.release()
	require.Empty(t, rb.lent)
}

// TestPooledReadLendsOneBuffer: a read lends exactly the buffer its records
// are in, whether the pooled buffer it took fitted them or was too small (a
// small one went back to the pool instead of staying lent with the new
// memory until the response was done).
func TestPooledReadLendsOneBuffer(t *testing.T) {
	dst, err := mirror.OpenFileDestination(t.TempDir(), "cluster-lend", fetcher.FileLogOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dst.Close() })
	s := &site{dst: dst}
	s.topic(t, "lend", 1)
	l := s.log(t, "lend", 0)
	require.NoError(t, l.Append(dataBatch(t, 0, 0, 1000, -1, 0, false)))
	want, err := l.Read(0, 1<<20)
	require.NoError(t, err)
	require.Greater(t, len(want), minPooledRead)
	part := partition{log: l}
	for _, size := range []int{minPooledRead, 2 * len(want)} { // too small, enough
		// The pool may drop what it is given (it does at random under the
		// race detector): several rounds make the small buffer's case certain.
		for range 20 {
			for readBufferPool.Get() != nil {
			}
			small := make([]byte, 0, size)
			readBufferPool.Put(&small)
			rb := &readBuffers{}
			got, err := part.pooled(rb, true).log.Read(0, 1<<20)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Len(t, rb.lent, 1, "one lent buffer per read (pooled buffer of %d bytes)", size)
			require.Same(t, &got[0], &(*rb.lent[0])[:1][0], "the lent buffer holds the records")
			rb.release()
		}
	}
}

// wideFetch starts a file site with topic of parts partitions that each hold batch,
// and returns a Fetch of every partition from offset 0 (Kafka's default 1 MiB partition
// limit, maxBytes for the response) and a client whose connection is set up by a fetch
// of one partition: the read-buffer pool is as cold as a server's that has served only
// small fetches.
func wideFetch(t *testing.T, topic string, parts int32, batch []byte, maxBytes int32) (*kmsg.FetchRequest, *kgo.Client) {
	s := startFileSite(t)
	spec := s.topic(t, topic, parts)
	req := fetchReq(spec, 0, 0, nil)
	req.MaxBytes = maxBytes
	rt := &req.Topics[0]
	rt.Partitions = rt.Partitions[:0]
	for p := range parts {
		require.NoError(t, s.log(t, topic, p).Append(batch))
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 0, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	cl := s.client(t, kgo.RetryTimeout(0))
	_, err := fetchReq(spec, 0, 0, nil).RequestWith(context.Background(), cl)
	require.NoError(t, err)
	return req, cl
}

// fetchAllocating sends req and returns its response with the bytes the process
// allocated meanwhile (client and server).
func fetchAllocating(t *testing.T, req *kmsg.FetchRequest, cl *kgo.Client) (*kmsg.FetchResponse, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := req.RequestWith(context.Background(), cl)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	return resp, after.TotalAlloc - before.TotalAlloc
}

// TestFetchManyPartitionsAllocatesWhatItReads: a Fetch of 300 partitions
// that each hold one small batch, with Kafka's default 1 MiB partition
// limit, allocates about what it returns, not the limit per partition (300
// MiB before; a fetch of 12,500 such partitions made the source allocate
// 12.5 GiB).
func TestFetchManyPartitionsAllocatesWhatItReads(t *testing.T) {
	const parts = 300
	req, cl := wideFetch(t, "wide", parts, dataBatch(t, 0, 0, 1, -1, 0, false), 50<<20)
	fetch := func() uint64 {
		resp, allocated := fetchAllocating(t, req, cl)
		n := 0
		for _, p := range resp.Topics[0].Partitions {
			require.Zero(t, p.ErrorCode)
			require.NotEmpty(t, p.RecordBatches)
			n++
		}
		require.Equal(t, parts, n)
		return allocated
	}
	for range 3 {
		require.Less(t, fetch(), uint64(32<<20), "bytes allocated by one Fetch (client and server)")
	}
}

// TestFetchSpentBudgetReadsNoBatches: once a Fetch's response budget
// (MaxBytes) is nearly spent, a later partition whose first batch does not
// fit what is left is answered without records, its high watermark set, and
// without its batch being read (Kafka's minOneMessage is only for the first
// partition with data). Before, each of those partitions read its first
// batch whole to drop it: a 1,000-partition mirror's source read several
// times what it sent.
func TestFetchSpentBudgetReadsNoBatches(t *testing.T) {
	const parts = 200
	big := dataBatch(t, 0, 0, 10000, -1, 0, false)
	req, cl := wideFetch(t, "spent", parts, big, int32(len(big)+1000))
	fetch := func() uint64 {
		resp, allocated := fetchAllocating(t, req, cl)
		got := resp.Topics[0].Partitions
		require.Len(t, got, parts)
		require.Equal(t, big, got[0].RecordBatches, "the first partition gets its batch")
		for _, p := range got[1:] {
			require.Zero(t, p.ErrorCode)
			require.Empty(t, p.RecordBatches, "partition %d: its batch does not fit the budget left", p.Partition)
			require.EqualValues(t, 10000, p.HighWatermark, "partition %d", p.Partition)
		}
		return allocated
	}
	for range 3 {
		// The batches not sent are 199 x 100 KB, about 20 MB.
		require.Less(t, fetch(), uint64(6<<20), "bytes allocated by one Fetch (client and server)")
	}
}

// TestLongPollRecyclesDroppedReads: a Fetch that long-polls with data ready
// but below MinBytes re-reads on every poll; the reads of dropped responses
// go back to the pool instead of piling up, and the one sent is intact.
func TestLongPollRecyclesDroppedReads(t *testing.T) {
	dst, err := mirror.OpenFileDestination(t.TempDir(), "cluster-poll", fetcher.FileLogOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dst.Close() })
	dp, err := New(Config{Destination: dst, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, PollInterval: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dp.Close()) })
	s := &site{dst: dst, dp: dp}
	spec := s.topic(t, "poll", 1)
	l := s.log(t, "poll", 0)
	require.NoError(t, l.Append(dataBatch(t, 0, 0, 1000, -1, 0, false)))
	want, err := l.Read(0, 1<<20)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(want), minPooledRead, "a read worth pooling")
	req := fetchReq(spec, 0, 0, nil)
	req.Version = 13
	req.MinBytes, req.MaxWaitMillis = 1<<20, 200
	rb := &readBuffers{}
	// The poll reads again at every tick and ends at MaxWait with one more
	// read, which is the response: every earlier read was recycled. (Ending the
	// poll by a context deadline instead would race the last read on a loaded
	// machine: a read under an expired context returns no records.)
	ctx := context.Background()
	resp, err := dp.fetchWith(ctx, req, rb)
	require.NoError(t, err)
	require.Equal(t, want, resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches)
	require.Len(t, rb.lent, 1, "only the sent response's buffer is still lent")
}
