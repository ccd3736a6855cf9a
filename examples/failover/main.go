package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

const (
	topic      = "events"
	partitions = 2
	aToB       = "a-to-b"
	bToA       = "b-to-a"
)

// topicID is the id of the topic on both sites (a mirror keeps its source's id).
var topicID = records.UUID{0x6b, 0x6d, 0x69, 0x72, 0x72, 0x6f, 0x72, 0x2d, 0x66, 0x61, 0x69, 0x6c, 0x6f, 0x76, 0x65, 0x72}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "failover: %v\n", err)
		os.Exit(1)
	}
}

// site is one cluster: a destination on disk and the Mirror over it.
type site struct {
	name      string // "A" or "B"
	clusterID string
	bootstrap string // the address other sites use in mirror configs
	dir       string
	dest      *tracingDestination
	m         *mirror.Mirror
}

// world connects the sites: the source and peer factories look the other site
// up by the bootstrap address in the mirror's config.
type world struct {
	mu    sync.Mutex
	sites map[string]*site                // by bootstrap
	links map[string]*fetcher.LocalSource // by "<site>/<mirror>": what a site fetches from
}

func (w *world) lookup(cfg mirror.MirrorConfig) (*site, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range cfg.BootstrapServers {
		if s, ok := w.sites[b]; ok && s.m != nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no running site at %v", cfg.BootstrapServers)
}

// sourceFactory serves the other site's partition logs with a LocalSource.
func (w *world) sourceFactory(self string) mirror.SourceFactory {
	return func(name string, cfg mirror.MirrorConfig) (fetcher.Source, mirror.SourceAdmin, error) {
		other, err := w.lookup(cfg)
		if err != nil {
			return nil, nil, err
		}
		src := fetcher.NewLocalSource(fetcher.ReadUncommitted)
		for _, t := range other.dest.Topics() {
			for p := int32(0); p < t.Partitions; p++ {
				log, err := other.dest.Log(t.Name, p)
				if err != nil {
					return nil, nil, err
				}
				src.Add(t.Name, t.TopicID, p, log)
			}
		}
		w.mu.Lock()
		w.links[self+"/"+name] = src
		w.mu.Unlock()
		return src, metasync.NewLocalSourceAdmin(other.dest, nil), nil
	}
}

// peerFactory makes the other site's Mirror the Peer of the LME lookup.
func (w *world) peerFactory() mirror.PeerFactory {
	return func(name string, cfg mirror.MirrorConfig) (mirror.Peer, error) {
		other, err := w.lookup(cfg)
		if err != nil {
			return nil, err
		}
		return other.m, nil
	}
}

func (w *world) open(s *site) error {
	d, err := mirror.OpenFileDestination(s.dir, s.clusterID, fetcher.FileLogOptions{})
	if err != nil {
		return err
	}
	s.dest = &tracingDestination{LocalDestination: d, logs: map[mirror.TopicPartition]*tracingLog{}}
	m, err := mirror.New(mirror.Config{Destination: s.dest, SyncInterval: -1, FetchIdleWait: 10 * time.Millisecond},
		mirror.WithSourceFactory(w.sourceFactory(s.name)), mirror.WithPeerFactory(w.peerFactory()))
	if err != nil {
		_ = d.Close()
		return err
	}
	w.mu.Lock()
	s.m = m
	w.sites[s.bootstrap] = s
	w.mu.Unlock()
	return nil
}

// crash stops the site: its Mirror and its logs are closed; the files stay.
func (w *world) crash(s *site) error {
	w.mu.Lock()
	m := s.m
	s.m = nil
	w.mu.Unlock()
	return errors.Join(m.Close(), s.dest.Close())
}

func run(ctx context.Context, out io.Writer) (err error) {
	root, err := os.MkdirTemp("", "kmirror-failover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	w := &world{sites: map[string]*site{}, links: map[string]*fetcher.LocalSource{}}
	a := &site{name: "A", clusterID: "site-a", bootstrap: "site-a.local:9092", dir: filepath.Join(root, "site-a")}
	b := &site{name: "B", clusterID: "site-b", bootstrap: "site-b.local:9092", dir: filepath.Join(root, "site-b")}
	for _, s := range []*site{a, b} {
		if err := w.open(s); err != nil {
			return err
		}
	}
	defer func() {
		for _, s := range []*site{a, b} {
			if s.m != nil {
				err = errors.Join(err, w.crash(s))
			}
		}
	}()
	wr := &writer{}

	// 1. A's topic is an ordinary local topic; A leads it at epoch 0.
	if err := a.dest.CreateTopic(ctx, mirror.TopicSpec{Name: topic, TopicID: topicID, Partitions: partitions}); err != nil {
		return err
	}
	if err := bumpAll(a, -1); err != nil {
		return err
	}
	fmt.Fprintf(out, "site A: topic %q with %d partitions, leader epoch 0\n", topic, partitions)
	if err := wr.write(a, 6); err != nil {
		return err
	}
	if err := b.m.CreateClusterMirror(ctx, aToB, map[string]string{mirror.KeyBootstrapServers: a.bootstrap}); err != nil {
		return err
	}
	if err := startTopic(ctx, b, aToB, mirror.StartOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(out, "site B: mirror %q started (source A)\n", aToB)
	if err := wr.write(a, 4); err != nil {
		return err
	}
	if err := caughtUp(ctx, b, a); err != nil {
		return err
	}
	fmt.Fprintf(out, "site B: caught up with A at offsets %v\n", leos(a))

	// A leader change on A (epoch 1) while B keeps mirroring.
	if err := bumpAll(a, 0); err != nil {
		return err
	}
	if err := wr.write(a, 5); err != nil {
		return err
	}
	if err := caughtUp(ctx, b, a); err != nil {
		return err
	}
	fmt.Fprintf(out, "site A: leader epoch 1, more writes; site B caught up at offsets %v\n", leos(a))

	// 2. The link breaks; A takes writes B never sees, then crashes.
	w.mu.Lock()
	link := w.links["B/"+aToB]
	w.mu.Unlock()
	for p := int32(0); p < partitions; p++ {
		link.Remove(topic, p)
	}
	mirrored := leos(a)
	if err := wr.write(a, 3); err != nil {
		return err
	}
	if err := bumpAll(a, 1); err != nil {
		return err
	}
	if err := wr.write(a, 2); err != nil {
		return err
	}
	aBefore := leos(a)
	aEpochs := epochEntries(a)
	fmt.Fprintf(out, "link A->B down: A wrote offsets %v..%v (epochs 1 and 2) that B never received\n", mirrored, aBefore)
	if err := w.crash(a); err != nil {
		return err
	}
	fmt.Fprintln(out, "site A crashed")

	// 3. Failover to B.
	res, err := b.m.StopMirrorTopics(ctx, aToB, []string{topic}, mirror.StopOptions{Wait: true})
	if err != nil {
		return err
	}
	if err := resultErr(res); err != nil {
		return err
	}
	descB, err := describe(ctx, b, aToB)
	if err != nil {
		return err
	}
	if err := waitWritable(ctx, b); err != nil {
		return err
	}
	barrier := make([]int64, partitions)
	for p := int32(0); p < partitions; p++ {
		log, _ := b.dest.Log(topic, p)
		last, err := lastBatch(log)
		if err != nil {
			return err
		}
		if ct, err := last.ControlType(); err != nil || ct != records.ControlMirrorPIDReset {
			return fmt.Errorf("site B partition %d: last batch is not MIRROR_PID_RESET", p)
		}
		barrier[p] = last.BaseOffset()
		fmt.Fprintf(out, "failover: B partition %d STOPPED, LME %d, leader epoch %d, MIRROR_PID_RESET at offset %d\n",
			p, descB[p].LastMirrorEpoch, log.LeaderEpoch(), barrier[p])
	}
	if err := wr.write(b, 4); err != nil {
		return err
	}
	fmt.Fprintf(out, "site B: writable, took new writes; log end offsets %v\n", leos(b))

	// 4. A returns from its files and fails back from B.
	if err := w.open(a); err != nil {
		return err
	}
	if got := leos(a); !equalInts(got, aBefore) {
		return fmt.Errorf("site A reopened with log ends %v, want %v", got, aBefore)
	}
	fmt.Fprintf(out, "site A restarted from its files: log end offsets %v\n", leos(a))
	if err := a.m.CreateClusterMirror(ctx, bToA, map[string]string{mirror.KeyBootstrapServers: b.bootstrap}); err != nil {
		return err
	}
	// The failback cuts A's writes B never received: plan it first (nothing changes),
	// then allow exactly that removal.
	plan, err := a.m.StartMirrorTopics(ctx, bToA, []string{topic}, mirror.StartOptions{ValidateOnly: true})
	if err != nil {
		return err
	}
	for _, r := range plan {
		for _, p := range r.Plan {
			fmt.Fprintf(out, "failback plan: A partition %d: LME %d (mirror %q), truncate at %d then at divergence %d, removes %d records at [%d, %d) written on A\n",
				p.Partition, p.LastMirrorEpoch, p.LMEMirror, p.TruncationOffset, p.DivergenceOffset, p.LocalWrites.Records, p.LocalWrites.From, p.LocalWrites.To)
		}
	}
	if err := startTopic(ctx, a, bToA, mirror.StartOptions{AllowTruncation: true}); err != nil {
		return err
	}
	fmt.Fprintf(out, "failback: site A mirror %q started (source B)\n", bToA)
	if err := caughtUp(ctx, a, b); err != nil {
		return err
	}
	identical := true
	for p := int32(0); p < partitions; p++ {
		lme := descB[p].LastMirrorEpoch
		prepare := epochEnd(aEpochs[p], lme, aBefore[p])
		truncs := a.dest.truncations(topic, p)
		fmt.Fprintf(out, "partition %d: LME %d; A truncated at %s (expected: after LME %d at %d, then at divergence %d)\n",
			p, lme, joinInts(truncs), lme, prepare, barrier[p])
		if len(truncs) < 2 || truncs[0] != prepare || truncs[len(truncs)-1] != barrier[p] {
			return fmt.Errorf("partition %d: truncations %v, want %d then %d", p, truncs, prepare, barrier[p])
		}
		same, n, err := sameLogs(a, b, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "partition %d: A and B hold %d batches, bytes %s\n", p, n, map[bool]string{true: "identical", false: "DIFFER"}[same])
		identical = identical && same
	}
	if !identical {
		return errors.New("sites A and B differ after failback")
	}
	fmt.Fprintln(out, "verdict: A and B are IDENTICAL")

	// Complete the failback: stop "b-to-a"; A is writable again.
	res, err = a.m.StopMirrorTopics(ctx, bToA, []string{topic}, mirror.StopOptions{Wait: true})
	if err != nil {
		return err
	}
	if err := resultErr(res); err != nil {
		return err
	}
	if err := waitWritable(ctx, a); err != nil {
		return err
	}
	fmt.Fprintf(out, "failback complete: %q STOPPED on A, A writable at log end offsets %v\n", bToA, leos(a))
	return nil
}

func startTopic(ctx context.Context, s *site, name string, o mirror.StartOptions) error {
	res, err := s.m.StartMirrorTopics(ctx, name, []string{topic}, o)
	if err != nil {
		return err
	}
	if err := resultErr(res); err != nil {
		return err
	}
	return s.m.WaitForStates(ctx, name, []string{topic}, statemachine.Mirroring)
}

func resultErr(res []mirror.TopicResult) error {
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}

// bumpAll raises the leader epoch of every partition of s above min.
func bumpAll(s *site, min int32) error {
	for p := int32(0); p < partitions; p++ {
		log, err := s.dest.Log(topic, p)
		if err != nil {
			return err
		}
		if _, err := log.BumpLeaderEpoch(min); err != nil {
			return err
		}
	}
	return nil
}

// writer appends batches as the partition leader, cycling through the codecs,
// with deterministic timestamps.
type writer struct{ n int }

var codecs = []records.Compression{records.CompressionNone, records.CompressionGzip,
	records.CompressionSnappy, records.CompressionLZ4, records.CompressionZstd}

func (wr *writer) write(s *site, batches int) error {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := 0; i < batches; i++ {
		for p := int32(0); p < partitions; p++ {
			wr.n++
			recs := make([]records.Record, 3)
			for j := range recs {
				recs[j] = records.Record{Key: fmt.Appendf(nil, "k%d", j), Value: fmt.Appendf(nil, "%s write %d.%d on partition %d %s", s.name, wr.n, j, p, strings.Repeat("-", 20))}
			}
			batch, err := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
				Compression: codecs[wr.n%len(codecs)], BaseTimestamp: base + int64(wr.n)}, recs)
			if err != nil {
				return err
			}
			log, err := s.dest.Log(topic, p)
			if err != nil {
				return err
			}
			if _, err := log.AppendAsLeader(batch); err != nil {
				return fmt.Errorf("site %s partition %d: %w", s.name, p, err)
			}
		}
	}
	return nil
}

func leos(s *site) []int64 {
	out := make([]int64, partitions)
	for p := int32(0); p < partitions; p++ {
		if log, err := s.dest.Log(topic, p); err == nil {
			out[p] = log.LogEndOffset()
		}
	}
	return out
}

func epochEntries(s *site) [][]epochEntry {
	out := make([][]epochEntry, partitions)
	for p := int32(0); p < partitions; p++ {
		log, err := s.dest.Log(topic, p)
		if err != nil {
			continue
		}
		for _, e := range log.Epochs().Entries() {
			out[p] = append(out[p], epochEntry{e.Epoch, e.StartOffset})
		}
	}
	return out
}

type epochEntry struct {
	epoch int32
	start int64
}

// epochEnd is where epoch e ends in a log with these epochs: the start of the
// first later epoch, or the log end.
func epochEnd(entries []epochEntry, e int32, logEnd int64) int64 {
	for _, en := range entries {
		if en.epoch > e {
			return en.start
		}
	}
	return logEnd
}

// waitWritable waits until no partition of the topic on s is read-only. STOPPED
// is durable before the reconciler clears the read-only flag (its entry
// action), so a caller that saw STOPPED may still see the flag set briefly.
func waitWritable(ctx context.Context, s *site) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ro := -1
		for p := int32(0); p < partitions; p++ {
			if s.dest.ReadOnly(topic, p) {
				ro = int(p)
				break
			}
		}
		if ro < 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("site %s partition %d still read-only after the stop: %w", s.name, ro, ctx.Err())
		case <-tick.C:
		}
	}
}

// caughtUp waits until every partition of dst has the log end of src.
func caughtUp(ctx context.Context, dst, src *site) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if equalInts(leos(dst), leos(src)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("site %s catching up with %s (at %v, want %v): %w", dst.name, src.name, leos(dst), leos(src), ctx.Err())
		case <-tick.C:
		}
	}
}

func describe(ctx context.Context, s *site, name string) ([]mirror.PartitionDescription, error) {
	ds, err := s.m.DescribeClusterMirrors(ctx, []string{name}, mirror.DescribeOptions{IncludeStates: true})
	if err != nil {
		return nil, err
	}
	out := make([]mirror.PartitionDescription, partitions)
	for _, d := range ds {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				if t.Topic == topic && p.Partition >= 0 && p.Partition < partitions {
					out[p.Partition] = p
				}
			}
		}
	}
	return out, nil
}

func allBatches(log fetcher.Log) ([]records.Batch, error) {
	var out []records.Batch
	offset := log.LogStartOffset()
	for offset < log.LogEndOffset() {
		buf, err := log.Read(offset, 1<<20)
		if err != nil {
			return nil, err
		}
		it := records.NewIterator(buf)
		n := 0
		for it.Next() {
			bt := it.Batch()
			if bt.NextOffset() <= offset {
				continue
			}
			out = append(out, append(records.Batch(nil), bt...))
			offset = bt.NextOffset()
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

func lastBatch(log fetcher.Log) (records.Batch, error) {
	bs, err := allBatches(log)
	if err != nil {
		return nil, err
	}
	if len(bs) == 0 {
		return nil, errors.New("empty log")
	}
	return bs[len(bs)-1], nil
}

func sameLogs(a, b *site, p int32) (bool, int, error) {
	la, err := a.dest.Log(topic, p)
	if err != nil {
		return false, 0, err
	}
	lb, err := b.dest.Log(topic, p)
	if err != nil {
		return false, 0, err
	}
	ba, err := allBatches(la)
	if err != nil {
		return false, 0, err
	}
	bb, err := allBatches(lb)
	if err != nil {
		return false, 0, err
	}
	if len(ba) != len(bb) {
		return false, len(ba), nil
	}
	for i := range ba {
		if !bytes.Equal(ba[i], bb[i]) {
			return false, len(ba), nil
		}
	}
	return true, len(ba), nil
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func joinInts(v []int64) string {
	if len(v) == 0 {
		return "(none)"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " then ")
}

// tracingDestination records the truncations kmirror makes on its logs, so the
// example can show where PREPARING and the divergence handling cut.
type tracingDestination struct {
	*mirror.LocalDestination
	mu   sync.Mutex
	logs map[mirror.TopicPartition]*tracingLog
}

// Log wraps the destination's log.
func (d *tracingDestination) Log(t string, p int32) (fetcher.Log, error) {
	log, err := d.LocalDestination.Log(t, p)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	tp := mirror.TopicPartition{Topic: t, Partition: p}
	if tl, ok := d.logs[tp]; ok && tl.Log == log {
		return tl, nil
	}
	tl := &tracingLog{Log: log}
	d.logs[tp] = tl
	return tl, nil
}

func (d *tracingDestination) truncations(t string, p int32) []int64 {
	d.mu.Lock()
	tl := d.logs[mirror.TopicPartition{Topic: t, Partition: p}]
	d.mu.Unlock()
	if tl == nil {
		return nil
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]int64(nil), tl.cuts...)
}

// tracingLog records every truncation that removed data.
type tracingLog struct {
	fetcher.Log
	mu   sync.Mutex
	cuts []int64
}

// Truncate records offset when it is below the log end.
func (l *tracingLog) Truncate(offset int64) error {
	before := l.Log.LogEndOffset()
	err := l.Log.Truncate(offset)
	if err == nil && offset < before {
		l.mu.Lock()
		l.cuts = append(l.cuts, offset)
		l.mu.Unlock()
	}
	return err
}

// TruncateFullyAndStartAt records offset.
func (l *tracingLog) TruncateFullyAndStartAt(offset int64) error {
	err := l.Log.TruncateFullyAndStartAt(offset)
	if err == nil {
		l.mu.Lock()
		l.cuts = append(l.cuts, offset)
		l.mu.Unlock()
	}
	return err
}
