package compacted

import (
	"encoding/binary"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
)

func dataBatch(first int64, pid int64, txn bool, keys ...string) *sarama.Records {
	b := &sarama.RecordBatch{FirstOffset: first, ProducerID: pid, IsTransactional: txn, LastOffsetDelta: int32(len(keys) - 1)}
	for i, k := range keys {
		b.Records = append(b.Records, &sarama.Record{OffsetDelta: int64(i), Key: []byte(k), Value: []byte("v" + k)})
	}
	return &sarama.Records{RecordBatch: b}
}

func marker(offset, pid int64, typ uint16) *sarama.Records {
	key := make([]byte, 4)
	binary.BigEndian.PutUint16(key[2:], typ)
	b := &sarama.RecordBatch{FirstOffset: offset, ProducerID: pid, IsTransactional: true, Control: true,
		Records: []*sarama.Record{{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}}}}
	return &sarama.Records{RecordBatch: b}
}

// TestReplayBatches is the read_committed decision on one fetch response.
func TestReplayBatches(t *testing.T) {
	blk := &sarama.FetchResponseBlock{
		AbortedTransactions: []*sarama.AbortedTransaction{{ProducerID: 8, FirstOffset: 3}},
		RecordsSet: []*sarama.Records{
			dataBatch(0, 7, true, "a", "b"), // committed; "a" is below from
			marker(2, 7, 1),                 // COMMIT
			dataBatch(3, 8, true, "x"),      // aborted
			marker(4, 8, 0),                 // ABORT ends it
			dataBatch(5, 9, false, "c"),     // not transactional
			dataBatch(6, 8, true, "d"),      // a new transaction of producer 8: committed
			dataBatch(7, 9, false, "late"),  // at end: not replayed
		},
	}
	var got []replayed
	next, partial, err := replayBatches(blk, 1, 7, func(off int64, k, v []byte) error {
		got = append(got, replayed{Offset: off, Key: string(k), Value: string(v)})
		return nil
	})
	require.NoError(t, err)
	require.False(t, partial)
	require.Equal(t, int64(7), next)
	require.Equal(t, []replayed{{1, "b", "vb", false}, {5, "c", "vc", false}, {6, "d", "vd", false}}, got)

	// An aborted transaction spanning two fetches: the second response lists it again
	// (its last offset is past the fetch offset), so its rest is skipped as well.
	blk2 := &sarama.FetchResponseBlock{
		AbortedTransactions: []*sarama.AbortedTransaction{{ProducerID: 8, FirstOffset: 3}},
		RecordsSet:          []*sarama.Records{dataBatch(10, 8, true, "y"), marker(11, 8, 0), dataBatch(12, 9, false, "e")},
	}
	got = nil
	next, _, err = replayBatches(blk2, 10, 20, func(off int64, k, v []byte) error {
		got = append(got, replayed{Offset: off, Key: string(k), Value: string(v)})
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(13), next)
	require.Equal(t, []replayed{{12, "e", "ve", false}}, got)

	// A truncated first batch: nothing passed, partial reported.
	trunc := dataBatch(20, 9, false, "z")
	trunc.RecordBatch.PartialTrailingRecord = true
	next, partial, err = replayBatches(&sarama.FetchResponseBlock{RecordsSet: []*sarama.Records{trunc}}, 20, 30,
		func(int64, []byte, []byte) error { t.Fatal("replayed a truncated batch"); return nil })
	require.NoError(t, err)
	require.True(t, partial)
	require.Equal(t, int64(20), next)

	// A legacy message set is refused.
	_, _, err = replayBatches(&sarama.FetchResponseBlock{RecordsSet: []*sarama.Records{{}}}, 0, 1,
		func(int64, []byte, []byte) error { return nil })
	require.ErrorIs(t, err, ErrReplay)
}
