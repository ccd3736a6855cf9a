package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// A small key space so that commands collide often.
var (
	propMirrors = []string{"a", "b"}
	propTopics  = []records.UUID{{1}, {2}}
	propParts   = int32(3)
)

type propOp struct {
	read   *ReadRequest
	write  *WriteRequest
	delete string
}

func randEpoch(rng *rand.Rand, hi int32) int32 { return rng.Int32N(hi+2) - 1 } // -1..hi

func genOps(rng *rand.Rand, n int) []propOp {
	ops := make([]propOp, n)
	for i := range ops {
		mirror := propMirrors[rng.IntN(len(propMirrors))]
		k := 1 + rng.IntN(3)
		switch x := rng.IntN(20); {
		case x == 0:
			ops[i].delete = mirror
		case x < 7:
			req := ReadRequest{MirrorName: mirror}
			for range k {
				req.Partitions = append(req.Partitions, ReadPartition{TopicID: propTopics[rng.IntN(2)],
					Partition: rng.Int32N(propParts), LeaderEpoch: randEpoch(rng, 6)})
			}
			ops[i].read = &req
		default:
			req := WriteRequest{MirrorName: mirror}
			for range k {
				p := WritePartition{TopicID: propTopics[rng.IntN(2)], Partition: rng.Int32N(propParts),
					State: statemachine.State(rng.IntN(10) - 1), LeaderEpoch: randEpoch(rng, 6),
					StateEpoch: randEpoch(rng, 8), LastMirrorEpoch: -1, LastMirrorOffset: -1}
				if rng.IntN(4) == 0 {
					p.LastMirrorEpoch, p.LastMirrorOffset = rng.Int32N(6), rng.Int64N(1000)
				}
				if p.State == statemachine.Failed {
					msg := fmt.Sprintf("boom %d", rng.IntN(3))
					p.ErrorMessage = &msg
				}
				req.Partitions = append(req.Partitions, p)
			}
			ops[i].write = &req
		}
	}
	return ops
}

// refModel is an independent, simple model of the §9.6 rules.
type refEntry struct {
	state          statemachine.State
	le, se         int32
	lme            int32
	lmo            int64
	hasState, hasL bool
}

type refKey struct {
	m string
	t records.UUID
	p int32
}

type refModel map[refKey]refEntry

func (m refModel) get(k refKey) refEntry {
	if e, ok := m[k]; ok {
		return e
	}
	return refEntry{state: statemachine.Unknown, le: -1, lme: -1, lmo: -1}
}

func (m refModel) write(mirror string, p WritePartition) (admin.Code, int32) {
	k := refKey{mirror, p.TopicID, p.Partition}
	e := m.get(k)
	if p.LeaderEpoch != -1 && e.le > p.LeaderEpoch {
		return admin.CodeFencedLeaderEpoch, -1
	}
	if p.StateEpoch != -1 && e.se > p.StateEpoch {
		return admin.CodeFencedStateEpoch, -1
	}
	if p.State != statemachine.Unknown && !statemachine.ValidMove(e.state, p.State) {
		return admin.CodeInvalidClusterMirrorStates, -1
	}
	newLE := max(e.le, p.LeaderEpoch)
	if p.State != statemachine.Unknown {
		e.state, e.se, e.hasState = p.State, e.se+1, true
	}
	if newLE != e.le {
		e.le, e.hasState = newLE, true
	}
	if p.LastMirrorEpoch != -1 {
		e.lme, e.lmo, e.hasL = p.LastMirrorEpoch, p.LastMirrorOffset, true
	}
	if e.hasState || e.hasL {
		m[k] = e
	}
	return admin.CodeNone, e.se
}

func (m refModel) read(mirror string, p ReadPartition) refEntry {
	k := refKey{mirror, p.TopicID, p.Partition}
	e := m.get(k)
	if p.LeaderEpoch > e.le {
		e.le, e.hasState = p.LeaderEpoch, true
		m[k] = e
	}
	return e
}

func (m refModel) del(mirror string) {
	for k := range m {
		if k.m == mirror {
			delete(m, k)
		}
	}
}

// TestPropertyShardReplay runs 10,000 random command sequences against the
// shard, checks every response against the reference model, and checks that
// replaying the emitted records into a fresh shard gives identical state.
func TestPropertyShardReplay(t *testing.T) {
	t.Parallel()
	const sequences, length = 10_000, 20
	rng := rand.New(rand.NewPCG(1279, 9))
	for seq := range sequences {
		s := NewShard()
		ref := refModel{}
		var log []records.StateRecord
		for _, op := range genOps(rng, length) {
			var recs []records.StateRecord
			switch {
			case op.read != nil:
				res := s.ReadMirrorStates(*op.read)
				for i, p := range op.read.Partitions {
					want := ref.read(op.read.MirrorName, p)
					got := res.Response.Partitions[i]
					if got.State != want.state || got.LeaderEpoch != want.le || got.StateEpoch != want.se ||
						got.LastMirrorEpoch != want.lme || got.LastMirrorOffset != want.lmo {
						t.Fatalf("seq %d: read %+v: got %+v want %+v", seq, p, got, want)
					}
				}
				recs = res.Records
			case op.write != nil:
				res := s.WriteMirrorStates(*op.write)
				for i, p := range op.write.Partitions {
					code, se := ref.write(op.write.MirrorName, p)
					got := res.Response.Partitions[i]
					if got.ErrorCode != code || got.StateEpoch != se {
						t.Fatalf("seq %d: write %+v: got %v/%d want %v/%d", seq, p, got.ErrorCode, got.StateEpoch, code, se)
					}
				}
				recs = res.Records
			default:
				res := s.DeleteMirror(op.delete)
				ref.del(op.delete)
				recs = res.Records
			}
			for _, r := range recs {
				if err := s.Replay(r); err != nil {
					t.Fatalf("seq %d: replay: %v", seq, err)
				}
			}
			log = append(log, recs...)
		}
		fresh := NewShard()
		for _, r := range log {
			require.NoError(t, fresh.Replay(r))
		}
		if !fresh.Equal(s) {
			t.Fatalf("seq %d: replayed state differs:\n%s\nvs\n%s", seq, fresh.Dump(), s.Dump())
		}
		if len(ref) != s.Len() {
			t.Fatalf("seq %d: model has %d entries, shard %d", seq, len(ref), s.Len())
		}
	}
}

// history runs ops through a runtime over store and returns a text trace of
// every response, followed by the final state as read back (no raise).
func history(t testing.TB, store Store, ops []propOp) []string {
	t.Helper()
	ctx := context.Background()
	r, err := New(Config{NumPartitions: 3, AppendLinger: -1}, store)
	require.NoError(t, err)
	defer r.Close()
	loadAllParts(t, r, 1)
	var h []string
	for _, op := range ops {
		switch {
		case op.read != nil:
			res, err := r.ReadMirrorStates(ctx, *op.read)
			require.NoError(t, err)
			h = append(h, "read "+fmtRead(res))
		case op.write != nil:
			res, err := r.WriteMirrorStates(ctx, *op.write)
			require.NoError(t, err)
			h = append(h, fmt.Sprintf("write %+v", res))
		default:
			res, err := r.DeleteMirror(ctx, op.delete)
			require.NoError(t, err)
			h = append(h, fmt.Sprintf("delete %d", len(res.Partitions)))
		}
	}
	return append(h, finalState(t, store, 2)...)
}

// finalState reloads every partition of store with a new runtime (owner
// epoch) and reads every key of the property key space.
func finalState(t testing.TB, store Store, epoch int32) []string {
	t.Helper()
	ctx := context.Background()
	r, err := New(Config{NumPartitions: 3, AppendLinger: -1}, store)
	require.NoError(t, err)
	defer r.Close()
	loadAllParts(t, r, epoch)
	var out []string
	for _, m := range propMirrors {
		req := ReadRequest{MirrorName: m}
		for _, tp := range propTopics {
			for p := range propParts {
				req.Partitions = append(req.Partitions, ReadPartition{TopicID: tp, Partition: p, LeaderEpoch: -1})
			}
		}
		res, err := r.ReadMirrorStates(ctx, req)
		require.NoError(t, err)
		out = append(out, "final "+m+" "+fmtRead(res))
	}
	return out
}

// TestPropertyStoresAgree runs the same random sequences through a runtime
// over the MemoryStore and over the KafkaStore on kfake; the histories
// (every response, then the state reloaded by a new owner) must be identical.
// 200 sequences on memory (checked for determinism against a second memory
// run); 25 of them also on kfake, each on its own topic.
func TestPropertyStoresAgree(t *testing.T) {
	t.Parallel()
	const memSeqs, kafkaSeqs, length = 200, 25, 25
	c := newKfake(t)
	rng := rand.New(rand.NewPCG(7, 1279))
	for seq := range memSeqs {
		ops := genOps(rng, length)
		want := history(t, NewMemoryStore(), ops)
		if seq < kafkaSeqs {
			cfg := kafkaCfg(c, 3)
			cfg.Topic = fmt.Sprintf("state-%d", seq)
			cfg.TransactionalIDPrefix = cfg.Topic
			ks := newKafkaStore(t, cfg)
			got := history(t, ks, ops)
			require.Equal(t, want, got, "sequence %d", seq)
			require.NoError(t, ks.Close())
		} else {
			require.Equal(t, want, history(t, NewMemoryStore(), ops), "sequence %d", seq)
		}
	}
}

func fmtRead(res ReadResponse) string {
	var b strings.Builder
	for _, p := range res.Partitions {
		msg := "<nil>"
		if p.ErrorMessage != nil {
			msg = *p.ErrorMessage
		}
		fmt.Fprintf(&b, "[%s:%d %s le=%d se=%d lme=%d lmo=%d err=%q %s]", p.TopicID, p.Partition, p.State,
			p.LeaderEpoch, p.StateEpoch, p.LastMirrorEpoch, p.LastMirrorOffset, msg, p.ErrorCode)
	}
	return b.String()
}
