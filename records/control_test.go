package records

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// goldenHeader writes the 61-byte header by hand, field by field, as
// Kafka's DefaultRecordBatch lays it out, leaving the CRC to the reference
// implementation.
func goldenBatch(t *testing.T, headerHex, recordHex string) []byte {
	t.Helper()
	h, err := hex.DecodeString(headerHex)
	require.NoError(t, err)
	r, err := hex.DecodeString(recordHex)
	require.NoError(t, err)
	out := append(h, r...)
	require.Len(t, h, HeaderSize)
	crc := crc32cRef(out[21:])
	out[17], out[18], out[19], out[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return out
}

func TestBuildControlBatchGolden(t *testing.T) {
	abort := BuildControlBatch(ControlBatchSpec{
		BaseOffset: 5, PartitionLeaderEpoch: 3, ProducerID: 1000, ProducerEpoch: 2,
		Timestamp: 0x0102030405, Type: ControlAbort, CoordinatorEpoch: 7,
	})
	want := goldenBatch(t,
		"0000000000000005"+ // base offset
			"00000042"+ // batch length 66 = 49 + 17
			"00000003"+ // partition leader epoch
			"02"+ // magic
			"00000000"+ // crc (filled in)
			"0030"+ // attributes: control | transactional
			"00000000"+ // last offset delta
			"0000000102030405"+ // base timestamp
			"0000000102030405"+ // max timestamp
			"00000000000003e8"+ // producer id 1000
			"0002"+ // producer epoch
			"ffffffff"+ // base sequence -1
			"00000001", // one record
		"20"+ // record length 16 (zigzag)
			"00"+ // attributes
			"00"+ // timestamp delta
			"00"+ // offset delta
			"08"+"00000000"+ // key: 4 bytes {version 0, type 0}
			"0c"+"000000000007"+ // value: 6 bytes {version 0, coordinator epoch 7}
			"00") // no headers
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(abort))

	reset := BuildControlBatch(ControlBatchSpec{
		BaseOffset: 9, PartitionLeaderEpoch: 4, ProducerID: 1000, ProducerEpoch: 2,
		Timestamp: 0x10, Type: ControlMirrorPIDReset, CoordinatorEpoch: 7,
	})
	want = goldenBatch(t,
		"0000000000000009"+
			"0000003f"+ // 49 + 14
			"00000004"+
			"02"+
			"00000000"+
			"0020"+ // control only
			"00000000"+
			"0000000000000010"+
			"0000000000000010"+
			"ffffffffffffffff"+ // producer id -1 (spec values ignored)
			"ffff"+ // producer epoch -1
			"ffffffff"+
			"00000001",
		"1a"+ // record length 13
			"000000"+
			"08"+"00000007"+ // key {version 0, type 7}
			"06"+"000000"+ // value: flexible MirrorPidResetRecord {version 0, no tagged fields}
			"00")
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(reset))
}

func TestControlTypeAndMarker(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit, ControlMirrorPIDReset} {
		b := Batch(BuildControlBatch(ControlBatchSpec{BaseOffset: 1, ProducerID: 5, ProducerEpoch: 1, Type: typ, CoordinatorEpoch: 11}))
		require.NoError(t, b.VerifyCRC())
		require.True(t, b.Attributes().IsControl())
		require.Equal(t, typ != ControlMirrorPIDReset, b.Attributes().IsTransactional())
		got, err := b.ControlType()
		require.NoError(t, err)
		require.Equal(t, typ, got)
		mt, epoch, err := b.EndTxnMarker()
		if typ == ControlMirrorPIDReset {
			require.ErrorIs(t, err, ErrCorrupt)
			require.Equal(t, "MIRROR_PID_RESET", typ.String())
			continue
		}
		require.NoError(t, err)
		require.Equal(t, typ, mt)
		require.Equal(t, int32(11), epoch)
	}

	// Not a control batch.
	_, err := Batch(mustBuild(t, BatchSpec{}, sampleRecords(1))).ControlType()
	require.ErrorIs(t, err, ErrCorrupt)
	// Control batch with a short key or a negative key version.
	for _, key := range [][]byte{{0, 0, 1}, {0xff, 0xff, 0, 1}} {
		b := mustBuild(t, BatchSpec{Control: true}, []Record{{Key: key}})
		_, err = Batch(b).ControlType()
		require.ErrorIs(t, err, ErrCorrupt)
	}
	// Empty control batch.
	_, err = Batch(mustBuild(t, BatchSpec{Control: true}, nil)).ControlType()
	require.ErrorIs(t, err, ErrCorrupt)
	// A newer key version is read as version 0, as Kafka does.
	got, err := Batch(mustBuild(t, BatchSpec{Control: true}, []Record{{Key: []byte{0, 3, 0, 1, 9}}})).ControlType()
	require.NoError(t, err)
	require.Equal(t, ControlCommit, got)
	require.Equal(t, "UNKNOWN(99)", ControlType(99).String())
}

// TestControlBatchMatchesKfake is the bar test: the markers a broker writes
// for a committed and an aborted transaction must equal BuildControlBatch's
// output for the same inputs, byte for byte.
func TestControlBatchMatchesKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.TransactionalID("records-bar-test"),
		kgo.DefaultProduceTopic("t"),
	)
	require.NoError(t, err)
	defer cl.Close()

	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		require.NoError(t, cl.BeginTransaction())
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("txn record")}).FirstErr())
		require.NoError(t, cl.EndTransaction(ctx, commit))
	}

	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	name := "t"
	mt.Topic = &name
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, mresp.Topics, 1)

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 1 << 20
	req.IsolationLevel = 0
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	ft.TopicID = mresp.Topics[0].TopicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = 0
	fp.FetchOffset = 0
	fp.CurrentLeaderEpoch = -1
	fp.LastFetchedEpoch = -1
	fp.LogStartOffset = -1
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	fresp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, fresp.Topics, 1)
	require.Len(t, fresp.Topics[0].Partitions, 1)
	part := fresp.Topics[0].Partitions[0]
	require.Zero(t, part.ErrorCode)

	var controls []Batch
	it := NewIterator(part.RecordBatches)
	for it.Next() {
		b := it.Batch()
		require.NoError(t, b.VerifyCRC())
		if b.Attributes().IsControl() {
			controls = append(controls, b)
		}
	}
	require.NoError(t, it.Err())
	require.False(t, it.Partial())
	require.Len(t, controls, 2)

	for i, want := range []ControlType{ControlCommit, ControlAbort} {
		b := controls[i]
		typ, coordEpoch, err := b.EndTxnMarker()
		require.NoError(t, err)
		require.Equal(t, want, typ)
		require.Equal(t, b.BaseTimestamp(), b.MaxTimestamp())
		built := BuildControlBatch(ControlBatchSpec{
			BaseOffset:           b.BaseOffset(),
			PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
			ProducerID:           b.ProducerID(),
			ProducerEpoch:        b.ProducerEpoch(),
			Timestamp:            b.BaseTimestamp(),
			Type:                 typ,
			CoordinatorEpoch:     coordEpoch,
		})
		require.Equal(t, hex.EncodeToString(b), hex.EncodeToString(built), "marker %v", want)
		require.NoError(t, Batch(built).VerifyCRC())
	}
}
