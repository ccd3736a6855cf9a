package twosites

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kafkatest"
)

// Sizes of BenchmarkConsumeMirrored's topic.
const (
	benchPartitions = 4
	benchRecords    = 64 << 10 // 64 Ki records of 1 KiB: 64 MiB of values
	benchValueBytes = 1 << 10
)

// BenchmarkConsumeMirrored compares a kgo consumer reading the same data
// from a real Kafka 4.4 broker (the harness's cluster B, one node) and from a
// kmirrord site that mirrored it from that broker byte for byte. Each
// iteration reads the whole topic (every partition from offset 0) with a new
// client; MB/s counts record values. It skips unless the harness clusters
// run (source /tmp/kmirror-kafka/env). KMIRRORD_CPUPROFILE=file profiles the
// kmirrord process.
//
//	go test -run '^$' -bench ConsumeMirrored -benchtime 5x ./internal/twosites/
func BenchmarkConsumeMirrored(b *testing.B) {
	brokers := kafkatest.ClusterB(b)
	kcl := kafkatest.NewClient(b, brokers)
	topic := kafkatest.TopicName(b)
	kafkatest.CreateTopic(b, kcl, topic, benchPartitions, 1, nil)
	fillBench(b, brokers[0], topic)

	var extra []string
	if prof := os.Getenv("KMIRRORD_CPUPROFILE"); prof != "" {
		extra = append(extra, "-cpuprofile", prof)
	}
	site := newSite(b, "M", extra...)
	defer site.term() // writes the profile
	site.createMirrorTo("kafka-to-m", brokers[0], filepath.Join(b.TempDir(), "kafka.properties"))
	site.ctl("--start", "--mirror", "kafka-to-m", "--topics", topic)
	ends := map[int32]int64{}
	for p := int32(0); p < benchPartitions; p++ {
		ends[p] = benchRecords / benchPartitions
	}
	site.waitPartitionsFor(120*time.Second, "kafka-to-m", topic, benchPartitions, "caught up", func(p partitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == ends[p.Partition]
	})
	for _, target := range []struct{ name, addr string }{{"kafka", brokers[0]}, {"kmirrord", site.addr}} {
		b.Run(target.name, func(b *testing.B) {
			b.SetBytes(benchRecords * benchValueBytes)
			for i := 0; i < b.N; i++ {
				consumeAll(b, target.addr, topic)
			}
		})
	}
}

// fillBench writes benchRecords incompressible records spread evenly over
// the partitions.
func fillBench(b *testing.B, addr, topic string) {
	b.Helper()
	cl := kgoClient(b, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	errs := make(chan error, 1)
	for i := 0; i < benchRecords; i++ {
		v := make([]byte, benchValueBytes)
		_, _ = rand.Read(v)
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % benchPartitions), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	require.NoError(b, cl.Flush(ctx))
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// consumeAll reads every record of the topic with a fresh kgo consumer.
func consumeAll(b *testing.B, addr, topic string) {
	parts := map[int32]kgo.Offset{}
	for p := int32(0); p < benchPartitions; p++ {
		parts[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	require.NoError(b, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := 0
	for n < benchRecords {
		fs := cl.PollFetches(ctx)
		require.NoError(b, ctx.Err())
		fs.EachError(func(_ string, p int32, err error) { b.Fatalf("fetch partition %d: %v", p, err) })
		n += fs.NumRecords()
	}
	require.Equal(b, benchRecords, n)
}
