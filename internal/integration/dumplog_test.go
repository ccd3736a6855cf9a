package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/internal/kafkatest"
	"github.com/kmirror/kmirror/records"
)

// dumpBatch is one batch line of DumpLogSegments' output, reduced to the columns that must
// agree between two copies of a partition (position and segment layout may differ).
type dumpBatch struct {
	BaseOffset, LastOffset int64
	Count                  int
	PartitionLeaderEpoch   int32
	CRC                    uint32
	Valid                  bool
}

func (d dumpBatch) String() string {
	return fmt.Sprintf("base %d last %d count %d epoch %d crc %d valid %v", d.BaseOffset, d.LastOffset, d.Count,
		d.PartitionLeaderEpoch, d.CRC, d.Valid)
}

var (
	dumpLine  = regexp.MustCompile(`(?m)^baseOffset: .*$`)
	dumpField = regexp.MustCompile(`(\w+): (\S+)`)
)

// parseDump returns the batch lines of a batch-level DumpLogSegments output, in file order.
func parseDump(t testing.TB, out string) []dumpBatch {
	t.Helper()
	var res []dumpBatch
	for _, line := range dumpLine.FindAllString(out, -1) {
		f := make(map[string]string)
		for _, m := range dumpField.FindAllStringSubmatch(line, -1) {
			f[m[1]] = m[2]
		}
		num := func(k string) int64 {
			v, ok := f[k]
			require.True(t, ok, "no %s in %q", k, line)
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, "%s in %q", k, line)
			return n
		}
		res = append(res, dumpBatch{BaseOffset: num("baseOffset"), LastOffset: num("lastOffset"), Count: int(num("count")),
			PartitionLeaderEpoch: int32(num("partitionLeaderEpoch")), CRC: uint32(num("crc")), Valid: f["isvalid"] == "true"})
	}
	return res
}

// TestDumpLogSegments mirrors a partition holding every codec and a committed and an aborted
// transaction into a FileLog with small segments (so kmirror rolls several), then runs Kafka's
// DumpLogSegments on kmirror's segments and on the source leader's segments of the same
// partition: both list the same batches (base and last offset, count, partition leader epoch,
// CRC, valid), which are also the batches the leader serves.
func TestDumpLogSegments(t *testing.T) {
	kafkatest.RequireCI(t)
	brokers := kafkatest.ClusterA(t)
	admin := kafkatest.NewClient(t, brokers)
	topic := kafkatest.TopicName(t)
	info := kafkatest.CreateTopic(t, admin, topic, 1, 3, nil)
	for _, c := range codecs {
		cl := kafkatest.NewClient(t, brokers, kgo.ProducerBatchCompression(c.codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produce(t, cl, topic, 0, c.name, 300, 100)
	}
	txn := kafkatest.NewClient(t, brokers, kgo.TransactionalID(topic+"-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		require.NoError(t, txn.BeginTransaction())
		produce(t, txn, topic, 0, "txn", 50, 50)
		require.NoError(t, txn.EndTransaction(ctx, end))
	}
	waitFor(t, waitTimeout, "transaction markers", func() (bool, string) {
		sp, err := tryReadSource(admin, topic, 0)
		if err != nil {
			return false, err.Error()
		}
		return statsOf(sp.Batches).Control == 2 && sp.LastStable == sp.HighWatermark, fmt.Sprintf("last stable %d high watermark %d", sp.LastStable, sp.HighWatermark)
	})

	tp := fetcher.TopicPartition{Topic: topic}
	m := startMirror(t, brokers, []fetcher.TopicPartition{tp}, mirrorOptions{FileLog: fetcher.FileLogOptions{SegmentBytes: 16 << 10}})
	src := m.waitCaughtUp(t, admin)[tp]
	requireSameBatches(t, tp.String(), src.Batches, readLog(t, m.logs[tp]))
	require.NoError(t, m.logs[tp].Flush())

	mine, err := filepath.Glob(filepath.Join(m.logs[tp].Dir(), "*.log"))
	require.NoError(t, err)
	require.Greater(t, len(mine), 1, "kmirror should have rolled several segments")
	theirs := kafkatest.SegmentFiles(t, kafkatest.A, src.Leader, topic, 0)
	require.NotEmpty(t, theirs)
	mineOut := kafkatest.DumpLogSegments(t, mine...)
	theirOut := kafkatest.DumpLogSegments(t, theirs...)
	for _, bad := range []string{"Exception", "corrupt"} {
		require.NotContains(t, mineOut, bad)
	}
	mineBatches, theirBatches := parseDump(t, mineOut), parseDump(t, theirOut)
	t.Logf("DumpLogSegments: kmirror %d segments, %d batches; leader %d: %d segments, %d batches (leader epoch %d, topic id %x)",
		len(mine), len(mineBatches), src.Leader, len(theirs), len(theirBatches), src.LeaderEpoch, info.ID)
	require.Len(t, mineBatches, len(src.Batches))
	require.Equal(t, len(theirBatches), len(mineBatches), "batch count\nkmirror:\n%s\nleader:\n%s", mineOut, theirOut)
	for i := range mineBatches {
		require.Equal(t, theirBatches[i], mineBatches[i], "batch %d", i)
		require.True(t, mineBatches[i].Valid, "batch %d", i)
		require.Equal(t, want(src.Batches[i]), mineBatches[i], "batch %d against the fetched bytes", i)
	}
	var lines []string
	for _, b := range mineBatches[:min(3, len(mineBatches))] {
		lines = append(lines, b.String())
	}
	t.Logf("first batches: %s", strings.Join(lines, "; "))
}

func want(b records.Batch) dumpBatch {
	return dumpBatch{BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), Count: int(b.NumRecords()),
		PartitionLeaderEpoch: b.PartitionLeaderEpoch(), CRC: b.CRC(), Valid: true}
}
