package integration

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkatest"
	"github.com/kmirror/kmirror/records"
)

// waitTimeout bounds every condition wait of this package: the machine running the suite may be
// loaded, so it is generous; the waits poll and return as soon as the condition holds.
const waitTimeout = 120 * time.Second

// pollEvery is the polling period of waitFor.
const pollEvery = 100 * time.Millisecond

// destLeaderEpoch is the destination leader epoch the tests give their FileLogs: above any
// source epoch, so the fetch loop never stops for EPOCH_FENCING (spec §7.3 rule 1).
const destLeaderEpoch = 1 << 20

// waitFor polls cond until it reports true, failing the test after timeout with the last
// description cond returned.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, state)
		}
		<-tick.C
	}
}

// createTopicAssigned creates topic with an explicit replica assignment (one replica list per
// partition, the first replica is the preferred leader) and waits for leaders and full ISRs.
func createTopicAssigned(t testing.TB, cl *kgo.Client, topic string, assignment [][]int32, configs map[string]string) kafkatest.TopicInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(waitTimeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = -1
	rt.ReplicationFactor = -1
	for p, replicas := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition = int32(p)
		ra.Replicas = replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	msg := ""
	if resp.Topics[0].ErrorMessage != nil {
		msg = *resp.Topics[0].ErrorMessage
	}
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode), "create %s: %s", topic, msg)
	return kafkatest.WaitForLeaders(t, cl, topic)
}

// sourcePartition is one source partition read by the oracle: its batches from the log start
// to the high watermark, as the leader serves them.
type sourcePartition struct {
	Batches       []records.Batch
	HighWatermark int64
	LastStable    int64
	LogStart      int64
	Leader        int32
	LeaderEpoch   int32
}

// readSource reads topic/partition from its current leader with raw sessionless Fetch
// requests (read_uncommitted, as kmirror fetches) from the log start to the high watermark.
// It is the test's oracle, independent of package fetcher. It retries (until waitTimeout) while
// the partition has no leader or the leader changes.
func readSource(t testing.TB, cl *kgo.Client, topic string, partition int32) sourcePartition {
	t.Helper()
	var out sourcePartition
	var lastErr error
	waitFor(t, waitTimeout, fmt.Sprintf("a full read of %s-%d", topic, partition), func() (bool, string) {
		out, lastErr = tryReadSource(cl, topic, partition)
		return lastErr == nil, fmt.Sprint(lastErr)
	})
	return out
}

func tryReadSource(cl *kgo.Client, topic string, partition int32) (sourcePartition, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := kafkatest.DescribeTopic(ctx, cl, topic)
	if err != nil {
		return sourcePartition{}, err
	}
	if int(partition) >= len(info.Partitions) {
		return sourcePartition{}, fmt.Errorf("no partition %d", partition)
	}
	p := info.Partitions[partition]
	if p.Leader < 0 {
		return sourcePartition{}, fmt.Errorf("no leader: %v", p)
	}
	out := sourcePartition{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, HighWatermark: -1}
	var offset int64
	lastEpoch := int32(-1)
	for {
		r, err := rawFetch(ctx, cl, info, partition, p.Leader, p.LeaderEpoch, offset, lastEpoch)
		if err != nil {
			return sourcePartition{}, err
		}
		if code := kerr.ErrorForCode(r.ErrorCode); code != nil {
			if r.ErrorCode == kerr.OffsetOutOfRange.Code && offset < r.LogStartOffset {
				offset = r.LogStartOffset
				continue
			}
			return sourcePartition{}, fmt.Errorf("fetch %s-%d@%d from %d: %w", topic, partition, offset, p.Leader, code)
		}
		if r.DivergingEpoch.Epoch >= 0 {
			return sourcePartition{}, fmt.Errorf("fetch %s-%d@%d: unexpected diverging epoch %+v", topic, partition, offset, r.DivergingEpoch)
		}
		if out.HighWatermark < 0 {
			out.HighWatermark, out.LastStable, out.LogStart = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
			if offset < out.LogStart {
				offset = out.LogStart
			}
		}
		progressed := false
		it := records.NewIterator(r.RecordBatches)
		for it.Next() {
			b := it.Batch()
			if b.NextOffset() <= offset || b.BaseOffset() >= out.HighWatermark {
				continue
			}
			if err := b.VerifyCRC(); err != nil {
				return sourcePartition{}, fmt.Errorf("source batch at %d: %w", b.BaseOffset(), err)
			}
			out.Batches = append(out.Batches, records.Batch(bytes.Clone(b)))
			offset = b.NextOffset()
			lastEpoch = b.PartitionLeaderEpoch()
			progressed = true
		}
		if it.Err() != nil {
			return sourcePartition{}, fmt.Errorf("source batches at %d: %w", offset, it.Err())
		}
		if offset >= out.HighWatermark {
			return out, nil
		}
		if !progressed {
			return sourcePartition{}, fmt.Errorf("no progress at offset %d below high watermark %d", offset, out.HighWatermark)
		}
	}
}

// rawFetch sends one sessionless consumer Fetch for one partition to broker leader.
func rawFetch(ctx context.Context, cl *kgo.Client, info kafkatest.TopicInfo, partition, leader, leaderEpoch int32,
	offset int64, lastFetchedEpoch int32) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 50
	req.MinBytes = 1
	req.MaxBytes = 32 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = info.Name, info.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.CurrentLeaderEpoch = leaderEpoch
	rp.LastFetchedEpoch = lastFetchedEpoch
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = 16 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(int(leader)).RetriableRequest(ctx, req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("fetch: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("fetch: response shape %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0], nil
}

// readLog returns every batch of l from its log start to its log end.
func readLog(t testing.TB, l fetcher.Log) []records.Batch {
	t.Helper()
	var out []records.Batch
	off, end := l.LogStartOffset(), l.LogEndOffset()
	for off < end {
		buf, err := l.Read(off, 1<<20)
		require.NoError(t, err)
		require.NotEmpty(t, buf, "log read at %d below log end %d", off, end)
		it := records.NewIterator(buf)
		for it.Next() {
			b := it.Batch()
			if b.NextOffset() <= off {
				continue
			}
			out = append(out, records.Batch(bytes.Clone(b)))
			off = b.NextOffset()
		}
		require.NoError(t, it.Err())
	}
	return out
}

// requireSameBatches asserts that the destination holds exactly the source's batches: same
// count, and each batch byte-identical (so same offsets, leader epochs, producer fields,
// attributes and CRCs).
func requireSameBatches(t testing.TB, what string, src, dst []records.Batch) {
	t.Helper()
	for i := 0; i < min(len(src), len(dst)); i++ {
		if !bytes.Equal(src[i], dst[i]) {
			t.Fatalf("%s: batch %d differs: source base %d last %d epoch %d crc %08x (%d bytes), destination base %d last %d epoch %d crc %08x (%d bytes)",
				what, i, src[i].BaseOffset(), src[i].LastOffset(), src[i].PartitionLeaderEpoch(), src[i].CRC(), len(src[i]),
				dst[i].BaseOffset(), dst[i].LastOffset(), dst[i].PartitionLeaderEpoch(), dst[i].CRC(), len(dst[i]))
		}
	}
	require.Equal(t, len(src), len(dst), "%s: batch count (source %s, destination %s)", what, span(src), span(dst))
}

func span(bs []records.Batch) string {
	if len(bs) == 0 {
		return "empty"
	}
	return fmt.Sprintf("[%d, %d]", bs[0].BaseOffset(), bs[len(bs)-1].LastOffset())
}

// batchStats summarises a partition's batches for logs and assertions.
type batchStats struct {
	Batches, Records, Control, Transactional, DeleteHorizon, Empty, Gaps int
	Codecs                                                               map[records.Compression]int
}

func statsOf(bs []records.Batch) batchStats {
	s := batchStats{Codecs: make(map[records.Compression]int)}
	next := int64(-1)
	for _, b := range bs {
		a := b.Attributes()
		s.Batches++
		s.Records += int(b.NumRecords())
		s.Codecs[a.Compression()]++
		if a.IsControl() {
			s.Control++
		}
		if a.IsTransactional() {
			s.Transactional++
		}
		if a.HasDeleteHorizon() {
			s.DeleteHorizon++
		}
		if b.NumRecords() == 0 {
			s.Empty++
		}
		if (next >= 0 && b.BaseOffset() != next) || int64(b.NumRecords()) != int64(b.LastOffsetDelta())+1 {
			s.Gaps++
		}
		next = b.NextOffset()
	}
	return s
}

func (s batchStats) String() string {
	var codecs []string
	for c := records.Compression(0); c <= 4; c++ {
		if n := s.Codecs[c]; n > 0 {
			codecs = append(codecs, fmt.Sprintf("%s:%d", c, n))
		}
	}
	return fmt.Sprintf("%d batches, %d records, %d control, %d transactional, %d with delete horizon, %d empty, %d offset gaps, codecs %s",
		s.Batches, s.Records, s.Control, s.Transactional, s.DeleteHorizon, s.Empty, s.Gaps, strings.Join(codecs, " "))
}

// events records what a Fetcher reports.
type events struct {
	mu          sync.Mutex
	divergences []divergence
	outOfRange  []string
	fencing     []string
	failed      []string
}

type divergence struct {
	TP          fetcher.TopicPartition
	D           epoch.Divergence
	TruncatedTo int64
}

var _ fetcher.Events = (*events)(nil)

func (e *events) OnDivergence(tp fetcher.TopicPartition, d epoch.Divergence, truncatedTo int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.divergences = append(e.divergences, divergence{tp, d, truncatedTo})
}

func (e *events) OnOutOfRange(tp fetcher.TopicPartition, fetchOffset, sourceLogStart, gap int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.outOfRange = append(e.outOfRange, fmt.Sprintf("%s fetch %d log start %d gap %d", tp, fetchOffset, sourceLogStart, gap))
}

func (e *events) OnEpochFencing(tp fetcher.TopicPartition, batchEpoch, localEpoch int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fencing = append(e.fencing, fmt.Sprintf("%s batch epoch %d local %d", tp, batchEpoch, localEpoch))
}

func (e *events) OnFailed(tp fetcher.TopicPartition, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failed = append(e.failed, fmt.Sprintf("%s: %v", tp, err))
}

func (e *events) OnProgress(fetcher.TopicPartition, fetcher.Progress) {}

func (e *events) snapshot() (div []divergence, problems []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	problems = append(problems, e.outOfRange...)
	problems = append(problems, e.fencing...)
	problems = append(problems, e.failed...)
	return append([]divergence(nil), e.divergences...), problems
}

// testLogger sends the fetch loop's warnings and errors to the test log.
type testLogger struct {
	mu       sync.Mutex
	t        testing.TB
	done     bool
	last     string // the previous line, repeated lines are counted instead of logged
	repeated int
}

func (l *testLogger) log(level, msg string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	line := fmt.Sprintf("fetcher %s: %s %v", level, msg, args)
	if line == l.last {
		l.repeated++
		return
	}
	if l.repeated > 0 {
		l.t.Logf("(previous line repeated %d times)", l.repeated)
	}
	l.last, l.repeated = line, 0
	l.t.Log(line)
}

func (l *testLogger) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
}

// Enabled implements slog.Handler: warnings and errors only.
func (l *testLogger) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}

func (l *testLogger) Handle(_ context.Context, r slog.Record) error {
	var args []any
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, a.Key, a.Value.Any())
		return true
	})
	l.log(r.Level.String(), r.Message, args)
	return nil
}

func (l *testLogger) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *testLogger) WithGroup(string) slog.Handler      { return l }

// mirror is a running kmirror fetch path: one KafkaSource on cluster A, one Fetcher, one
// FileLog per mirrored partition.
type mirror struct {
	src    *fetcher.KafkaSource
	f      *fetcher.Fetcher
	events *events
	logs   map[fetcher.TopicPartition]*fetcher.FileLog
	root   string
}

// mirrorOptions tune startMirror.
type mirrorOptions struct {
	FileLog           fetcher.FileLogOptions
	PartitionMaxBytes int32
}

// startMirror opens a FileLog under a temporary root for every partition and starts a
// Fetcher mirroring them from brokers. Everything is closed when the test ends.
func startMirror(t testing.TB, brokers []string, tps []fetcher.TopicPartition, opts mirrorOptions) *mirror {
	t.Helper()
	src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{SeedBrokers: brokers, MaxWait: 200 * time.Millisecond})
	require.NoError(t, err)
	m := &mirror{src: src, events: &events{}, logs: make(map[fetcher.TopicPartition]*fetcher.FileLog), root: t.TempDir()}
	logger := &testLogger{t: t}
	f, err := fetcher.NewFetcher(src, fetcher.Config{Events: m.events, Logger: slog.New(logger), PartitionMaxBytes: opts.PartitionMaxBytes})
	require.NoError(t, err)
	m.f = f
	t.Cleanup(func() {
		require.NoError(t, f.Close())
		logger.stop()
		_ = src.Close()
		for _, l := range m.logs {
			_ = l.Close()
		}
	})
	for _, tp := range tps {
		l, err := fetcher.OpenFileLog(fetcher.PartitionDir(m.root, tp.Topic, tp.Partition), opts.FileLog)
		require.NoError(t, err)
		m.logs[tp] = l
		_, err = l.BumpLeaderEpoch(destLeaderEpoch)
		require.NoError(t, err)
		require.NoError(t, f.Add(fetcher.PartitionSpec{Topic: tp.Topic, Partition: tp.Partition, Log: l}))
	}
	return m
}

// requireHealthy fails the test when a partition of the fetcher failed or was fenced.
func (m *mirror) requireHealthy(t testing.TB) {
	t.Helper()
	for _, s := range m.f.Status() {
		require.NoError(t, s.Err, "partition %s", s.TopicPartition)
	}
}

// waitCaughtUp waits until every mirrored partition's log end equals its source high watermark
// and returns the oracle's reads of the source partitions. Call it once the producers are done
// (and transaction markers written).
func (m *mirror) waitCaughtUp(t testing.TB, cl *kgo.Client) map[fetcher.TopicPartition]sourcePartition {
	t.Helper()
	out := make(map[fetcher.TopicPartition]sourcePartition)
	for tp, l := range m.logs {
		waitFor(t, waitTimeout, "mirror of "+tp.String()+" to catch up", func() (bool, string) {
			for _, s := range m.f.Status() {
				if s.Err != nil {
					t.Fatalf("partition %s failed: %v", s.TopicPartition, s.Err)
				}
			}
			hw, err := sourceHighWatermark(cl, tp)
			if err != nil {
				return false, err.Error()
			}
			return l.LogEndOffset() == hw, fmt.Sprintf("source high watermark %d, destination log end %d", hw, l.LogEndOffset())
		})
		out[tp] = readSource(t, cl, tp.Topic, tp.Partition)
		require.Equal(t, out[tp].HighWatermark, l.LogEndOffset(), "%s: the source moved while the test was reading it", tp)
	}
	m.requireHealthy(t)
	return out
}

// sourceHighWatermark returns tp's high watermark (ListOffsets latest, read_uncommitted),
// sent by kgo to the partition's leader.
func sourceHighWatermark(cl *kgo.Client, tp fetcher.TopicPartition) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("list offsets %s: response shape", tp)
	}
	r := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return -1, fmt.Errorf("list offsets %s: %w", tp, err)
	}
	return r.Offset, nil
}

// produce sends n records to topic/partition through cl in calls of perCall records and
// returns when all are acknowledged.
func produce(t testing.TB, cl *kgo.Client, topic string, partition int32, prefix string, n, perCall int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for start := 0; start < n; start += perCall {
		var recs []*kgo.Record
		for i := start; i < n && i < start+perCall; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: partition,
				Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: fmt.Appendf(nil, "%s-value-%06d-%s", prefix, i, strings.Repeat("x", i%50))})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
}
