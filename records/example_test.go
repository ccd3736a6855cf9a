package records_test

import (
	"fmt"

	"github.com/kmirror/kmirror/records"
)

// Walk the batches of a fetch response, verify them and restamp them for the
// destination log, without decompressing anything.
func ExampleIterator() {
	var fetched []byte
	for i, n := range []int{3, 2} {
		recs := make([]records.Record, n)
		for j := range recs {
			recs[j].Value = []byte(fmt.Sprintf("v%d.%d", i, j))
		}
		b, _ := records.BuildBatch(records.BatchSpec{BaseOffset: int64(i * 3), Compression: records.CompressionLZ4,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		fetched = append(fetched, b...)
	}
	fetched = fetched[:len(fetched)-10] // a fetch response may end mid-batch

	it := records.NewIterator(fetched)
	for it.Next() {
		b := it.Batch()
		if err := b.VerifyCRC(); err != nil {
			panic(err)
		}
		b.SetPartitionLeaderEpoch(4) // outside the CRC: still valid
		fmt.Println(b.BaseOffset(), b.NextOffset(), b.Attributes().Compression(), b.VerifyCRC() == nil)
	}
	fmt.Println("err:", it.Err(), "partial:", it.Partial(), "at", it.Pos())
	// Output:
	// 0 3 lz4 true
	// err: <nil> partial: true at 113
}

// Route a mirror partition to its __mirror_state partition the way a Java
// broker does.
func ExamplePartitionFor() {
	topicID, _ := records.ParseUUID("AAAAAAAAAAAAAAAAAAAAAQ")
	key := records.StateKey("dr-mirror", topicID, 0)
	fmt.Println(key, records.PartitionFor(key, 50))
	fmt.Println(records.JavaStringHash("polygenelubricants"), records.PartitionFor("polygenelubricants", 50))
	// Output:
	// dr-mirror:AAAAAAAAAAAAAAAAAAAAAQ:0 22
	// -2147483648 0
}

// Build the MIRROR_PID_RESET barrier written at the end of STOPPING.
func ExampleBuildControlBatch() {
	b := records.Batch(records.BuildControlBatch(records.ControlBatchSpec{
		BaseOffset: 100, PartitionLeaderEpoch: 6, Timestamp: 1_700_000_000_000,
		Type: records.ControlMirrorPIDReset,
	}))
	typ, _ := b.ControlType()
	fmt.Println(typ, b.Attributes().IsControl(), b.Attributes().IsTransactional(), b.ProducerID(), len(b))
	// Output:
	// MIRROR_PID_RESET true false -1 75
}
