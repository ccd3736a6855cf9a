package twosites

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
)

// planOut is mirrorctl's --output json of a lifecycle action with its plan.
type planOut struct {
	Mirror    string `json:"mirror"`
	Operation string `json:"operation"`
	DryRun    bool   `json:"dryRun"`
	Topics    []struct {
		Topic     string    `json:"topic"`
		ErrorCode int16     `json:"errorCode"`
		Error     string    `json:"error"`
		Plan      []planRow `json:"plan"`
	} `json:"topics"`
}

// planRow is one partition of a plan in mirrorctl's JSON.
type planRow struct {
	Partition        int32  `json:"partition"`
	StateNow         string `json:"stateNow"`
	StateAfter       string `json:"stateAfter"`
	LastMirrorEpoch  int32  `json:"lastMirrorEpoch"`
	LMECluster       string `json:"lmeCluster"`
	LMEMirror        string `json:"lmeMirror"`
	LogStart         int64  `json:"logStartOffset"`
	LogEnd           int64  `json:"logEndOffset"`
	TruncationOffset int64  `json:"truncationOffset"`
	FullTruncation   bool   `json:"fullTruncation"`
	DivergenceOffset int64  `json:"divergenceOffset"`
	Removed          struct {
		From    int64 `json:"fromOffset"`
		To      int64 `json:"toOffset"`
		Records int64 `json:"records"`
	} `json:"removed"`
	LocalWrites struct {
		From    int64 `json:"fromOffset"`
		To      int64 `json:"toOffset"`
		Records int64 `json:"records"`
	} `json:"localWrites"`
	OpenTransactions []struct {
		ProducerID    int64 `json:"producerId"`
		ProducerEpoch int16 `json:"producerEpoch"`
		FirstOffset   int64 `json:"firstOffset"`
	} `json:"openTransactions"`
}

// onePlan decodes out and returns the plan of its only topic, by partition.
func onePlan(t *testing.T, out string) (planOut, map[int32]planRow) {
	t.Helper()
	var po planOut
	require.NoError(t, json.Unmarshal([]byte(out), &po), out)
	require.Len(t, po.Topics, 1, out)
	require.Len(t, po.Topics[0].Plan, int(partitions), out)
	by := map[int32]planRow{}
	for _, p := range po.Topics[0].Plan {
		by[p.Partition] = p
	}
	return po, by
}

// logEnds is the log end of every partition of topic on s.
func logEnds(t *testing.T, s *site) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		out[p] = logEnd(t, rawLog(t, s.addr, topic, p))
	}
	return out
}

// TestPlanFailbackLocalWrites: after a failover B took writes; starting the old
// direction (a-to-b) on B again finds no LME (A has no mirror from B) and would
// truncate B's log fully, dropping those writes. --dry-run shows it and changes
// nothing; the start without --allow-truncation is refused with the plan, exits 1 and
// leaves B writable; with it, exactly the planned records go and the log names them.
func TestPlanFailbackLocalWrites(t *testing.T) {
	a, b := newSite(t, "A"), newSite(t, "B")
	createTopic(t, a.addr, topic, partitions)
	produceKgo(t, a.addr, topic, partitions, 20, "a")
	b.createMirror("a-to-b", a)
	b.ctl("--start", "--mirror", "a-to-b", "--topics", topic)
	caughtUp(t, b, "a-to-b", a)
	b.ctl("--stop", "--mirror", "a-to-b", "--topics", topic, "--wait")
	stopped := map[int32]partitionDesc{}
	for _, p := range b.describe("a-to-b", topic) {
		stopped[p.Partition] = p
	}
	produceKgo(t, b.addr, topic, partitions, 40, "b-local")
	ends := logEnds(t, b)

	start := []string{"--start", "--mirror", "a-to-b", "--topics", topic}
	out, errOut, code := b.ctlCode(append(start, "--dry-run", "--output", "json")...)
	require.Equal(t, 1, code, "a dry run of a refused start says so: stdout %s stderr %s", out, errOut)
	po, plan := onePlan(t, out)
	require.True(t, po.DryRun)
	require.Equal(t, int16(admin.CodeMirrorTruncationRefused), po.Topics[0].ErrorCode, out)
	for p := int32(0); p < partitions; p++ {
		pl := plan[p]
		require.Equal(t, "STOPPED", pl.StateNow)
		require.Equal(t, "MIRRORING", pl.StateAfter)
		require.Equal(t, int32(-1), pl.LastMirrorEpoch, "A has no mirror from B: no LME")
		require.True(t, pl.FullTruncation)
		require.Equal(t, int64(0), pl.TruncationOffset)
		require.Equal(t, [3]int64{0, ends[p], 60}, [3]int64{pl.Removed.From, pl.Removed.To, pl.Removed.Records}, "partition %d", p)
		require.Equal(t, [3]int64{stopped[p].LastMirrorOffset, ends[p], 40}, [3]int64{pl.LocalWrites.From, pl.LocalWrites.To, pl.LocalWrites.Records},
			"partition %d: B's writes since its stop", p)
	}
	requireStillStopped(t, b, ends)

	// The real start without --allow-truncation: refused, with the plan, nothing changed.
	out, errOut, code = b.ctlCode(start...)
	require.Equal(t, 1, code, "stdout %s stderr %s", out, errOut)
	require.Contains(t, errOut, "MIRROR_TRUNCATION_REFUSED")
	require.Contains(t, out, "LOCAL-RECORDS-LOST")
	require.NotContains(t, out, "Started mirroring")
	requireStillStopped(t, b, ends)
	// Two probes of requireStillStopped landed: 42 records written here since the stop.

	// Allowed: the plan it answers is what PREPARING removes.
	mark := b.mark()
	out = b.ctl(append(start, "--allow-truncation", "--output", "json")...)
	po, plan = onePlan(t, out)
	require.False(t, po.DryRun)
	require.Zero(t, po.Topics[0].ErrorCode, out)
	caughtUp(t, b, "a-to-b", a)
	sameBytes(t, a, b)
	for p := int32(0); p < partitions; p++ {
		pl := plan[p]
		require.Equal(t, [3]int64{0, ends[p], 62}, [3]int64{pl.Removed.From, pl.Removed.To, pl.Removed.Records}, "partition %d", p)
		require.Equal(t, int64(42), pl.LocalWrites.Records, "partition %d", p)
		got := b.logs(mark, func(l logLine) bool {
			return l.str("msg") == "mirror: PREPARING removed records from the destination log" && l.num("partition") == int64(p)
		})
		require.Len(t, got, 1, "partition %d: one removal, logged", p)
		require.Equal(t, [4]int64{pl.Removed.From, pl.Removed.To, pl.Removed.Records, pl.LocalWrites.Records},
			[4]int64{got[0].num("removedFrom"), got[0].num("removedTo"), got[0].num("removedRecords"), got[0].num("lost")}, "partition %d", p)
	}
}

// requireStillStopped checks that a refused start changed nothing on s: a-to-b is
// STOPPED with its LME, the logs end where they did, and a client may write.
func requireStillStopped(t *testing.T, s *site, ends map[int32]int64) {
	t.Helper()
	for _, p := range s.describe("a-to-b", topic) {
		require.Equal(t, "STOPPED", p.State, "partition %d", p.Partition)
	}
	require.Equal(t, ends, logEnds(t, s))
	for p, code := range produceRaw(t, s.addr, topic, partitions) {
		require.Zero(t, code, "partition %d: writable", p)
	}
	for p, e := range logEnds(t, s) {
		require.Equal(t, ends[p]+1, e, "partition %d: the probe record landed", p)
		ends[p] = e
	}
}

// TestPlanStopOpenTransactions: a failover (stop) while a transaction is open on the
// source. --dry-run lists per partition the LME the stop persists and the open
// transaction it aborts, and changes nothing; the stop then writes exactly those ABORT
// markers and persists that LME.
func TestPlanStopOpenTransactions(t *testing.T) {
	a, b := newSite(t, "A"), newSite(t, "B")
	createTopic(t, a.addr, topic, partitions)
	produceKgo(t, a.addr, topic, partitions, 10, "a")
	b.createMirror("a-to-b", a)
	b.ctl("--start", "--mirror", "a-to-b", "--topics", topic)

	tx := kgoClient(t, a.addr, kgo.TransactionalID("plan-tx"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, tx.BeginTransaction())
	type open struct {
		pid   int64
		epoch int16
		first int64
	}
	want := map[int32]open{}
	for p := int32(0); p < partitions; p++ {
		res := tx.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("open-%d", p))})
		require.NoError(t, res.FirstErr())
		r := res[0].Record
		want[p] = open{r.ProducerID, r.ProducerEpoch, r.Offset}
	}
	produceKgo(t, a.addr, topic, partitions, 5, "after")
	caughtUp(t, b, "a-to-b", a)

	stop := []string{"--stop", "--mirror", "a-to-b", "--topics", topic}
	out := b.ctl(append(stop, "--dry-run", "--output", "json")...)
	po, plan := onePlan(t, out)
	require.True(t, po.DryRun)
	for p := int32(0); p < partitions; p++ {
		pl := plan[p]
		require.Equal(t, "MIRRORING", pl.StateNow)
		require.Equal(t, "STOPPED", pl.StateAfter)
		require.GreaterOrEqual(t, pl.LastMirrorEpoch, int32(0))
		require.Equal(t, "a-to-b", pl.LMEMirror)
		require.Len(t, pl.OpenTransactions, 1, "partition %d", p)
		ot := pl.OpenTransactions[0]
		require.Equal(t, want[p], open{ot.ProducerID, ot.ProducerEpoch, ot.FirstOffset}, "partition %d", p)
	}
	// Nothing changed.
	for _, p := range b.describe("a-to-b", topic) {
		require.Equal(t, "MIRRORING", p.State)
	}
	requireReadOnly(t, b)
	table := b.ctl(append(stop, "--dry-run")...)
	require.Contains(t, table, "OPEN-TXNS")
	require.Contains(t, table, fmt.Sprintf("pid %d@%d", want[0].pid, want[0].first))

	b.ctl(append(stop, "--wait")...)
	for _, d := range b.describe("a-to-b", topic) {
		require.Equal(t, "STOPPED", d.State)
		require.Equal(t, plan[d.Partition].LastMirrorEpoch, d.LastMirrorEpoch, "partition %d: the LME planned", d.Partition)
	}
	for p := int32(0); p < partitions; p++ {
		var aborted []int64
		for _, bt := range batches(t, rawLog(t, b.addr, topic, p)) {
			if bt.BaseOffset() < plan[p].LogEnd || !bt.Attributes().IsControl() {
				continue
			}
			ct, err := bt.ControlType()
			require.NoError(t, err)
			if ct == records.ControlAbort {
				aborted = append(aborted, bt.ProducerID())
			}
		}
		require.Equal(t, []int64{want[p].pid}, aborted, "partition %d: the stop aborted what it planned", p)
	}
	_ = tx.EndTransaction(ctx, kgo.TryAbort)
}

// TestPlanReverseStartRefusedWhileForwardMirrors: starting b-to-a on A while B's
// a-to-b mirrors the topic is a mirror loop. mirrorctl exits non-zero with the reason,
// and nothing changes on A: the topic stays writable, no barrier is written, b-to-a
// has no topic; the forward mirror goes on.
func TestPlanReverseStartRefusedWhileForwardMirrors(t *testing.T) {
	a, b := newSite(t, "A"), newSite(t, "B")
	createTopic(t, a.addr, topic, partitions)
	produceKgo(t, a.addr, topic, partitions, 10, "a")
	b.createMirror("a-to-b", a)
	b.ctl("--start", "--mirror", "a-to-b", "--topics", topic)
	caughtUp(t, b, "a-to-b", a)
	a.createMirror("b-to-a", b)
	ends := logEnds(t, a)

	for _, extra := range [][]string{nil, {"--dry-run"}} {
		out, errOut, code := a.ctlCode(append([]string{"--start", "--mirror", "b-to-a", "--topics", topic}, extra...)...)
		require.NotEqual(t, 0, code, "%v: stdout %s stderr %s", extra, out, errOut)
		require.Contains(t, errOut, "mirror loop", "%v", extra)
		require.NotContains(t, out, "Started mirroring")
		require.Equal(t, ends, logEnds(t, a), "%v: A's logs unchanged (no barrier)", extra)
		require.Empty(t, a.describe("b-to-a", topic), "%v: b-to-a has no topic", extra)
	}
	for p := int32(0); p < partitions; p++ {
		bs := batches(t, rawLog(t, a.addr, topic, p))
		require.False(t, bs[len(bs)-1].Attributes().IsControl(), "partition %d: no control batch on A", p)
	}
	for p, o := range produceKgo(t, a.addr, topic, partitions, 3, "still-writable") {
		require.Equal(t, ends[p], o[0], "partition %d: A takes writes", p)
	}
	caughtUp(t, b, "a-to-b", a)
	sameBytes(t, a, b)
}
