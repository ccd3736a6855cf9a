package coordinator

import (
	"testing"

	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// FuzzShardCommands decodes arbitrary bytes into a sequence of shard
// commands (the shard's input surface after the wire types are mapped) and
// checks that no input panics, that refusals emit no records, that state
// epochs never go down without a tombstone, and that replaying the emitted
// records into a fresh shard gives the same state.
func FuzzShardCommands(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 2, 1, 1, 0, 0, 0, 3, 3, 1, 1})
	f.Add([]byte{0, 0, 0, 5, 1, 0, 0, 0, 1, 0, 4, 1, 1, 0, 2, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 1, 1, 1, 1, 9, 7, 7, 2, 1, 0, 1, 1, 255, 255, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b)
		}
		s := NewShard()
		var log []records.StateRecord
		for len(data) > 0 {
			mirror := []string{"a", "b"}[next()&1]
			tp := records.UUID{byte(next() & 1)}
			part := int32(next() & 3)
			var recs []records.StateRecord
			switch next() % 3 {
			case 0:
				res := s.ReadMirrorStates(ReadRequest{MirrorName: mirror, Partitions: []ReadPartition{{TopicID: tp, Partition: part, LeaderEpoch: int32(next()%8) - 1}}})
				recs = res.Records
			case 1:
				w := WritePartition{TopicID: tp, Partition: part, State: statemachine.State(next()%11 - 1),
					LeaderEpoch: int32(next()%8) - 1, StateEpoch: int32(next()%8) - 1, LastMirrorEpoch: int32(next()%4) - 1, LastMirrorOffset: int64(next())}
				before := s.lookup(entryKey{mirror, tp, part})
				res := s.WriteMirrorStates(WriteRequest{MirrorName: mirror, Partitions: []WritePartition{w}})
				if res.Response.Partitions[0].ErrorCode != 0 && len(res.Records) != 0 {
					t.Fatalf("refusal with records: %+v", res)
				}
				for _, r := range res.Records {
					if v := r.PartitionState; v != nil && v.StateEpoch < before.stateEpoch {
						t.Fatalf("state epoch went down: %d -> %d", before.stateEpoch, v.StateEpoch)
					}
				}
				recs = res.Records
			default:
				recs = s.DeleteMirror(mirror).Records
			}
			for _, r := range recs {
				if err := s.Replay(r); err != nil {
					t.Fatal(err)
				}
			}
			log = append(log, recs...)
		}
		fresh := NewShard()
		for _, r := range log {
			if err := fresh.Replay(r); err != nil {
				t.Fatal(err)
			}
		}
		if !fresh.Equal(s) {
			t.Fatalf("replay differs:\n%s\nvs\n%s", fresh.Dump(), s.Dump())
		}
	})
}
