package adminhandler_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/adminhandler"
	"github.com/kmirror/kmirror/statemachine"
)

// handlerSite is a Mirror on a memory destination mirroring from a kfake source, served
// by an admin.Server (at addr) with adminhandler.New and reached by an admin.Client.
type handlerSite struct {
	src    *kfake.Cluster
	m      *mirror.Mirror
	dest   *mirror.LocalDestination
	client *admin.Client
	addr   string
}

// newHandlerSite makes a handlerSite whose source holds topics (name: partitions, five
// records each); opts are added to the Mirror's.
func newHandlerSite(t *testing.T, topics map[string]int32, opts ...mirror.Option) *handlerSite {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("handler-source"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	pcl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(pcl.Close)
	ctx := context.Background()
	for name, n := range topics {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, pcl)
		require.NoError(t, err)
		require.Zero(t, resp.Topics[0].ErrorCode)
		var recs []*kgo.Record
		for p := range n {
			for i := range 5 {
				recs = append(recs, &kgo.Record{Topic: name, Partition: p, Value: []byte(strings.Repeat("v", 10+i))})
			}
		}
		require.NoError(t, pcl.ProduceSync(ctx, recs...).FirstErr())
	}

	dest := mirror.NewMemoryDestination("handler-destination", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { _ = dest.Close() })
	m, err := mirror.New(mirror.Config{Destination: dest, SyncInterval: -1, FetchIdleWait: 10 * time.Millisecond},
		append([]mirror.Option{mirror.WithPeerFactory(func(string, mirror.MirrorConfig) (mirror.Peer, error) { return nil, nil })}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })

	srv, err := admin.NewServer(admin.ServerConfig{Handler: adminhandler.New(m)})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, admin.ErrServerClosed)
	})
	kcl, err := kgo.NewClient(append(admin.ClientOpts(), kgo.SeedBrokers(ln.Addr().String()), kgo.RequestRetries(0))...)
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	return &handlerSite{src: src, m: m, dest: dest, client: admin.NewClient(kcl), addr: ln.Addr().String()}
}

func handlerCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func requireWireCode(t *testing.T, want admin.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, want.Err(), "got %v", err)
}

func handlerTopicCodes[T any](topics []T, name func(T) string, code func(T) int16) map[string]admin.Code {
	out := map[string]admin.Code{}
	for _, t := range topics {
		out[name(t)] = admin.Code(code(t))
	}
	return out
}

// wireScenario is the state TestAdminHandlerOverWire's steps share: one site, one
// mirror m1 taken through its whole life over the admin protocol.
type wireScenario struct {
	s         *handlerSite
	ctx       context.Context
	cl        *admin.Client
	bootstrap string
}

// TestAdminHandlerOverWire runs the life of a mirror over the wire, one subtest a step;
// each step needs the ones before it, so the first failure stops the rest.
func TestAdminHandlerOverWire(t *testing.T) {
	s := newHandlerSite(t, map[string]int32{"orders": 2, "payments": 1})
	w := &wireScenario{s: s, ctx: handlerCtx(t), cl: s.client, bootstrap: strings.Join(s.src.ListenAddrs(), ",")}
	for _, step := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"create", w.create},
		{"start", w.start},
		{"list", w.list},
		{"describe", w.describe},
		{"instance-reads", w.instanceReads},
		{"invalid-states", w.invalidStates},
		{"pause-resume", w.pauseResume},
		{"unknown-mirror", w.unknownMirror},
		{"stop", w.stop},
		{"fenced-write", w.fencedWrite},
		{"bump-epochs", w.bumpEpochs},
		{"delete", w.delete},
		{"closed", w.closed},
	} {
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}
}

// create: CreateClusterMirror, then a duplicate and an invalid config.
func (w *wireScenario) create(t *testing.T) {
	create := admin.NewPtrCreateClusterMirrorRequest()
	create.MirrorName = "m1"
	create.Configs = []admin.CreateClusterMirrorRequestConfig{
		{Name: mirror.KeyBootstrapServers, Value: &w.bootstrap},
		{Name: mirror.KeyFetchWaitMaxMs, Value: nil}, // null: default
	}
	_, err := w.cl.CreateClusterMirror(w.ctx, create)
	require.NoError(t, err)
	_, err = w.cl.CreateClusterMirror(w.ctx, create)
	requireWireCode(t, admin.CodeClusterMirrorAlreadyExists, err)
	var ae *admin.Error
	require.ErrorAs(t, err, &ae)
	require.NotContains(t, ae.Message, "admin:", "the wire message carries no Go error prefix")
	bad := admin.NewPtrCreateClusterMirrorRequest()
	bad.MirrorName = "bad"
	_, err = w.cl.CreateClusterMirror(w.ctx, bad)
	direct := w.s.m.CreateClusterMirror(w.ctx, "bad", map[string]string{})
	require.Error(t, direct)
	require.Equal(t, admin.CodeOf(direct), admin.CodeOf(err), "wire %v, facade %v", err, direct)
	dup := admin.NewPtrCreateClusterMirrorRequest()
	dup.MirrorName = "dup"
	dup.Configs = []admin.CreateClusterMirrorRequestConfig{{Name: "a", Value: &w.bootstrap}, {Name: "a", Value: &w.bootstrap}}
	_, err = w.cl.CreateClusterMirror(w.ctx, dup)
	requireWireCode(t, admin.CodeInvalidRequest, err)
}

// start: per-topic results, a pattern, a contradicting topic id.
func (w *wireScenario) start(t *testing.T) {
	start := admin.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = "m1"
	for _, n := range []string{"orders", "nope"} {
		tp := admin.NewStartMirrorTopicsRequestTopic()
		tp.Name = n
		start.Topics = append(start.Topics, tp)
	}
	sresp, err := w.cl.StartMirrorTopics(w.ctx, start)
	require.NoError(t, err)
	codes := handlerTopicCodes(sresp.Topics, func(t admin.StartMirrorTopicsResponseTopic) string { return t.Name },
		func(t admin.StartMirrorTopicsResponseTopic) int16 { return t.ErrorCode })
	require.Equal(t, map[string]admin.Code{"orders": admin.CodeNone, "nope": admin.CodeUnknownTopicOrPartition}, codes)
	require.NoError(t, w.s.m.WaitForStates(w.ctx, "m1", []string{"orders"}, statemachine.Mirroring))

	// Start with a pattern picks up "payments".
	startP := admin.NewPtrStartMirrorTopicsRequest()
	startP.MirrorName = "m1"
	startP.IncludePatterns = []string{"pay.*"}
	sresp, err = w.cl.StartMirrorTopics(w.ctx, startP)
	require.NoError(t, err)
	require.Len(t, sresp.Topics, 1)
	require.Equal(t, "payments", sresp.Topics[0].Name)
	require.Zero(t, sresp.Topics[0].ErrorCode)
	require.NoError(t, w.s.m.WaitForStates(w.ctx, "m1", []string{"payments"}, statemachine.Mirroring))

	// A topic id that contradicts the existing destination topic is refused.
	startID := admin.NewPtrStartMirrorTopicsRequest()
	startID.MirrorName = "m1"
	wrong := admin.NewStartMirrorTopicsRequestTopic()
	wrong.Name, wrong.TopicId = "orders", [16]byte{1, 2, 3}
	startID.Topics = append(startID.Topics, wrong)
	sresp, err = w.cl.StartMirrorTopics(w.ctx, startID)
	require.NoError(t, err)
	require.Len(t, sresp.Topics, 1)
	require.Equal(t, admin.CodeTopicAlreadyExists, admin.Code(sresp.Topics[0].ErrorCode))
}

// list: ListClusterMirrors equals the facade's answer; the desired-state filter.
func (w *wireScenario) list(t *testing.T) {
	list := admin.NewPtrListClusterMirrorsRequest()
	list.IncludeTopicNames = true
	lresp, err := w.cl.ListClusterMirrors(w.ctx, list)
	require.NoError(t, err)
	ls, err := w.s.m.ListClusterMirrors(w.ctx, mirror.ListFilter{IncludeTopicNames: true})
	require.NoError(t, err)
	require.Len(t, lresp.Mirrors, len(ls))
	for i, l := range ls {
		wm := lresp.Mirrors[i]
		require.Equal(t, l.Name, wm.MirrorName)
		require.Equal(t, l.SourceBootstrap, wm.SourceBootstrap)
		require.Equal(t, l.SourceClusterID, wm.SourceClusterId)
		require.Equal(t, int32(l.TopicCount), wm.TopicCount)
		require.ElementsMatch(t, l.TopicNames, wm.TopicNames)
	}
	require.Equal(t, int32(2), lresp.Mirrors[0].TopicCount)
	list.DesiredMirrorStateFilter = []string{"PAUSED"}
	lresp, err = w.cl.ListClusterMirrors(w.ctx, list)
	require.NoError(t, err)
	require.Len(t, lresp.Mirrors, 1, "a mirror with no matching topic is still listed")
	require.Zero(t, lresp.Mirrors[0].TopicCount)
	list.DesiredMirrorStateFilter = []string{"SLEEPING"}
	_, err = w.cl.ListClusterMirrors(w.ctx, list)
	requireWireCode(t, admin.CodeInvalidRequest, err)
}

// describe: once the destination holds everything, Describe equals the facade; an
// unknown name fails alone.
func (w *wireScenario) describe(t *testing.T) {
	for p := int32(0); p < 2; p++ {
		log, err := w.s.dest.Log("orders", p)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return log.LogEndOffset() == 5 }, 10*time.Second, 5*time.Millisecond)
	}
	desc := admin.NewPtrDescribeClusterMirrorsRequest()
	desc.MirrorNames = []string{"m1", "ghost"}
	desc.IncludeMirrorStates, desc.IncludeMirrorLags = true, true
	desc.TopicPartitions = []admin.DescribeClusterMirrorsRequestTopicPartitions{{Topic: "orders"}}
	dresp, err := w.cl.DescribeClusterMirrors(w.ctx, desc)
	require.NoError(t, err)
	require.Len(t, dresp.Mirrors, 2)
	byName := map[string]admin.DescribeClusterMirrorsResponseMirror{}
	for _, dm := range dresp.Mirrors {
		byName[dm.MirrorName] = dm
	}
	require.Equal(t, admin.CodeUnknownClusterMirror, admin.Code(byName["ghost"].ErrorCode))
	got := byName["m1"]
	require.Zero(t, got.ErrorCode)
	want, err := w.s.m.DescribeClusterMirrors(w.ctx, []string{"m1"}, mirror.DescribeOptions{IncludeStates: true, IncludeLags: true,
		TopicPartitions: map[string][]int32{"orders": nil}})
	require.NoError(t, err)
	require.Len(t, want, 1)
	require.Equal(t, want[0].SourceBootstrap, *got.SourceBootstrap)
	require.Len(t, got.Topics, len(want[0].Topics))
	for i, wt := range want[0].Topics {
		gt := got.Topics[i]
		require.Equal(t, wt.Topic, gt.TopicName)
		require.Len(t, gt.Partitions, len(wt.Partitions))
		for j, wp := range wt.Partitions {
			gp := gt.Partitions[j]
			require.Equal(t, wp.Partition, gp.PartitionIndex)
			require.Equal(t, statemachine.Mirroring, statemachine.State(gp.State))
			require.Equal(t, int8(wp.State), gp.State)
			require.Equal(t, wp.LastMirrorEpoch, gp.LastMirrorEpoch)
			require.Equal(t, wp.DestinationOffset, gp.DestinationOffset)
			require.Equal(t, int64(5), gp.DestinationOffset)
		}
	}
}

// readStatesRequest asks for the states of both partitions of "orders" in m1.
func readStatesRequest() *admin.ReadMirrorStatesRequest {
	rs := admin.NewPtrReadMirrorStatesRequest()
	rs.MirrorName = "m1"
	rs.Topics = []admin.ReadMirrorStatesRequestTopic{{TopicName: "orders", Partitions: []admin.ReadMirrorStatesRequestTopicPartition{
		{PartitionIndex: 0, LeaderEpoch: -1}, {PartitionIndex: 1, LeaderEpoch: -1}}}}
	return rs
}

// instanceReads: ReadMirrorStates and ReadMirrorOffsets equal the facade's instance RPCs.
func (w *wireScenario) instanceReads(t *testing.T) {
	rs := readStatesRequest()
	rsResp, err := w.cl.ReadMirrorStates(w.ctx, rs)
	require.NoError(t, err)
	rsDirect, err := w.s.m.ReadMirrorStates(w.ctx, rs)
	require.NoError(t, err)
	require.Len(t, rsResp.Topics, 1)
	for i, p := range rsResp.Topics[0].Partitions {
		dp := rsDirect.Topics[0].Partitions[i]
		require.Equal(t, dp.State, p.State)
		require.Equal(t, dp.StateEpoch, p.StateEpoch)
		require.Equal(t, int8(statemachine.Mirroring), p.State)
	}
	ro := admin.NewPtrReadMirrorOffsetsRequest()
	ro.MirrorName = "m1"
	ro.Topics = []admin.ReadMirrorOffsetsRequestTopic{{TopicName: "orders", Partitions: []int32{0, 1}}, {TopicName: "nope", Partitions: []int32{0}}}
	roResp, err := w.cl.ReadMirrorOffsets(w.ctx, ro)
	require.NoError(t, err)
	require.Equal(t, int64(5), roResp.Topics[0].Partitions[1].DestinationOffset)
	require.Equal(t, admin.CodeUnknownTopicOrPartition, admin.Code(roResp.Topics[1].Partitions[0].ErrorCode))
}

func resumeOrders() *admin.ResumeMirrorTopicsRequest {
	resume := admin.NewPtrResumeMirrorTopicsRequest()
	resume.MirrorName = "m1"
	resume.Topics = []admin.ResumeMirrorTopicsRequestTopic{{TopicName: "orders"}}
	return resume
}

func pauseOrders() *admin.PauseMirrorTopicsRequest {
	pause := admin.NewPtrPauseMirrorTopicsRequest()
	pause.MirrorName = "m1"
	pause.Topics = []admin.PauseMirrorTopicsRequestTopic{{TopicName: "orders"}}
	return pause
}

func deleteM1() *admin.DeleteClusterMirrorsRequest {
	del := admin.NewPtrDeleteClusterMirrorsRequest()
	del.MirrorName = "m1"
	return del
}

// invalidStates: invalid states survive the wire (resume while MIRRORING, delete while
// mirroring), and the message does not name the code that ErrorCode carries.
func (w *wireScenario) invalidStates(t *testing.T) {
	rresp, err := w.cl.ResumeMirrorTopics(w.ctx, resumeOrders())
	require.NoError(t, err)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, admin.Code(rresp.Topics[0].ErrorCode))
	msg := *rresp.Topics[0].ErrorMessage
	require.Contains(t, msg, "MIRRORING")
	require.NotContains(t, msg, admin.CodeInvalidClusterMirrorStates.String())
	require.NotContains(t, msg, "admin:")
	_, err = w.cl.DeleteClusterMirrors(w.ctx, deleteM1())
	requireWireCode(t, admin.CodeInvalidClusterMirrorStates, err)
	require.Equal(t, 1, strings.Count(err.Error(), admin.CodeInvalidClusterMirrorStates.String()), err.Error())
}

// pauseResume: pause, pause again (refused), resume.
func (w *wireScenario) pauseResume(t *testing.T) {
	presp, err := w.cl.PauseMirrorTopics(w.ctx, pauseOrders())
	require.NoError(t, err)
	require.Zero(t, presp.Topics[0].ErrorCode)
	require.NoError(t, w.s.m.WaitForStates(w.ctx, "m1", []string{"orders"}, statemachine.Paused))
	presp, err = w.cl.PauseMirrorTopics(w.ctx, pauseOrders())
	require.NoError(t, err)
	require.Equal(t, admin.CodeInvalidClusterMirrorStates, admin.Code(presp.Topics[0].ErrorCode))
	rresp, err := w.cl.ResumeMirrorTopics(w.ctx, resumeOrders())
	require.NoError(t, err)
	require.Zero(t, rresp.Topics[0].ErrorCode)
	require.NoError(t, w.s.m.WaitForStates(w.ctx, "m1", []string{"orders"}, statemachine.Mirroring))
}

// unknownMirror: an unknown mirror is a top-level error on every mirror-scoped RPC.
func (w *wireScenario) unknownMirror(t *testing.T) {
	cl, ctx := w.cl, w.ctx
	for name, call := range map[string]func() error{
		"start": func() error {
			r := admin.NewPtrStartMirrorTopicsRequest()
			r.MirrorName = "ghost"
			_, err := cl.StartMirrorTopics(ctx, r)
			return err
		},
		"stop": func() error {
			r := admin.NewPtrStopMirrorTopicsRequest()
			r.MirrorName = "ghost"
			_, err := cl.StopMirrorTopics(ctx, r)
			return err
		},
		"pause": func() error {
			r := pauseOrders()
			r.MirrorName = "ghost"
			_, err := cl.PauseMirrorTopics(ctx, r)
			return err
		},
		"delete": func() error {
			r := admin.NewPtrDeleteClusterMirrorsRequest()
			r.MirrorName = "ghost"
			_, err := cl.DeleteClusterMirrors(ctx, r)
			return err
		},
		"read-states": func() error {
			r := admin.NewPtrReadMirrorStatesRequest()
			r.MirrorName = "ghost"
			_, err := cl.ReadMirrorStates(ctx, r)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { requireWireCode(t, admin.CodeUnknownClusterMirror, call()) })
	}
}

// stop: both topics (one by name, one by pattern) reach STOPPED and become writable.
func (w *wireScenario) stop(t *testing.T) {
	stop := admin.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "m1"
	stop.Topics = []admin.StopMirrorTopicsRequestTopic{{TopicName: "orders"}}
	stop.Patterns = []string{"pay.*"}
	stResp, err := w.cl.StopMirrorTopics(w.ctx, stop)
	require.NoError(t, err)
	codes := handlerTopicCodes(stResp.Topics, func(t admin.StopMirrorTopicsResponseTopic) string { return t.TopicName },
		func(t admin.StopMirrorTopicsResponseTopic) int16 { return t.ErrorCode })
	require.Equal(t, map[string]admin.Code{"orders": admin.CodeNone, "payments": admin.CodeNone}, codes)
	require.NoError(t, w.s.m.WaitForStates(w.ctx, "m1", []string{"orders", "payments"}, statemachine.Stopped))
	// STOPPED is durable before its entry action clears the read-only flag.
	require.Eventually(t, func() bool { return !w.s.dest.ReadOnly("orders", 0) }, 10*time.Second, time.Millisecond)
}

// fencedWrite: WriteMirrorStates with a stale state epoch is fenced, per partition.
func (w *wireScenario) fencedWrite(t *testing.T) {
	rsResp, err := w.cl.ReadMirrorStates(w.ctx, readStatesRequest())
	require.NoError(t, err)
	stateEpoch := rsResp.Topics[0].Partitions[0].StateEpoch
	require.Positive(t, stateEpoch)
	ws := admin.NewPtrWriteMirrorStatesRequest()
	ws.MirrorName = "m1"
	wp := admin.NewWriteMirrorStatesRequestTopicPartition()
	wp.PartitionIndex, wp.State, wp.LeaderEpoch, wp.StateEpoch, wp.LastMirrorEpoch = 0, int8(statemachine.Unknown), -1, stateEpoch-1, -1
	ws.Topics = []admin.WriteMirrorStatesRequestTopic{{TopicName: "orders", Partitions: []admin.WriteMirrorStatesRequestTopicPartition{wp}}}
	wsResp, err := w.cl.WriteMirrorStates(w.ctx, ws)
	require.NoError(t, err)
	require.Equal(t, admin.CodeFencedStateEpoch, admin.Code(wsResp.Topics[0].Partitions[0].ErrorCode))
}

// bumpEpochs: BumpLeaderEpochs on a stopped partition and an unknown one, whose message
// does not repeat its code.
func (w *wireScenario) bumpEpochs(t *testing.T) {
	log0, err := w.s.dest.Log("orders", 0)
	require.NoError(t, err)
	bump := admin.NewPtrBumpLeaderEpochsRequest()
	bump.Topics = []admin.BumpLeaderEpochsRequestTopic{
		{TopicName: "orders", Partitions: []admin.BumpLeaderEpochsRequestTopicPartition{{PartitionIndex: 0, MinLeaderEpoch: log0.LeaderEpoch() + 10}}},
		{TopicName: "nope", Partitions: []admin.BumpLeaderEpochsRequestTopicPartition{{PartitionIndex: 0, MinLeaderEpoch: -1}}},
	}
	before := log0.LeaderEpoch()
	bResp, err := w.cl.BumpLeaderEpochs(w.ctx, bump)
	require.NoError(t, err)
	require.Zero(t, bResp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, before+11, bResp.Topics[0].Partitions[0].LeaderEpoch)
	require.Equal(t, before+11, log0.LeaderEpoch())
	unknown := bResp.Topics[1].Partitions[0]
	require.Equal(t, admin.CodeUnknownTopicOrPartition, admin.Code(unknown.ErrorCode))
	require.NotNil(t, unknown.ErrorMessage)
	require.Equal(t, "unknown partition nope-0", *unknown.ErrorMessage)
}

// delete: Delete now succeeds; the mirror is gone.
func (w *wireScenario) delete(t *testing.T) {
	_, err := w.cl.DeleteClusterMirrors(w.ctx, deleteM1())
	require.NoError(t, err)
	lresp, err := w.cl.ListClusterMirrors(w.ctx, admin.NewPtrListClusterMirrorsRequest())
	require.NoError(t, err)
	require.Empty(t, lresp.Mirrors)
}

// closed: an unexpected error is UNKNOWN_SERVER_ERROR with the error text.
func (w *wireScenario) closed(t *testing.T) {
	require.NoError(t, w.s.m.Close())
	_, err := w.cl.ListClusterMirrors(w.ctx, admin.NewPtrListClusterMirrorsRequest())
	requireWireCode(t, admin.CodeUnknownServerError, err)
	var ae *admin.Error
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Message, mirror.ErrClosed.Error())
}
