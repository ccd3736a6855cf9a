package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	kmadmin "github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

const (
	topic      = "orders"
	partitions = 3
	mirrorName = "quickstart"
	// rounds of produce per producer before and while mirroring.
	roundsBefore = 4
	roundsDuring = 4
	perRound     = 25 // records per partition per round
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "quickstart: %v\n", err)
		os.Exit(1)
	}
}

// run is the whole example; it writes its report to out.
func run(ctx context.Context, out io.Writer) (err error) {
	// 1. The source: an embedded Kafka cluster with one topic.
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("source-cluster"))
	if err != nil {
		return err
	}
	defer src.Close()
	seeds := src.ListenAddrs()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer admin.Close()
	topicID, err := createTopic(ctx, admin, topic, partitions)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "source: embedded Kafka %s, topic %q with %d partitions\n", strings.Join(seeds, ","), topic, partitions)

	prods, err := newProducers(seeds)
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range prods {
			p.cl.Close()
		}
	}()
	if err := produce(ctx, prods, 0, roundsBefore); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	fmt.Fprintf(out, "produced %d rounds with codecs none, gzip, snappy, lz4, zstd and a transactional producer (commit and abort)\n", roundsBefore)

	// 2. The destination: a file-backed LocalDestination in a temp dir.
	dir, err := os.MkdirTemp("", "kmirror-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dest, err := mirror.OpenFileDestination(dir, "destination-cluster", fetcher.FileLogOptions{})
	if err != nil {
		return err
	}
	defer dest.Close()
	m, err := mirror.New(mirror.Config{Destination: dest, FetchIdleWait: 20 * time.Millisecond},
		// The source is a plain Kafka cluster: there is no mirror back to
		// consult for a last mirrored epoch, so mirror from scratch.
		mirror.WithPeerFactory(func(string, mirror.MirrorConfig) (mirror.Peer, error) { return nil, nil }))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := m.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	fmt.Fprintf(out, "destination: file logs under a temporary directory (cluster %q)\n", dest.ClusterID())

	// 3. Create the mirror and start the topic; keep producing meanwhile.
	if err := m.CreateClusterMirror(ctx, mirrorName, map[string]string{
		mirror.KeyBootstrapServers: strings.Join(seeds, ","),
	}); err != nil {
		return err
	}
	res, err := m.StartMirrorTopics(ctx, mirrorName, []string{topic}, mirror.StartOptions{})
	if err != nil {
		return err
	}
	if err := topicErrors(res); err != nil {
		return err
	}
	fmt.Fprintf(out, "created mirror %q and started topic %q\n", mirrorName, topic)

	// The producers keep writing while the mirror catches up; the final high
	// watermarks are known once they are done.
	g, gctx := errgroup.WithContext(ctx)
	hwc := make(chan []int64, 1)
	g.Go(func() error {
		if err := produce(gctx, prods, roundsBefore, roundsDuring); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		hw, err := highWatermarks(gctx, admin, topic, partitions)
		if err != nil {
			return err
		}
		hwc <- hw
		return nil
	})
	hw, werr := waitCaughtUp(gctx, out, m, hwc)
	if err := g.Wait(); err != nil {
		return err
	}
	if werr != nil {
		return werr
	}

	// 5. Verify byte equality partition by partition.
	verdict := "IDENTICAL"
	for p := int32(0); p < partitions; p++ {
		srcBatches, err := sourceBatches(ctx, admin, topic, topicID, p)
		if err != nil {
			return err
		}
		log, err := dest.Log(topic, p)
		if err != nil {
			return err
		}
		dstBatches, err := logBatches(log, 0)
		if err != nil {
			return err
		}
		st := summarize(srcBatches)
		same := equalBatches(srcBatches, dstBatches)
		if !same {
			verdict = "DIFFERENT"
		}
		fmt.Fprintf(out, "partition %d: %d batches (%s), %d control, offsets [0, %d): bytes %s\n",
			p, len(srcBatches), st.codecs, st.control, hw[p], map[bool]string{true: "identical", false: "DIFFER"}[same])
	}
	fmt.Fprintf(out, "verdict: destination is %s to the source\n", verdict)
	if verdict != "IDENTICAL" {
		return errors.New("destination differs from the source")
	}
	if err := printDescribe(ctx, out, m); err != nil {
		return err
	}

	// 6. A client write to a mirror topic is refused while it mirrors: the
	// host's produce path is dest.Produce (a broker's Produce handler calls it).
	clientWrite, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: time.Now().UnixMilli()}, []records.Record{{Value: []byte("written by a client")}})
	if err != nil {
		return err
	}
	if _, err := dest.Produce(ctx, topic, 0, clientWrite); errors.Is(err, kmadmin.CodeReadOnlyTopic.Err()) {
		fmt.Fprintf(out, "partition 0: client write while MIRRORING refused: READ_ONLY_TOPIC\n")
	} else {
		return fmt.Errorf("partition 0: a client write while MIRRORING was not refused with READ_ONLY_TOPIC: %v", err)
	}

	// 7. Fail over: stop the topic and wait until it is STOPPED.
	res, err = m.StopMirrorTopics(ctx, mirrorName, []string{topic}, mirror.StopOptions{Wait: true})
	if err != nil {
		return err
	}
	if err := topicErrors(res); err != nil {
		return err
	}
	fmt.Fprintf(out, "stopped topic %q (failover)\n", topic)
	if err := printDescribe(ctx, out, m); err != nil {
		return err
	}
	for p := int32(0); p < partitions; p++ {
		log, err := dest.Log(topic, p)
		if err != nil {
			return err
		}
		tail, err := logBatches(log, hw[p])
		if err != nil {
			return err
		}
		barrier := "missing"
		if n := len(tail); n > 0 && tail[n-1].Attributes().IsControl() {
			if ct, err := tail[n-1].ControlType(); err == nil && ct == records.ControlMirrorPIDReset {
				barrier = fmt.Sprintf("MIRROR_PID_RESET at offset %d", tail[n-1].BaseOffset())
			}
		}
		if barrier == "missing" {
			return fmt.Errorf("partition %d: no MIRROR_PID_RESET barrier after the mirrored data", p)
		}
		if err := waitWritable(ctx, dest, p); err != nil {
			return err
		}
		// The topic is now an ordinary writable topic: the same client write is accepted.
		off, err := dest.Produce(ctx, topic, p, clientWrite)
		if err != nil {
			return fmt.Errorf("partition %d: client write after failover: %w", p, err)
		}
		fmt.Fprintf(out, "partition %d: read-only=false, %s, client write accepted at offset %d (leader epoch %d)\n",
			p, barrier, off, log.LeaderEpoch())
	}
	fmt.Fprintln(out, "done: the mirror copied every byte and the topic is writable on the destination")
	return nil
}

// producer is one source producer.
type producer struct {
	name string
	cl   *kgo.Client
	txn  bool
}

func newProducers(seeds []string) ([]producer, error) {
	common := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)}
	specs := []struct {
		name  string
		extra []kgo.Opt
		txn   bool
	}{
		{"none", []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())}, false},
		{"gzip", []kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())}, false},
		{"snappy", []kgo.Opt{kgo.ProducerBatchCompression(kgo.SnappyCompression())}, false},
		{"lz4", []kgo.Opt{kgo.ProducerBatchCompression(kgo.Lz4Compression())}, false},
		{"zstd", []kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression())}, false},
		{"txn", []kgo.Opt{kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.TransactionalID("quickstart-txn")}, true},
	}
	var out []producer
	for _, s := range specs {
		cl, err := kgo.NewClient(append(append([]kgo.Opt{}, common...), s.extra...)...)
		if err != nil {
			for _, p := range out {
				p.cl.Close()
			}
			return nil, err
		}
		out = append(out, producer{name: s.name, cl: cl, txn: s.txn})
	}
	return out, nil
}

// produce runs rounds [from, from+n) on every producer concurrently; the
// transactional producer commits even rounds and aborts odd ones.
func produce(ctx context.Context, prods []producer, from, n int) error {
	var g errgroup.Group
	for i, p := range prods {
		g.Go(func() error {
			for round := from; round < from+n; round++ {
				var recs []*kgo.Record
				for part := int32(0); part < partitions; part++ {
					for j := 0; j < perRound; j++ {
						recs = append(recs, &kgo.Record{
							Partition: part,
							Key:       fmt.Appendf(nil, "customer-%d", (j+i)%17),
							Value:     fmt.Appendf(nil, "order %d/%d/%d from %s: %s", round, part, j, p.name, strings.Repeat("x", 40+j%23)),
						})
					}
				}
				if p.txn {
					if err := p.cl.BeginTransaction(); err != nil {
						return err
					}
				}
				if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					return err
				}
				if p.txn {
					if err := p.cl.EndTransaction(ctx, kgo.TransactionEndTry(round%2 == 0)); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func createTopic(ctx context.Context, cl *kgo.Client, name string, n int32) (records.UUID, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return records.UUID{}, err
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		return records.UUID{}, fmt.Errorf("create topic %s: error code %d", name, c)
	}
	return records.UUID(resp.Topics[0].TopicID), nil
}

func highWatermarks(ctx context.Context, cl *kgo.Client, name string, n int32) ([]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = name
	for p := int32(0); p < n; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("list offsets %s/%d: error code %d", name, p.Partition, p.ErrorCode)
			}
			if p.Partition >= 0 && p.Partition < n {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// sourceBatches reads every raw batch of one partition from the source with
// plain kmsg Fetch requests, independently of kmirror's fetch path.
func sourceBatches(ctx context.Context, cl *kgo.Client, name string, id records.UUID, p int32) ([]records.Batch, error) {
	var out []records.Batch
	var offset int64
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.SessionEpoch, req.MaxBytes, req.MaxWaitMillis = -1, -1, 16<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = name, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, offset, 4<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("fetch %s/%d: unexpected response shape", name, p)
		}
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 {
			return nil, fmt.Errorf("fetch %s/%d at %d: error code %d", name, p, offset, sp.ErrorCode)
		}
		n := 0
		it := records.NewIterator(sp.RecordBatches)
		for it.Next() {
			b := it.Batch()
			if b.NextOffset() <= offset {
				continue
			}
			out = append(out, append(records.Batch(nil), b...))
			offset = b.NextOffset()
			n++
		}
		if it.Err() != nil {
			return nil, it.Err()
		}
		if n == 0 {
			if offset >= sp.HighWatermark {
				return out, nil
			}
			return nil, fmt.Errorf("fetch %s/%d at %d: no progress below the high watermark %d", name, p, offset, sp.HighWatermark)
		}
	}
}

// logBatches reads every batch of log from offset on.
func logBatches(log fetcher.Log, from int64) ([]records.Batch, error) {
	var out []records.Batch
	offset := max(from, log.LogStartOffset())
	for offset < log.LogEndOffset() {
		buf, err := log.Read(offset, 1<<20)
		if err != nil {
			return nil, err
		}
		it := records.NewIterator(buf)
		n := 0
		for it.Next() {
			b := it.Batch()
			if b.NextOffset() <= offset {
				continue
			}
			out = append(out, append(records.Batch(nil), b...))
			offset = b.NextOffset()
			n++
		}
		if it.Err() != nil {
			return nil, it.Err()
		}
		if n == 0 {
			break
		}
	}
	return out, nil
}

func equalBatches(a, b []records.Batch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

type batchStats struct {
	codecs  string
	control int
}

func summarize(bs []records.Batch) batchStats {
	seen := map[string]bool{}
	var st batchStats
	for _, b := range bs {
		if b.Attributes().IsControl() {
			st.control++
			continue
		}
		seen[b.Attributes().Compression().String()] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	st.codecs = strings.Join(names, "+")
	return st
}

// waitCaughtUp prints a progress line whenever the lag changes, until the
// final source high watermarks have arrived on hwc and every partition is
// MIRRORING with its destination log end at its high watermark. It returns
// the high watermarks.
func waitCaughtUp(ctx context.Context, out io.Writer, m *mirror.Mirror, hwc <-chan []int64) ([]int64, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var hw []int64
	last := int64(-2)
	for {
		descs, err := m.DescribeClusterMirrors(ctx, []string{mirrorName}, mirror.DescribeOptions{IncludeStates: true, IncludeLags: true})
		if err != nil {
			return nil, err
		}
		var lag, copied int64
		known := hw != nil
		done, mirroring := hw != nil, 0
		for _, d := range descs {
			for _, t := range d.Topics {
				for _, p := range t.Partitions {
					switch p.State {
					case statemachine.Mirroring:
						mirroring++
					case statemachine.Failed:
						return nil, fmt.Errorf("partition %s/%d FAILED: %s", t.Topic, p.Partition, p.ErrorMessage)
					}
					dst := max(p.DestinationOffset, 0)
					copied += dst
					switch {
					case hw != nil && int(p.Partition) < len(hw):
						lag += max(hw[p.Partition]-dst, 0)
						if dst != hw[p.Partition] {
							done = false
						}
					case p.Lag() >= 0:
						known = true
						lag += p.Lag()
					}
				}
			}
		}
		if !known {
			lag = -1
		}
		if lag != last {
			lagText := "unknown"
			if known {
				lagText = fmt.Sprint(lag)
			}
			fmt.Fprintf(out, "progress: %d/%d partitions MIRRORING, %d offsets copied, lag %s\n", mirroring, partitions, copied, lagText)
			last = lag
		}
		if done && mirroring == partitions {
			fmt.Fprintf(out, "caught up: lag 0, source high watermarks %v\n", hw)
			return hw, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the mirror to catch up: %w", ctx.Err())
		case hw = <-hwc:
			hwc = nil
		case <-tick.C:
		}
	}
}

// waitWritable waits until partition p is no longer read-only. STOPPED is
// durable before the reconciler clears the read-only flag (its entry action),
// so right after the stop the flag may still be set for a moment.
func waitWritable(ctx context.Context, dest *mirror.LocalDestination, p int32) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for dest.ReadOnly(topic, p) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("partition %d is still read-only after the stop: %w", p, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// printDescribe prints the mirror's partitions as a table.
func printDescribe(ctx context.Context, out io.Writer, m *mirror.Mirror) error {
	descs, err := m.DescribeClusterMirrors(ctx, []string{mirrorName}, mirror.DescribeOptions{IncludeStates: true, IncludeLags: true})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tSTATE\tSOURCE-OFFSET\tDESTINATION-OFFSET\tLAG\tLAST-MIRROR-EPOCH")
	for _, d := range descs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\n", d.Name, t.Topic, p.Partition, p.State,
					num(p.SourceOffset), num(p.DestinationOffset), num(p.Lag()), p.LastMirrorEpoch)
			}
		}
	}
	return tw.Flush()
}

func num(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

func topicErrors(res []mirror.TopicResult) error {
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}
