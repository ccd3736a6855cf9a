package fetcher

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/records"
)

// recorder is an Events that keeps everything and wakes waiters on each event.
type recorder struct {
	mu          sync.Mutex
	changed     chan struct{}
	divergences map[TopicPartition][]divergenceEvent
	outOfRange  map[TopicPartition][]int64 // gaps
	fencing     map[TopicPartition][2]int32
	failed      map[TopicPartition]error
	progress    map[TopicPartition]Progress
	bytes       map[TopicPartition]int64
}

type divergenceEvent struct {
	d           epoch.Divergence
	truncatedTo int64
}

func newRecorder() *recorder {
	return &recorder{
		changed:     make(chan struct{}, 1),
		divergences: map[TopicPartition][]divergenceEvent{},
		outOfRange:  map[TopicPartition][]int64{},
		fencing:     map[TopicPartition][2]int32{},
		failed:      map[TopicPartition]error{},
		progress:    map[TopicPartition]Progress{},
		bytes:       map[TopicPartition]int64{},
	}
}

func (r *recorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) OnDivergence(tp TopicPartition, d epoch.Divergence, to int64) {
	r.mu.Lock()
	r.divergences[tp] = append(r.divergences[tp], divergenceEvent{d, to})
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) OnOutOfRange(tp TopicPartition, _, _, gap int64) {
	r.mu.Lock()
	r.outOfRange[tp] = append(r.outOfRange[tp], gap)
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) OnEpochFencing(tp TopicPartition, be, le int32) {
	r.mu.Lock()
	r.fencing[tp] = [2]int32{be, le}
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) OnFailed(tp TopicPartition, err error) {
	r.mu.Lock()
	r.failed[tp] = err
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) OnProgress(tp TopicPartition, p Progress) {
	r.mu.Lock()
	r.progress[tp] = p
	r.bytes[tp] += p.Bytes
	r.mu.Unlock()
	r.notify()
}

// waitUntil waits for cond, re-checking after every event (and at least every
// 50 ms, for conditions that do not come with an event), failing after d.
func (r *recorder) waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-r.changed:
		case <-tick.C:
		case <-deadline.C:
			require.FailNow(t, "timed out waiting: "+what)
		}
	}
}

func (r *recorder) failure(tp TopicPartition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed[tp]
}

// batch builds one batch of n records at base with epoch ple.
func batch(t testing.TB, base int64, ple int32, n int, c records.Compression) []byte {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{Key: fmt.Appendf(nil, "k%d", base+int64(i)), Value: bytes.Repeat([]byte{byte(base + int64(i))}, 100)}
	}
	b, err := records.BuildBatch(records.BatchSpec{BaseOffset: base, PartitionLeaderEpoch: ple, Compression: c,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000}, recs)
	require.NoError(t, err)
	return b
}

// allBatches reads every batch of l, keyed by base offset.
func allBatches(t testing.TB, l Log) []records.Batch {
	t.Helper()
	var out []records.Batch
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		buf, err := l.Read(off, 1<<20)
		require.NoError(t, err)
		if len(buf) == 0 {
			break
		}
		it := records.NewIterator(buf)
		for it.Next() {
			b := it.Batch()
			out = append(out, append(records.Batch(nil), b...))
			off = b.NextOffset()
		}
		require.NoError(t, it.Err())
	}
	return out
}

// requireSameBatches asserts that two logs hold byte-identical batches.
func requireSameBatches(t testing.TB, want, got Log) {
	t.Helper()
	wb, gb := allBatches(t, want), allBatches(t, got)
	require.Equal(t, len(wb), len(gb), "batch count")
	for i := range wb {
		require.Equal(t, wb[i].BaseOffset(), gb[i].BaseOffset(), "batch %d base offset", i)
		require.True(t, bytes.Equal(wb[i], gb[i]), "batch %d at offset %d differs", i, wb[i].BaseOffset())
	}
	require.Equal(t, want.LogEndOffset(), got.LogEndOffset())
}

func memLog(t testing.TB, leaderEpoch int32) *MemoryLog {
	t.Helper()
	l := NewMemoryLog(MemoryLogOptions{SyncEveryAppend: true})
	if leaderEpoch >= 0 {
		_, err := l.BumpLeaderEpoch(leaderEpoch - 1)
		require.NoError(t, err)
		require.Equal(t, leaderEpoch, l.LeaderEpoch())
	}
	return l
}

func appendAll(t testing.TB, l Log, bs ...[]byte) {
	t.Helper()
	for _, b := range bs {
		require.NoError(t, l.Append(b))
	}
}
