package coordinator

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// BenchmarkFenceCheck measures the fence-first check of the write path
// (Shard.CheckWrite) on a populated shard.
func BenchmarkFenceCheck(b *testing.B) {
	s := NewShard()
	for p := range int32(1000) {
		_ = s.Replay(stateRec("m", p, statemachine.Mirroring, 3))
	}
	accept := WritePartition{TopicID: topicFoo, Partition: 500, State: statemachine.Pausing, LeaderEpoch: 1, StateEpoch: 3, LastMirrorEpoch: -1}
	refuse := accept
	refuse.LeaderEpoch = 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	defer func() { reportCPU(b, cpu, b.N) }()
	for i := 0; b.Loop(); i++ {
		p := &accept
		if i&1 == 1 {
			p = &refuse
		}
		if c := s.CheckWrite("m", *p); (c == admin.CodeNone) != (i&1 == 0) {
			b.Fatal(c)
		}
	}
}

// BenchmarkLoadMemory measures loading (replaying) 1,000,000 state records
// from a MemoryStore into a shard.
func BenchmarkLoadMemory(b *testing.B) {
	const n = 1_000_000
	ms := NewMemoryStore()
	recs := make([]records.StateRecord, 0, n)
	for i := range n {
		r := stateRec(fmt.Sprintf("m%d", i%10), int32(i%50_000), statemachine.Mirroring, int32(i))
		recs = append(recs, r)
	}
	ms.logs[0] = recs
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	defer func() { reportCPU(b, cpu, b.N) }()
	for i := int32(0); b.Loop(); i++ {
		s := NewShard()
		if err := ms.Load(context.Background(), 0, i, s.Replay); err != nil {
			b.Fatal(err)
		}
		if s.Len() != 50_000 {
			b.Fatal(s.Len())
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkLoadKafka measures loading 20,000 state records from a KafkaStore
// on kfake.
func BenchmarkLoadKafka(b *testing.B) {
	const n, per = 20_000, 500
	c := newKfake(b)
	cfg := kafkaCfg(c, 1)
	ks := newKafkaStore(b, cfg)
	ctx := context.Background()
	if err := ks.Load(ctx, 0, 0, func(records.StateRecord) error { return nil }); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += per {
		batch := make([]records.StateRecord, per)
		for j := range batch {
			batch[j] = stateRec("m", int32(i+j), statemachine.Mirroring, 1)
		}
		if err := ks.Append(ctx, 0, 0, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	cpu := cpuTime()
	defer func() { reportCPU(b, cpu, b.N) }()
	for i := int32(1); b.Loop(); i++ {
		ks2 := newKafkaStore(b, cfg)
		got := 0
		if err := ks2.Load(ctx, 0, i, func(records.StateRecord) error { got++; return nil }); err != nil {
			b.Fatal(err)
		}
		if got != n {
			b.Fatal(got)
		}
		_ = ks2.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkWriteKafka measures WriteMirrorStates throughput through the
// runtime and the KafkaStore on kfake, with 64 concurrent writers on one
// state partition so that batching takes effect; each request carries
// perRequest partition writes (a leader broker writes all its partitions in
// one RPC). The writes/s metric counts partition writes.
func BenchmarkWriteKafka(b *testing.B) {
	for _, perRequest := range []int{1, 16} {
		b.Run(fmt.Sprintf("perRequest=%d", perRequest), func(b *testing.B) {
			c := newKfake(b)
			ks := newKafkaStore(b, kafkaCfg(c, 1))
			r := newRuntime(b, Config{NumPartitions: 1, AppendLinger: 2 * time.Millisecond, MaxBatchRecords: 5000}, ks)
			loadAllParts(b, r, 1)
			const writers = 64
			ctx := context.Background()
			per := (b.N/perRequest)/writers + 1
			b.ResetTimer()
			start := time.Now()
			cpu := cpuTime()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range per {
						req := WriteRequest{MirrorName: "m"}
						for j := range perRequest {
							req.Partitions = append(req.Partitions, wp(int32((w*per+i)*perRequest+j), statemachine.Preparing, 1, -1))
						}
						wr, err := r.WriteMirrorStates(ctx, req)
						if err != nil || wr.Partitions[0].ErrorCode != admin.CodeNone {
							b.Error(err, wr.Partitions[0])
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*writers*perRequest)/time.Since(start).Seconds(), "writes/s")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(per*writers*perRequest), "cpu-ns/write")
		})
	}
}

// cpuTime returns the user+system CPU time of the process so far. The
// benchmarks report it per op ("cpu-ns/op") next to wall time because the
// shared 2-core test machine makes wall time mostly a measure of waiting.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration, ops int) {
	b.ReportMetric(float64(cpuTime()-start)/float64(ops), "cpu-ns/op")
}

// BenchmarkLoadFile measures opening a FileStore and loading (recovery scan and
// replay into a shard) 1,000,000 state records of 50,000 keys from one partition log,
// never compacted (the worst case: every superseded record is replayed too).
func BenchmarkLoadFile(b *testing.B) {
	const n, per = 1_000_000, 1000
	dir := b.TempDir()
	fs, err := NewFileStore(dir, FileStoreOptions{NumPartitions: 1, CompactMinRecords: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := fs.Load(ctx, 0, 1, func(records.StateRecord) error { return nil }); err != nil {
		b.Fatal(err)
	}
	batch := make([]records.StateRecord, per)
	for i := 0; i < n; i += per {
		for j := range batch {
			k := i + j
			batch[j] = stateRec(fmt.Sprintf("m%d", k%10), int32(k%50_000), statemachine.Mirroring, int32(k))
		}
		if err := fs.Append(ctx, 0, 1, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := fs.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	defer func() { reportCPU(b, cpu, b.N) }()
	for i := int32(0); b.Loop(); i++ {
		fs, err := NewFileStore(dir, FileStoreOptions{NumPartitions: 1, CompactMinRecords: 1 << 40})
		if err != nil {
			b.Fatal(err)
		}
		s := NewShard()
		if err := fs.Load(ctx, 0, 1, s.Replay); err != nil {
			b.Fatal(err)
		}
		if s.Len() != 50_000 {
			b.Fatal(s.Len())
		}
		if err := fs.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/load")
}

// BenchmarkWriteFile measures WriteMirrorStates throughput through the runtime and a
// FileStore (an fsync per batched append), with 64 concurrent writers on one state
// partition as BenchmarkWriteKafka, and with the writers spread over 50 partitions.
// The writes/s metric counts partition writes.
func BenchmarkWriteFile(b *testing.B) {
	for _, parts := range []int32{1, 50} {
		for _, perRequest := range []int{1, 16} {
			b.Run(fmt.Sprintf("partitions=%d/perRequest=%d", parts, perRequest), func(b *testing.B) {
				fs := newFileStore(b, b.TempDir(), parts)
				r := newRuntime(b, Config{NumPartitions: parts, AppendLinger: 2 * time.Millisecond, MaxBatchRecords: 5000}, fs)
				loadAllParts(b, r, 1)
				benchWrites(b, r, perRequest)
			})
		}
	}
}

// benchWrites runs b.N partition writes through r from 64 writers, each request for
// its own mirror (so that the requests spread over the state partitions).
func benchWrites(b *testing.B, r *Runtime, perRequest int) {
	const writers = 64
	ctx := context.Background()
	per := (b.N/perRequest)/writers + 1
	b.ResetTimer()
	start := time.Now()
	cpu := cpuTime()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				req := WriteRequest{MirrorName: fmt.Sprintf("m%d", w)}
				for j := range perRequest {
					req.Partitions = append(req.Partitions, wp(int32((w*per+i)*perRequest+j), statemachine.Preparing, 1, -1))
				}
				wr, err := r.WriteMirrorStates(ctx, req)
				if err != nil || wr.Partitions[0].ErrorCode != admin.CodeNone {
					b.Error(err, wr.Partitions[0])
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*writers*perRequest)/time.Since(start).Seconds(), "writes/s")
	b.ReportMetric(float64(cpuTime()-cpu)/float64(per*writers*perRequest), "cpu-ns/write")
}
