package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// kmirrorLatency mirrors the topic with fetcher.KafkaSource + fetcher.Fetcher
// into one FileLog per partition with FsyncEveryAppend, so a batch is durable
// (fsynced) when Append returns; OnProgress, which follows the appends of a
// response, timestamps the new log end, and a decoder goroutine reads the new
// batches back and reports their records.
type kmirrorLatency struct {
	fetcher.NopEvents
	rec   *recorder
	src   *fetcher.KafkaSource
	f     *fetcher.Fetcher
	logs  []*fetcher.FileLog
	notes chan progressNote
	done  chan struct{}

	mu  sync.Mutex
	err error
}

// progressNote: partition p's log end reached end at time at.
type progressNote struct {
	p   int32
	end int64
	at  time.Time
}

func startKmirrorLatency(_ context.Context, cfg *LatencyConfig, topic string, rec *recorder) (contender, error) {
	dir := filepath.Join(cfg.WorkDir, "kmirror-latency")
	src, err := fetcher.NewKafkaSource(fetcher.KafkaSourceConfig{SeedBrokers: cfg.SourceBrokers, MaxWait: fetchMaxWait, MaxBytes: fetchMaxBytes})
	if err != nil {
		return nil, err
	}
	k := &kmirrorLatency{rec: rec, src: src, notes: make(chan progressNote, 1<<16), done: make(chan struct{})}
	opts := fetcher.FileLogOptions{Fsync: fetcher.FsyncEveryAppend}
	if cfg.KmirrorNoFsync {
		opts.Fsync = fetcher.FsyncNever
	}
	for p := range cfg.Partitions {
		l, err := fetcher.OpenFileLog(fetcher.PartitionDir(dir, topic, p), opts)
		if err == nil {
			_, err = l.BumpLeaderEpoch(localLeaderEpoch)
		}
		if l != nil {
			k.logs = append(k.logs, l)
		}
		if err != nil {
			k.closeLogs()
			src.Close()
			return nil, err
		}
	}
	go k.decode()
	if k.f, err = fetcher.NewFetcher(src, fetcher.Config{Events: k, PartitionMaxBytes: fetchPartitionMaxBytes, Appenders: cfg.KmirrorAppenders}); err == nil {
		for p, l := range k.logs {
			if err = k.f.Add(fetcher.PartitionSpec{Topic: topic, Partition: int32(p), Log: l}); err != nil {
				break
			}
		}
	}
	if err != nil {
		_ = k.Close()
		return nil, err
	}
	return k, nil
}

// OnProgress implements fetcher.Events: the appends of the response are done
// (and fsynced); the decoder reads them. It never blocks the fetch loop: a
// full queue is a failure of the measurement.
func (k *kmirrorLatency) OnProgress(tp fetcher.TopicPartition, p fetcher.Progress) {
	select {
	case k.notes <- progressNote{p: tp.Partition, end: p.LogEndOffset, at: time.Now()}:
	default:
		k.fail(errors.New("bench: kmirror latency: progress queue full"))
	}
}

// OnFailed implements fetcher.Events.
func (k *kmirrorLatency) OnFailed(tp fetcher.TopicPartition, err error) {
	k.fail(fmt.Errorf("bench: kmirror %s failed: %w", tp, err))
}

// OnDivergence implements fetcher.Events.
func (k *kmirrorLatency) OnDivergence(tp fetcher.TopicPartition, dv epoch.Divergence, to int64) {
	k.fail(fmt.Errorf("bench: kmirror %s diverged (%+v), truncated to %d", tp, dv, to))
}

func (k *kmirrorLatency) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		k.err = err
	}
}

// Err implements contender.
func (k *kmirrorLatency) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// decode reads every partition's batches from its last read offset up to the
// noted end and reports their records at the note's time.
func (k *kmirrorLatency) decode() {
	defer close(k.done)
	next := make([]int64, len(k.logs))
	for n := range k.notes {
		for next[n.p] < n.end {
			raw, err := k.logs[n.p].Read(next[n.p], 1<<20)
			if err != nil {
				k.fail(err)
				break
			}
			it := records.NewIterator(raw)
			for it.Next() && next[n.p] < n.end {
				b := it.Batch()
				recs, err := b.Records()
				if err != nil {
					k.fail(err)
					break
				}
				for i, r := range recs {
					if off := b.BaseOffset() + int64(i); off >= next[n.p] && off < n.end {
						k.rec.observe(r.Value, n.at)
					}
				}
				next[n.p] = b.NextOffset()
			}
			if len(raw) == 0 {
				break
			}
		}
	}
}

func (k *kmirrorLatency) closeLogs() {
	for _, l := range k.logs {
		_ = l.Close()
	}
}

// Close implements contender.
func (k *kmirrorLatency) Close() error {
	if k.f != nil {
		_ = k.f.Close()
	}
	close(k.notes)
	<-k.done
	k.closeLogs()
	k.src.Close()
	return k.Err()
}

// mm2Latency runs MirrorMaker 2 on the topic and a kgo consumer on its target
// topic on B; a record counts when the consumer receives it (appended on B,
// which acknowledges before any fsync: Kafka's default).
type mm2Latency struct {
	cmd    *exec.Cmd
	exited chan error
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error
}

func startMM2Latency(ctx context.Context, cfg *LatencyConfig, topic string, rec *recorder) (contender, error) {
	mc := &Config{SourceBrokers: cfg.SourceBrokers, DestBrokers: cfg.DestBrokers, Topic: topic, MM2Tasks: cfg.MM2Tasks,
		ReplicationFactor: 1, MM2Classpath: cfg.MM2Classpath, MM2HeapOpts: cfg.MM2HeapOpts, WorkDir: cfg.WorkDir}
	cl, err := newClient(cfg.DestBrokers, kgo.ConsumeTopics(mm2SourceAlias+"."+topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MetadataMaxAge(time.Second), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	cmd, exited, err := launchMM2(mc)
	if err != nil {
		cl.Close()
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	m := &mm2Latency{cmd: cmd, exited: exited, cl: cl, cancel: cancel, done: make(chan struct{})}
	go m.consume(cctx, rec)
	return m, nil
}

func (m *mm2Latency) consume(ctx context.Context, rec *recorder) {
	defer close(m.done)
	for {
		fs := m.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		at := time.Now()
		fs.EachRecord(func(r *kgo.Record) { rec.observe(r.Value, at) })
	}
}

// Err implements contender: MirrorMaker exiting early is a failure.
func (m *mm2Latency) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		select {
		case err := <-m.exited:
			m.exited <- err
			m.err = fmt.Errorf("bench: MirrorMaker exited early (%v)", err)
		default:
		}
	}
	return m.err
}

// Close implements contender.
func (m *mm2Latency) Close() error {
	err := m.Err()
	m.cancel()
	<-m.done
	m.cl.Close()
	stopProcess(m.cmd, m.exited, 30*time.Second)
	return err
}

// launchMM2 writes MirrorMaker 2's configuration for cfg.Topic under
// cfg.WorkDir/mm2 and starts it in dedicated mode; exited receives its exit.
func launchMM2(cfg *Config) (*exec.Cmd, chan error, error) {
	dir := filepath.Join(cfg.WorkDir, "mm2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	props := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(props, []byte(mm2Properties(cfg)), 0o644); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	l4j := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(l4j, []byte(mm2Log4j), 0o644); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	args := append([]string{}, cfg.MM2HeapOpts...)
	args = append(args, "-XX:+UseG1GC", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+l4j, "-Dkmirror.bench.log="+filepath.Join(dir, "mm2.log"),
		"-cp", cfg.MM2Classpath, "org.apache.kafka.connect.mirror.MirrorMaker",
		props, "--clusters", mm2TargetAlias)
	cmd := exec.Command("java", args...)
	out, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, nil, fmt.Errorf("bench: start MirrorMaker: %w", err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		out.Close()
		exited <- err
	}()
	return cmd, exited, nil
}
