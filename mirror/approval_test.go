package mirror

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// scriptedPeer is the other cluster of the LME lookup: with lme >= 0 it has a mirror
// "back" from this site, STOPPED with that LME; with lme < 0 none. While hold is set,
// every call after the first holdAfter waits for the caller's context (a PREPARING
// held in its lookup, after the start's plan asked).
type scriptedPeer struct {
	mu        sync.Mutex
	lme       int32
	calls     int
	holdAfter int
	hold      bool
	reached   chan struct{}
	fail      error // answered by every call after the first holdAfter, instead of holding
}

func (p *scriptedPeer) enter(ctx context.Context) (int32, error) {
	p.mu.Lock()
	p.calls++
	held := p.hold && p.calls > p.holdAfter
	if held && p.fail != nil {
		err := p.fail
		p.mu.Unlock()
		return 0, err
	}
	if held && p.reached != nil {
		close(p.reached)
		p.reached = nil
	}
	lme := p.lme
	p.mu.Unlock()
	if held {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return lme, nil
}

func (p *scriptedPeer) ListClusterMirrors(ctx context.Context, _ ListFilter) ([]MirrorListing, error) {
	lme, err := p.enter(ctx)
	if err != nil || lme < 0 {
		return nil, err
	}
	return []MirrorListing{{Name: "back"}}, nil
}

func (p *scriptedPeer) DescribeClusterMirrors(ctx context.Context, _ []string, o DescribeOptions) ([]MirrorDescription, error) {
	lme, err := p.enter(ctx)
	if err != nil {
		return nil, err
	}
	var ts []TopicDescription
	for topic, parts := range o.TopicPartitions {
		td := TopicDescription{Topic: topic}
		for _, pa := range parts {
			td.Partitions = append(td.Partitions, PartitionDescription{Partition: pa, State: statemachine.Stopped, LastMirrorEpoch: lme})
		}
		ts = append(ts, td)
	}
	return []MirrorDescription{{Name: "back", Topics: ts}}, nil
}

// holdNext makes the calls after the next n wait (the plan's calls pass, then
// PREPARING's lookup is held) and returns the channel closed when one is held.
func (p *scriptedPeer) holdNext(n int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	p.hold, p.holdAfter, p.reached = true, p.calls+n, ch
	return ch
}

// refusalMetrics records the TruncationRefused and Truncation calls.
type refusalMetrics struct {
	NopMetrics
	mu      sync.Mutex
	refused []PartitionRef
	local   []int64
	start   []int64
}

func (m *refusalMetrics) TruncationRefused(p PartitionRef, local int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused, m.local = append(m.refused, p), append(m.local, local)
}

func (m *refusalMetrics) Truncation(_ PartitionRef, cause TruncationCause, lost int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cause == TruncationStart {
		m.start = append(m.start, lost)
	}
}

// approvalSite is a site over a file destination on root (restartable) mirroring from
// kfake, with peer as the other cluster and the removals, events and metrics recorded.
type approvalSite struct {
	w        *truncWatch
	m        *Mirror
	peer     *scriptedPeer
	evs      eventLog
	metrics  refusalMetrics
	mu       sync.Mutex
	removals []Removal
}

func openApprovalSite(t *testing.T, root string, peer *scriptedPeer, opts ...Option) *approvalSite {
	t.Helper()
	s := &approvalSite{peer: peer}
	d, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	s.w = &truncWatch{LocalDestination: d, logs: map[TopicPartition]fetcher.Log{}}
	opts = append([]Option{
		WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return peer, nil }),
		WithEvents(s.evs.add), WithMetrics(&s.metrics),
		WithRemovals(func(r Removal) { s.mu.Lock(); s.removals = append(s.removals, r); s.mu.Unlock() }),
	}, opts...)
	s.m, err = New(Config{Destination: s.w, SyncInterval: -1, FetchIdleWait: time.Millisecond}, opts...)
	require.NoError(t, err)
	return s
}

func (s *approvalSite) close(t *testing.T) {
	t.Helper()
	require.NoError(t, s.m.Close())
	require.NoError(t, s.w.Close())
}

func (s *approvalSite) gotRemovals() []Removal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Removal(nil), s.removals...)
}

// stoppedWithLocalWrites mirrors n records of kfake topic t (one partition) to a site
// on root, stops the mirror "k" and writes local records on the site: the state of a
// site after a failover. It returns the source, the site and the log end.
func stoppedWithLocalWrites(t *testing.T, ctx context.Context, root string, peer *scriptedPeer, local int, opts ...Option) (*kfake.Cluster, *approvalSite, int64) {
	t.Helper()
	src, _ := startSource(t, ctx, 10)
	s := openApprovalSite(t, root, peer, opts...)
	require.NoError(t, s.m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
	mustOK(t)(s.m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{}))
	waitCond(t, ctx, s.m, "mirrored", func() bool { return describeOn(t, s.m, "k", "t", 0).DestinationOffset == 10 })
	mustOK(t)(s.m.StopMirrorTopics(ctx, "k", []string{"t"}, StopOptions{Wait: true}))
	l, err := s.w.Log("t", 0)
	require.NoError(t, err)
	appendBatch(t, l, l.LeaderEpoch(), local, "site-local")
	return src, s, l.LogEndOffset()
}

// TestRestartInPreparingRefusesUnapprovedRemoval: a start planned with nothing of this
// site's to remove (the other cluster's LME keeps the whole log) is restarted while
// PREPARING; the LME lookup now finds none, so PREPARING would truncate fully,
// removing the records written here since the stop. No start approved that: the
// partition goes FAILED with a *TruncationRefusedError carrying the plan (event,
// metric, describe), its log untouched. A recover without AllowTruncation is refused
// with the plan; with it, PREPARING removes exactly that plan and the approval is
// cleared.
func TestRestartInPreparingRefusesUnapprovedRemoval(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	peer := &scriptedPeer{lme: -1}
	_, s, end := stoppedWithLocalWrites(t, ctx, root, peer, 3)
	l, err := s.w.Log("t", 0)
	require.NoError(t, err)
	lmo := describeOn(t, s.m, "k", "t", 0).LastMirrorOffset
	peer.mu.Lock()
	peer.lme = l.LatestEpoch() // the other cluster mirrored everything this site wrote
	peer.mu.Unlock()
	held := peer.holdNext(2) // the plan lists the mirrors, then describes the partition

	res, err := s.m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{})
	mustOK(t)(res, err)
	require.Zero(t, res[0].Plan[0].Removed.Records, "the plan keeps the whole log: nothing to approve")
	<-held
	require.Equal(t, statemachine.Preparing, describeOn(t, s.m, "k", "t", 0).State)
	ts, _ := s.m.Controller().Topic("t")
	require.Empty(t, ts.Approvals)
	before := logBytes(t, l)
	s.close(t)

	// Restarted; the other cluster's mirror is gone (no LME): a full truncation now.
	peer = &scriptedPeer{lme: -1}
	s = openApprovalSite(t, root, peer)
	t.Cleanup(func() { s.close(t) })
	require.NoError(t, s.m.WaitForStates(ctx, "k", []string{"t"}, statemachine.Failed))
	l, err = s.w.Log("t", 0)
	require.NoError(t, err)
	require.Equal(t, end, l.LogEndOffset())
	require.Equal(t, before, logBytes(t, l), "no record removed")
	require.Empty(t, s.w.truncations())
	require.Empty(t, s.gotRemovals())
	want := PartitionPlan{Partition: 0, StateNow: statemachine.Preparing, StateAfter: statemachine.Failed, LastMirrorEpoch: -1,
		LogStart: 0, LogEnd: end, TruncationOffset: 0, FullTruncation: true, DivergenceOffset: -1, SourceLogStart: -1,
		Removed: OffsetRange{From: 0, To: end, Records: 13}, LocalWrites: OffsetRange{From: lmo, To: end, Records: 3}}
	ev, ok := s.evs.find(failedOf("t", 0))
	require.True(t, ok)
	var tre *TruncationRefusedError
	require.ErrorAs(t, ev.Cause, &tre, "the event carries the typed cause")
	require.True(t, tre.AtPrepare)
	require.Equal(t, []PartitionPlan{want}, tre.Plan)
	s.metrics.mu.Lock()
	require.Equal(t, []PartitionRef{{Mirror: "k", Topic: "t", Partition: 0}}, s.metrics.refused)
	require.Equal(t, []int64{3}, s.metrics.local)
	s.metrics.mu.Unlock()
	d := describeOn(t, s.m, "k", "t", 0)
	require.Contains(t, d.ErrorMessage, "no start approved this removal")
	require.Contains(t, d.ErrorMessage, "--recover --allow-truncation")
	require.Equal(t, int16(records.NonRetryable), d.RetryAttempt, "not retried by itself")
	require.True(t, s.w.ReadOnly("t", 0), "a FAILED mirror partition stays read-only")

	// A recover without the approval is refused with the plan, as a start would be.
	rr, err := s.m.RecoverMirrorTopics(ctx, "k", []string{"t"}, RecoverOptions{})
	require.NoError(t, err)
	require.ErrorAs(t, rr[0].Err, &tre)
	require.Len(t, rr[0].Plan, 1)
	plan := rr[0].Plan[0]
	require.Equal(t, statemachine.Failed, plan.StateNow)
	require.Equal(t, want.Removed, plan.Removed)
	require.Equal(t, want.LocalWrites, plan.LocalWrites, "the recover's plan counts this site's records as PREPARING does")
	dry, err := s.m.RecoverMirrorTopics(ctx, "k", []string{"t"}, RecoverOptions{ValidateOnly: true, AllowTruncation: true})
	require.NoError(t, err)
	require.NoError(t, dry[0].Err)
	require.Equal(t, rr[0].Plan, dry[0].Plan)
	ts, _ = s.m.Controller().Topic("t")
	require.Empty(t, ts.Approvals, "a dry run approves nothing")
	require.Equal(t, statemachine.Failed, describeOn(t, s.m, "k", "t", 0).State)
	require.Equal(t, before, logBytes(t, l))

	// Approved: exactly the plan goes, and the approval is used up.
	mustOK(t)(s.m.RecoverMirrorTopics(ctx, "k", []string{"t"}, RecoverOptions{AllowTruncation: true}))
	waitCond(t, ctx, s.m, "mirrored again", func() bool { return describeOn(t, s.m, "k", "t", 0).DestinationOffset == 10 })
	require.Equal(t, []Removal{{Ref: PartitionRef{Mirror: "k", Topic: "t", Partition: 0}, Removed: plan.Removed, LocalWrites: plan.LocalWrites}}, s.gotRemovals())
	require.Equal(t, []string{"t-0 truncate fully at 0 (end " + strconv.FormatInt(end, 10) + ")"}, s.w.truncations())
	ts, _ = s.m.Controller().Topic("t")
	require.Empty(t, ts.Approvals, "cleared once used")
}

// TestRestartInPreparingHonoursApproval: a start allowed to remove this site's records
// records the plan's range with the topic; a restart while PREPARING (before the
// truncation) finds it and removes exactly that range, then clears it. Records
// written after the approval make the removal larger than approved: refused.
func TestRestartInPreparingHonoursApproval(t *testing.T) {
	for _, grow := range []bool{false, true} {
		name := "as approved"
		if grow {
			name = "more than approved"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			root := t.TempDir()
			peer := &scriptedPeer{lme: -1}
			_, s, end := stoppedWithLocalWrites(t, ctx, root, peer, 3)
			held := peer.holdNext(1) // the plan lists the mirrors: none
			res, err := s.m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{AllowTruncation: true})
			mustOK(t)(res, err)
			plan := res[0].Plan[0]
			require.Equal(t, OffsetRange{From: 0, To: end, Records: 13}, plan.Removed)
			<-held
			ts, _ := s.m.Controller().Topic("t")
			require.Equal(t, []controller.Approval{{Partition: 0, From: 0, To: end}}, ts.Approvals, "durable with the desired state")
			s.close(t)
			if grow {
				d, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
				require.NoError(t, err)
				l, err := d.Log("t", 0)
				require.NoError(t, err)
				appendBatch(t, l, l.LeaderEpoch(), 2, "after-approval")
				require.NoError(t, d.Close())
			}

			s = openApprovalSite(t, root, &scriptedPeer{lme: -1})
			t.Cleanup(func() { s.close(t) })
			if grow {
				require.NoError(t, s.m.WaitForStates(ctx, "k", []string{"t"}, statemachine.Failed))
				ev, ok := s.evs.find(failedOf("t", 0))
				require.True(t, ok)
				var tre *TruncationRefusedError
				require.ErrorAs(t, ev.Cause, &tre)
				require.Equal(t, OffsetRange{From: 0, To: end + 2, Records: 15}, tre.Plan[0].Removed)
				require.Empty(t, s.w.truncations(), "an approval of [0, end) does not license [0, end+2)")
				require.Empty(t, s.gotRemovals())
				return
			}
			require.NoError(t, s.m.WaitForStates(ctx, "k", []string{"t"}, statemachine.Mirroring))
			require.Equal(t, []Removal{{Ref: PartitionRef{Mirror: "k", Topic: "t", Partition: 0}, Removed: plan.Removed, LocalWrites: plan.LocalWrites}}, s.gotRemovals())
			require.Equal(t, []string{"t-0 truncate fully at 0 (end " + strconv.FormatInt(end, 10) + ")"}, s.w.truncations())
			ts, _ = s.m.Controller().Topic("t")
			require.Empty(t, ts.Approvals, "cleared once used")
			s.metrics.mu.Lock()
			require.Equal(t, []int64{3}, s.metrics.start, "counted as removed local records")
			s.metrics.mu.Unlock()
		})
	}
}

// TestAutoDiscoveryRefusesLocalRecords: a mirror whose topics.include matches a
// destination topic that already holds records written here (a topic created on the
// site, the controller does not know it) starts it by discovery; the partition that
// would lose records is refused (FAILED, typed cause with the plan), the empty one
// mirrors. A recover with AllowTruncation removes exactly the plan.
func TestAutoDiscoveryRefusesLocalRecords(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	produceTo(t, ctx, src, "t", 2, 10, "a")
	s := openApprovalSite(t, t.TempDir(), &scriptedPeer{lme: -1})
	t.Cleanup(func() { s.close(t) })
	require.NoError(t, s.w.CreateTopic(ctx, TopicSpec{Name: "t", TopicID: records.UUID{0x51}, Partitions: 2}))
	l0, err := s.w.Log("t", 0)
	require.NoError(t, err)
	appendBatch(t, l0, l0.LeaderEpoch(), 4, "site-local")
	before := logBytes(t, l0)

	require.NoError(t, s.m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20", controller.KeyTopicsInclude: "t"}))
	var ts controller.TopicState
	waitCond(t, ctx, s.m, "discovered", func() bool {
		require.NoError(t, s.m.Sync(ctx))
		var ok bool
		ts, ok = s.m.Controller().Topic("t")
		return ok
	})
	require.Equal(t, statemachine.DesiredMirroring, ts.Desired)
	waitCond(t, ctx, s.m, "p0 refused, p1 mirrors", func() bool {
		return describeOn(t, s.m, "k", "t", 0).State == statemachine.Failed && describeOn(t, s.m, "k", "t", 1).DestinationOffset == 10
	})
	require.Equal(t, before, logBytes(t, l0), "no local record removed")
	// The describe can show FAILED a moment before the StateChange event is delivered.
	waitCond(t, ctx, s.m, "the FAILED event", func() bool { _, ok := s.evs.find(failedOf("t", 0)); return ok })
	ev, ok := s.evs.find(failedOf("t", 0))
	require.True(t, ok)
	var tre *TruncationRefusedError
	require.ErrorAs(t, ev.Cause, &tre)
	want := OffsetRange{From: 0, To: 4, Records: 4}
	require.Equal(t, want, tre.Plan[0].Removed)
	require.Equal(t, want, tre.Plan[0].LocalWrites)
	require.Equal(t, statemachine.Mirroring, describeOn(t, s.m, "k", "t", 1).State)

	rr, err := s.m.RecoverMirrorTopics(ctx, "k", []string{"t"}, RecoverOptions{AllowTruncation: true})
	mustOK(t)(rr, err)
	require.Equal(t, want, rr[0].Plan[0].Removed)
	waitCond(t, ctx, s.m, "p0 mirrors", func() bool {
		d := describeOn(t, s.m, "k", "t", 0)
		return d.State == statemachine.Mirroring && d.DestinationOffset == 10
	})
	require.Equal(t, []Removal{{Ref: PartitionRef{Mirror: "k", Topic: "t", Partition: 0}, Removed: want, LocalWrites: want}}, s.gotRemovals())
}

// TestRecoverHonoursUnusedApproval: an allowed start whose PREPARING failed before it
// truncated (the LME lookup failed; no automatic retry) keeps its approval, so a
// recover without AllowTruncation restarts it, and it removes exactly that plan.
func TestRecoverHonoursUnusedApproval(t *testing.T) {
	ctx := testCtx(t)
	peer := &scriptedPeer{lme: -1}
	_, s, end := stoppedWithLocalWrites(t, ctx, t.TempDir(), peer, 3, WithFailedRetry(RetryConfig{MaxAttempts: 0}))
	t.Cleanup(func() { s.close(t) })
	peer.holdNext(1)
	peer.mu.Lock()
	peer.fail = errors.New("lookup refused")
	peer.mu.Unlock()
	res, err := s.m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{AllowTruncation: true})
	mustOK(t)(res, err)
	plan := res[0].Plan[0]
	waitCond(t, ctx, s.m, "FAILED", func() bool { return describeOn(t, s.m, "k", "t", 0).State == statemachine.Failed })
	require.Empty(t, s.w.truncations())
	ts, _ := s.m.Controller().Topic("t")
	require.Equal(t, []controller.Approval{{Partition: 0, From: 0, To: end}}, ts.Approvals, "not used yet")

	peer.mu.Lock()
	peer.hold, peer.fail = false, nil
	peer.mu.Unlock()
	rr, err := s.m.RecoverMirrorTopics(ctx, "k", []string{"t"}, RecoverOptions{})
	mustOK(t)(rr, err)
	waitCond(t, ctx, s.m, "MIRRORING", func() bool { return describeOn(t, s.m, "k", "t", 0).State == statemachine.Mirroring })
	require.Equal(t, []Removal{{Ref: PartitionRef{Mirror: "k", Topic: "t", Partition: 0}, Removed: plan.Removed, LocalWrites: plan.LocalWrites}}, s.gotRemovals())
	ts, _ = s.m.Controller().Topic("t")
	require.Empty(t, ts.Approvals)
}
