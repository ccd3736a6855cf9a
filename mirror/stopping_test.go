package mirror

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// readCommitted returns the values a read_committed consumer of l sees
// (records.CommittedBatches below the log's LSO).
func readCommitted(t testing.TB, l fetcher.Log) []string {
	t.Helper()
	var bs []records.Batch
	it := records.NewIterator(logBytes(t, l))
	for it.Next() {
		bs = append(bs, it.Batch())
	}
	require.NoError(t, it.Err())
	var out []string
	for _, b := range records.CommittedBatches(bs, l.LastStableOffset()) {
		recs, err := b.Records()
		require.NoError(t, err)
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// openTxnSource is a kfake cluster whose partition pay-0 holds 10 committed records, then
// a transaction left open (1 record), then 20 records of an idempotent producer, all
// below the high watermark. It returns the cluster and the committed values in order.
func openTxnSource(t *testing.T, ctx context.Context) (*kfake.Cluster, []string) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("kfake-src"), kfake.SeedTopics(1, "pay"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	var committed []string
	produce := func(cl *kgo.Client, tag string, n int) {
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("%s-%d", tag, i)
			recs = append(recs, &kgo.Record{Topic: "pay", Value: []byte(v)})
			if tag != "open" {
				committed = append(committed, v)
			}
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer plain.Close()
	produce(plain, "plain", 10)
	txn, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.TransactionalID("left-open"), kgo.ProducerLinger(0),
		kgo.TransactionTimeout(time.Minute))
	require.NoError(t, err)
	t.Cleanup(txn.Close)
	require.NoError(t, txn.BeginTransaction())
	produce(txn, "open", 1)
	idem, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer idem.Close()
	produce(idem, "idem", 20)
	return src, committed
}

// TestStopAbortsOpenTransactions is the failover of issue 11: every committed record
// stays, the open transaction gets an ABORT marker, LSO = HW, and a read_committed
// reader of the destination sees exactly what the source committed. Client writes are
// refused with READ_ONLY_TOPIC until STOPPED and land after the barrier then.
func TestStopAbortsOpenTransactions(t *testing.T) {
	for _, mode := range []string{"abort", "truncate"} {
		t.Run(mode, func(t *testing.T) {
			ctx := testCtx(t)
			src, committed := openTxnSource(t, ctx)
			dest := NewMemoryDestination("dst", fetcher.MemoryLogOptions{})
			m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, m.Close()) })
			require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
				KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "50", KeyStopOpenTransactions: mode}))
			mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"pay"}, StartOptions{}))
			waitCond(t, ctx, m, "caught up", func() bool {
				d := describeOn(t, m, "k", "pay", 0)
				return d.State == statemachine.Mirroring && d.DestinationOffset == 31
			})
			l, err := dest.Log("pay", 0)
			require.NoError(t, err)
			require.Equal(t, int64(10), l.LastStableOffset())
			openTxn := l.OpenTransactions()
			require.Len(t, openTxn, 1)

			// A client write before the stop is refused, through Produce and through the Log.
			client := clientBatch(t, "client-early")
			_, err = dest.Produce(ctx, "pay", 0, client)
			require.ErrorIs(t, err, admin.CodeReadOnlyTopic.Err())
			require.ErrorIs(t, err, fetcher.ErrReadOnly)
			_, err = l.AppendAsLeader(client)
			require.ErrorIs(t, err, fetcher.ErrReadOnly)
			require.Equal(t, int64(31), l.LogEndOffset())

			mustOK(t)(m.StopMirrorTopics(ctx, "k", []string{"pay"}, StopOptions{Wait: true}))
			d := describeOn(t, m, "k", "pay", 0)
			require.Equal(t, statemachine.Stopped, d.State)
			require.Equal(t, l.HighWatermark(), l.LastStableOffset(), "LSO = HW")
			eps := batchEpochs(t, l)
			last := eps[len(eps)-1]
			require.Equal(t, int64(records.ControlMirrorPIDReset), last[2], "the barrier ends the log")
			if mode == "abort" {
				require.Equal(t, int64(33), l.LogEndOffset(), "31 mirrored + ABORT + barrier")
				abort := eps[len(eps)-2]
				require.Equal(t, [3]int64{31, last[1], int64(records.ControlAbort)}, abort)
				b, err := l.Read(31, 1<<10)
				require.NoError(t, err)
				mb, err := records.ParseBatch(b)
				require.NoError(t, err)
				require.Equal(t, openTxn[0].ProducerID, mb.ProducerID())
				require.Equal(t, openTxn[0].ProducerEpoch, mb.ProducerEpoch())
				require.Equal(t, committed, readCommitted(t, l), "read_committed sees exactly the source's committed records")
				require.Equal(t, int32(0), d.LastMirrorEpoch)
			} else {
				require.Equal(t, int64(11), l.LogEndOffset(), "truncated at the LSO (10) + barrier")
				require.Equal(t, committed[:10], readCommitted(t, l))
			}

			// STOPPED: writable, at the offset after the barrier.
			end := l.LogEndOffset()
			off, err := dest.Produce(ctx, "pay", 0, clientBatch(t, "client-late"))
			require.NoError(t, err)
			require.Equal(t, end, off)
			// Clients never write control batches.
			_, err = dest.Produce(ctx, "pay", 0, records.BuildControlBatch(records.ControlBatchSpec{Type: records.ControlAbort, ProducerID: 1}))
			require.ErrorIs(t, err, admin.CodeInvalidRecord.Err())
			corrupt := clientBatch(t, "corrupt")
			corrupt[len(corrupt)-1] ^= 0xff
			_, err = dest.Produce(ctx, "pay", 0, corrupt)
			require.ErrorIs(t, err, admin.CodeCorruptMessage.Err())
			require.Equal(t, end+1, l.LogEndOffset())
		})
	}
}

// clientBatch is one producer batch of one record, as a client sends it (offsets 0).
func clientBatch(t testing.TB, value string) []byte {
	b, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: 1_700_000_000_000}, []records.Record{{Value: []byte(value)}})
	require.NoError(t, err)
	return b
}

// faultDest hands out logs that fail once at one STOPPING step, when armed.
type faultDest struct {
	*LocalDestination
	step  string // "bump", "marker", "barrier" or "flush"
	armed chan struct{}
	fired bool
	logs  map[TopicPartition]*faultLog
}

type faultLog struct {
	fetcher.Log
	d *faultDest
}

func (d *faultDest) Log(topic string, partition int32) (fetcher.Log, error) {
	l, err := d.LocalDestination.Log(topic, partition)
	if err != nil {
		return nil, err
	}
	tp := TopicPartition{Topic: topic, Partition: partition}
	if d.logs[tp] == nil {
		d.logs[tp] = &faultLog{Log: l, d: d}
	}
	return d.logs[tp], nil
}

// fire reports whether the fault of step fires now (once, and only when armed).
func (d *faultDest) fire(step string) bool {
	select {
	case <-d.armed:
	default:
		return false
	}
	if d.fired || d.step != step {
		return false
	}
	d.fired = true
	return true
}

func (l *faultLog) BumpLeaderEpoch(min int32) (int32, error) {
	if l.d.fire("bump") {
		return 0, fmt.Errorf("injected: bump")
	}
	return l.Log.BumpLeaderEpoch(min)
}

func (l *faultLog) AppendAsLeader(batch []byte) (int64, error) {
	b, err := records.ParseBatch(batch)
	if err == nil && b.Attributes().IsControl() {
		typ, _ := b.ControlType()
		if (typ == records.ControlAbort && l.d.fire("marker")) || (typ == records.ControlMirrorPIDReset && l.d.fire("barrier")) {
			return 0, fmt.Errorf("injected: %s", typ)
		}
	}
	return l.Log.AppendAsLeader(batch)
}

func (l *faultLog) Flush() error {
	if eps := l.Log.LatestEpoch(); eps >= 0 && l.Log.LogEndOffset() == 33 && l.d.fire("flush") {
		return fmt.Errorf("injected: flush after the barrier")
	}
	return l.Log.Flush()
}

// TestStopResumesAfterFailureAtEachStep fails STOPPING once at each of its steps; the
// partition goes FAILED, the stop is retried from there and resumes: one LME (the last
// mirrored epoch, never the bumped one), one ABORT marker, one barrier.
func TestStopResumesAfterFailureAtEachStep(t *testing.T) {
	for _, step := range []string{"bump", "marker", "barrier", "flush"} {
		t.Run(step, func(t *testing.T) {
			ctx := testCtx(t)
			src, committed := openTxnSource(t, ctx)
			dest := &faultDest{LocalDestination: NewMemoryDestination("dst", fetcher.MemoryLogOptions{}), step: step,
				armed: make(chan struct{}), logs: map[TopicPartition]*faultLog{}}
			var changes []StateChange
			m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
				WithEvents(func(c StateChange) { changes = append(changes, c) }))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, m.Close()) })
			require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
				KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "50"}))
			mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"pay"}, StartOptions{}))
			waitCond(t, ctx, m, "caught up", func() bool {
				d := describeOn(t, m, "k", "pay", 0)
				return d.State == statemachine.Mirroring && d.DestinationOffset == 31
			})
			for _, c := range changes {
				require.NotEqual(t, statemachine.EpochFencing, c.To,
					"PREPARING raised the leader epoch above the source's: a fresh start never meets EPOCH_FENCING")
			}
			close(dest.armed)
			_, err = m.StopMirrorTopics(ctx, "k", []string{"pay"}, StopOptions{})
			require.NoError(t, err)
			waitCond(t, ctx, m, "STOPPED and writable", func() bool {
				return describeOn(t, m, "k", "pay", 0).State == statemachine.Stopped && !dest.ReadOnly("pay", 0)
			})
			require.True(t, dest.fired, "the fault fired")
			failed := false
			for _, c := range changes {
				failed = failed || c.To == statemachine.Failed
			}
			require.True(t, failed, "the failure was visible as FAILED")

			l, err := dest.LocalDestination.Log("pay", 0)
			require.NoError(t, err)
			var markers, barriers int
			for _, e := range batchEpochs(t, l) {
				switch e[2] {
				case int64(records.ControlAbort):
					markers++
				case int64(records.ControlMirrorPIDReset):
					barriers++
				}
			}
			require.Equal(t, 1, markers, "one ABORT marker")
			require.Equal(t, 1, barriers, "one barrier")
			require.Equal(t, int32(0), describeOn(t, m, "k", "pay", 0).LastMirrorEpoch, "the LME is the mirrored epoch")
			require.Equal(t, l.HighWatermark(), l.LastStableOffset())
			require.Equal(t, committed, readCommitted(t, l))
		})
	}
}

// flakyPeer fails its first n calls with a transient error (a refused connection).
type flakyPeer struct {
	Peer
	mu sync.Mutex
	n  int
}

func (p *flakyPeer) fail() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		return nil
	}
	p.n--
	return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

func (p *flakyPeer) ListClusterMirrors(ctx context.Context, f ListFilter) ([]MirrorListing, error) {
	if err := p.fail(); err != nil {
		return nil, err
	}
	return p.Peer.ListClusterMirrors(ctx, f)
}

func (p *flakyPeer) DescribeClusterMirrors(ctx context.Context, names []string, o DescribeOptions) ([]MirrorDescription, error) {
	if err := p.fail(); err != nil {
		return nil, err
	}
	return p.Peer.DescribeClusterMirrors(ctx, names, o)
}

// TestPreparingRetriesAnUnreachablePeer: a source whose admin endpoint refuses
// connections for a while is retried with backoff; the partition reaches MIRRORING and
// never FAILED. A permanent failure (a mirror loop) fails at once, with a typed cause.
func TestPreparingRetriesAnUnreachablePeer(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld()
	a := w.newSite(t, "a")
	flaky := &flakyPeer{n: 3}
	b := w.newSite(t, "b", WithPeerFactory(func(string, MirrorConfig) (Peer, error) {
		flaky.Peer = a.m
		return flaky, nil
	}))
	createTopic(t, a, "t", id(7), 1)
	appendBatch(t, a.log(t, "t", 0), 0, 3, "x")
	require.NoError(t, b.m.CreateClusterMirror(ctx, "from-a", bootstrap(a)))
	mustOK(t)(b.m.StartMirrorTopics(ctx, "from-a", []string{"t"}, StartOptions{}))
	waitCond(t, ctx, b.m, "mirroring", func() bool {
		return describePartition(t, b, "from-a", "t", 0).State == statemachine.Mirroring
	})
	flaky.mu.Lock()
	require.Zero(t, flaky.n, "every injected failure was retried")
	flaky.mu.Unlock()
	b.mu.Lock()
	for _, c := range b.changes {
		require.NotEqual(t, statemachine.Failed, c.To, "no FAILED on a transient error")
	}
	b.mu.Unlock()
}

// laggingReplicas is a destination whose followers catch up only when released.
type laggingReplicas struct {
	*LocalDestination
	mu      sync.Mutex
	waits   []string
	entered chan struct{} // closed at the first wait
	release chan struct{}
}

func (d *laggingReplicas) WaitReplicas(ctx context.Context, topic string, partition int32, offset int64, all bool) error {
	d.mu.Lock()
	d.waits = append(d.waits, fmt.Sprintf("%s-%d@%d all=%t", topic, partition, offset, all))
	if len(d.waits) == 1 {
		close(d.entered)
	}
	d.mu.Unlock()
	select {
	case <-d.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestPreparingWaitsForReplicas: PREPARING does not start the fetcher before the
// destination's replicas converged at the truncation point; with
// mirror.support.unclean.leader.election every replica is waited for.
func TestPreparingWaitsForReplicas(t *testing.T) {
	for _, tc := range []struct{ ule, topicLevel bool }{{false, false}, {true, false}, {true, true}} {
		ule := tc.ule
		t.Run(fmt.Sprintf("ule=%v,topic=%v", tc.ule, tc.topicLevel), func(t *testing.T) {
			ctx := testCtx(t)
			w := newWorld()
			a := w.newSite(t, "a")
			createTopic(t, a, "t", id(9), 1)
			appendBatch(t, a.log(t, "t", 0), 0, 3, "x")
			b := w.newSite(t, "b")
			lag := &laggingReplicas{LocalDestination: NewMemoryDestination("b2", fetcher.MemoryLogOptions{}), entered: make(chan struct{}), release: make(chan struct{})}
			m, err := New(Config{Destination: lag, SyncInterval: -1, FetchIdleWait: time.Millisecond},
				WithSourceFactory(b.m.opts.sources), WithPeerFactory(b.m.opts.peers))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, m.Close()) })
			cfg := bootstrap(a)
			if tc.topicLevel {
				// The destination topic config, as in the prototype (the mirror's is false).
				require.NoError(t, lag.CreateTopic(ctx, TopicSpec{Name: "t", TopicID: id(9), Partitions: 1,
					Configs: map[string]string{KeyUncleanLeaderElection: "true"}}))
			} else {
				cfg[KeyUncleanLeaderElection] = fmt.Sprint(ule)
			}
			require.NoError(t, m.CreateClusterMirror(ctx, "from-a", cfg))
			mustOK(t)(m.StartMirrorTopics(ctx, "from-a", []string{"t"}, StartOptions{}))
			select {
			case <-lag.entered:
			case <-ctx.Done():
				t.Fatal("PREPARING never waited for the replicas")
			}
			require.Equal(t, statemachine.Preparing, describeOn(t, m, "from-a", "t", 0).State)
			l, err := lag.Log("t", 0)
			require.NoError(t, err)
			require.Equal(t, int64(0), l.LogEndOffset(), "nothing fetched while the replicas lag")
			lag.mu.Lock()
			require.Equal(t, []string{fmt.Sprintf("t-0@0 all=%t", ule)}, lag.waits)
			lag.mu.Unlock()
			close(lag.release)
			waitCond(t, ctx, m, "mirroring and caught up", func() bool {
				return describeOn(t, m, "from-a", "t", 0).State == statemachine.Mirroring && l.LogEndOffset() == 3
			})
		})
	}
}
