package admin

import (
	"fmt"
	"testing"
)

// writeStates builds a WriteMirrorStates request of topics × partitions.
func writeStates(topics, partitions int) *WriteMirrorStatesRequest {
	r := NewPtrWriteMirrorStatesRequest()
	r.MirrorName = "dr-east"
	for t := 0; t < topics; t++ {
		tp := NewWriteMirrorStatesRequestTopic()
		tp.TopicName = fmt.Sprintf("orders-%d", t)
		for p := 0; p < partitions; p++ {
			pp := NewWriteMirrorStatesRequestTopicPartition()
			pp.PartitionIndex, pp.State, pp.LeaderEpoch, pp.StateEpoch = int32(p), 3, 12, 40
			tp.Partitions = append(tp.Partitions, pp)
		}
		r.Topics = append(r.Topics, tp)
	}
	return r
}

func BenchmarkWriteMirrorStatesEncode(b *testing.B) {
	r := writeStates(10, 100)
	buf := r.AppendTo(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendTo(buf[:0])
	}
}

func BenchmarkWriteMirrorStatesDecode(b *testing.B) {
	buf := writeStates(10, 100).AppendTo(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var r WriteMirrorStatesRequest
	for b.Loop() {
		if err := r.ReadFrom(buf); err != nil {
			b.Fatal(err)
		}
	}
}
