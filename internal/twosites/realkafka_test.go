package twosites

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkatest"
)

// The operator-safety cases against a real Kafka 4.4 source: one private single-node
// broker with tiered storage (LocalTieredStorage) serves the three subtests, in this
// order, because the last one kills and freezes it. Each subtest has its own kmirrord
// site, driven only over TCP with mirrorctl and Kafka clients.
// answerHandling bounds how long after an answer was read the site's fetch loop
// handles it (and times it) on a loaded machine.
const answerHandling = 250 * time.Millisecond

func TestRealKafkaSourceSafety(t *testing.T) {
	k := kafkatest.StartPrivate(t, kafkatest.PrivateOptions{TieredStorage: true, NoAuthorizer: true})
	t.Run("InternalTopicsNeverMirrored", func(t *testing.T) { realInternalTopics(t, k) })
	t.Run("TieredTopic", func(t *testing.T) { realTieredTopic(t, k) })
	t.Run("UnreachableSource", func(t *testing.T) { realUnreachableSource(t, k) })
}

// fullPartitionDesc is one partition of mirrorctl --describe --output json with the
// source health fields.
type fullPartitionDesc struct {
	partitionDesc
	RetryAttempt           int16  `json:"retryAttempt"`
	SourceErrorCode        int16  `json:"sourceErrorCode"`
	SourceError            string `json:"sourceError"`
	SourceUnreachableSince string `json:"sourceUnreachableSince"`
}

// describeAll returns every partition of mirror name, by "topic/partition".
func (s *site) describeAll(name string) map[string]fullPartitionDesc {
	s.t.Helper()
	out := s.ctl("--describe", "--mirror", name, "--output", "json")
	var descs []struct {
		Mirror     string              `json:"mirror"`
		Partitions []fullPartitionDesc `json:"partitions"`
	}
	require.NoError(s.t, json.Unmarshal([]byte(out), &descs), out)
	ps := map[string]fullPartitionDesc{}
	for _, d := range descs {
		if d.Mirror != name {
			continue
		}
		for _, p := range d.Partitions {
			ps[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p
		}
	}
	return ps
}

// waitAll polls describeAll until ok holds for exactly the partitions in want.
func (s *site) waitAll(timeout time.Duration, name string, want []string, what string, ok func(fullPartitionDesc) bool) map[string]fullPartitionDesc {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ps := s.describeAll(name)
		good := len(ps) == len(want)
		for _, key := range want {
			p, found := ps[key]
			good = good && found && ok(p)
		}
		if good {
			return ps
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("site %s mirror %s: not %s within %v: %+v", s.name, name, what, timeout, ps)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mirrorConfigFile writes a mirror config with bootstrap and extra lines.
func mirrorConfigFile(t testing.TB, bootstrap string, extra ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "mirror.properties")
	body := "bootstrap.servers=" + bootstrap + "\nfetch.wait.max.ms=100\n" + strings.Join(extra, "\n") + "\n"
	require.NoError(t, os.WriteFile(file, []byte(body), 0o600))
	return file
}

// createKafkaTopic creates a topic on the real broker with configs and waits for its leaders.
func createKafkaTopic(t testing.TB, cl *kgo.Client, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	kafkatest.CreateTopic(t, cl, topic, partitions, 1, configs)
}

// siteTopics returns the topic names the site's Metadata lists (all topics).
func siteTopics(t testing.TB, addr string) map[string]bool {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	resp := request[*kmsg.MetadataResponse](t, kgoClient(t, addr), req)
	out := map[string]bool{}
	for _, tp := range resp.Topics {
		if tp.Topic != nil && tp.ErrorCode == 0 {
			out[*tp.Topic] = true
		}
	}
	return out
}

// sourceEnds returns the high watermark of each partition of topics on addr, by "topic/partition".
func sourceEnds(t testing.TB, addr string, topics map[string]int32) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for topic, n := range topics {
		for p := int32(0); p < n; p++ {
			out[fmt.Sprintf("%s/%d", topic, p)] = logEnd(t, rawLog(t, addr, topic, p))
		}
	}
	return out
}

func keysOf(ends map[string]int64) []string {
	var ks []string
	for k := range ends {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// requireSameLogs requires the site to serve every partition of topics byte for byte as the
// source does (same batches, offsets, epochs, CRCs).
func requireSameLogs(t testing.TB, src, dst string, topics map[string]int32) {
	t.Helper()
	for topic, n := range topics {
		for p := int32(0); p < n; p++ {
			a, b := rawLog(t, src, topic, p), rawLog(t, dst, topic, p)
			require.NotEmpty(t, a, "%s-%d on the source", topic, p)
			require.True(t, string(a) == string(b), "%s-%d: the source serves %d bytes to offset %d, the site %d bytes to offset %d",
				topic, p, len(a), logEnd(t, a), len(b), logEnd(t, b))
		}
	}
}

// realInternalTopics: a mirror with topics.include=.* and a user topics.exclude of one
// ordinary topic, from a real Kafka whose __consumer_offsets (a group commit),
// __transaction_state (a committed transaction) and __remote_log_metadata (tiered storage)
// are populated and with a user topic named __app_internal: the ordinary topics are
// mirrored; the excluded one and every __ topic are not, on the site's Metadata and in
// describe.
func realInternalTopics(t *testing.T, k *kafkatest.Private) {
	src := k.Addr()
	admin := kgoClient(t, src)
	ordinary := map[string]int32{"int-orders": 2, "int-payments": 1}
	for topic, n := range ordinary {
		createKafkaTopic(t, admin, topic, n, nil)
		produceKgo(t, src, topic, n, 5, "plain")
	}
	createKafkaTopic(t, admin, "int-excluded", 1, nil)
	produceKgo(t, src, "int-excluded", 1, 5, "excluded")
	createKafkaTopic(t, admin, "__app_internal", 1, nil)
	produceKgo(t, src, "__app_internal", 1, 5, "app")

	// A group commit populates __consumer_offsets, a committed transaction
	// __transaction_state (and adds transactional batches to int-payments).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	consumer := kgoClient(t, src, kgo.ConsumerGroup("int-group"), kgo.ConsumeTopics("int-orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 10 {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consume int-orders in a group")
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch int-orders-%d: %v", p, err) })
		got += fs.NumRecords()
	}
	require.NoError(t, consumer.CommitUncommittedOffsets(ctx))
	txn := kgoClient(t, src, kgo.TransactionalID("int-txn"), kgo.DefaultProduceTopic("int-payments"))
	require.NoError(t, txn.BeginTransaction())
	require.NoError(t, txn.ProduceSync(ctx, &kgo.Record{Value: []byte("in-txn")}).FirstErr())
	require.NoError(t, txn.EndTransaction(ctx, kgo.TryCommit))

	srcTopics := map[string]bool{}
	md := request[*kmsg.MetadataResponse](t, admin, kmsg.NewPtrMetadataRequest())
	for _, tp := range md.Topics {
		srcTopics[*tp.Topic] = true
	}
	for _, internal := range []string{"__consumer_offsets", "__transaction_state", "__remote_log_metadata", "__app_internal"} {
		require.True(t, srcTopics[internal], "the source has %s", internal)
	}

	d := newSite(t, "INT", "-sync-interval", "200ms")
	d.ctl("--create", "--mirror", "int", "--mirror-config",
		mirrorConfigFile(t, src, "topics.include=.*", "topics.exclude=int-excluded"))
	ends := sourceEnds(t, src, ordinary)
	d.waitAll(60*time.Second, "int", keysOf(ends), "the ordinary topics mirrored and caught up", func(p fullPartitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == ends[fmt.Sprintf("%s/%d", p.Topic, p.Partition)]
	})
	requireSameLogs(t, src, d.addr, ordinary)

	// Discovery found every source topic in the cycle that found the ordinary ones; give it
	// two more cycles, then nothing else may have appeared.
	time.Sleep(500 * time.Millisecond)
	ps := d.describeAll("int")
	require.Len(t, ps, len(ends), "describe lists only the ordinary topics' partitions: %v", ps)
	onSite := siteTopics(t, d.addr)
	for topic := range ordinary {
		require.True(t, onSite[topic], "%s is on the site", topic)
	}
	for topic := range srcTopics {
		if strings.HasPrefix(topic, "__") || topic == "int-excluded" {
			require.False(t, onSite[topic], "%s must not be on the site", topic)
			for key := range ps {
				require.False(t, strings.HasPrefix(key, topic+"/"), "%s must not be in describe", topic)
			}
		}
	}
}

// realTieredTopic: a source topic with remote.storage.enable=true whose first segments are
// uploaded to LocalTieredStorage and deleted from the broker's disk is mirrored with the
// rest of its configs but without tiered storage, and every record — those only in remote
// storage too — is on the site byte for byte at the same offsets.
func realTieredTopic(t *testing.T, k *kafkatest.Private) {
	src := k.Addr()
	admin := kgoClient(t, src)
	const topic = "tiered-events"
	createKafkaTopic(t, admin, topic, 1, map[string]string{
		"remote.storage.enable": "true",
		"segment.bytes":         "1048576", // Kafka 4's minimum
		"local.retention.ms":    "1000",
		"retention.ms":          "86400000",
	})
	// About 3.5 MiB of incompressible values, uncompressed, in batches of at most 64 KiB:
	// three closed segments for the broker to upload and the active one it keeps.
	cl := kgoClient(t, src, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(64<<10),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rnd := mrand.New(mrand.NewPCG(1, 2))
	var rs []*kgo.Record
	for i := 0; i < 900; i++ {
		v := make([]byte, 4000)
		for j := range v {
			v[j] = byte(rnd.Uint32())
		}
		rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: v})
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	produced := time.Now()

	// Wait until the broker's first local segment no longer starts at 0 (earlier ones were
	// uploaded, then deleted locally) while the partition still starts at 0.
	dir := filepath.Join(k.DataDir(), topic+"-0")
	var localStart int64
	deadline := time.Now().Add(60 * time.Second)
	for {
		segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
		require.NoError(t, err)
		if len(segs) > 0 {
			sort.Strings(segs)
			localStart, err = strconv.ParseInt(strings.TrimSuffix(filepath.Base(segs[0]), ".log"), 10, 64)
			require.NoError(t, err)
		}
		if localStart > 0 {
			break
		}
		require.False(t, time.Now().After(deadline), "no segment of %s left the broker's disk within 60s: %v", topic, segs)
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, int64(0), listOffset(t, src, topic, -2), "the log still starts at 0 (in remote storage)")
	var remote []string
	require.NoError(t, filepath.WalkDir(k.RemoteStorageDir(), func(path string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(path, ".log") {
			remote = append(remote, path)
		}
		return err
	}))
	require.NotEmpty(t, remote, "segments in LocalTieredStorage")
	require.Greater(t, len(remote), 1, "several segments tiered: %v", remote)
	t.Logf("%s: offsets [0, %d) of 900 only in remote storage (%d remote segments), %v after the produce",
		topic, localStart, len(remote), time.Since(produced).Round(100*time.Millisecond))

	d := newSite(t, "TIER", "-sync-interval", "200ms")
	d.ctl("--create", "--mirror", "tier", "--mirror-config", mirrorConfigFile(t, src))
	d.ctl("--start", "--mirror", "tier", "--topics", topic)
	end := logEnd(t, rawLog(t, src, topic, 0))
	require.EqualValues(t, 900, end)
	started := time.Now()
	d.waitAll(90*time.Second, "tier", []string{topic + "/0"}, "caught up", func(p fullPartitionDesc) bool {
		return p.State == "MIRRORING" && p.DestinationOffset == end
	})
	t.Logf("%s mirrored to offset %d in %v", topic, end, time.Since(started).Round(100*time.Millisecond))
	requireSameLogs(t, src, d.addr, map[string]int32{topic: 1})
	recs := dataRecords(t, rawLog(t, d.addr, topic, 0))
	require.Len(t, recs, 900)
	for i, r := range recs {
		require.Equal(t, int64(i), r.Offset)
		require.Equal(t, strconv.Itoa(i), r.Key)
		require.Equal(t, string(rs[i].Value), r.Value, "record %d", i)
	}

	// The destination topic has the source's other configs, never its storage ones.
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = []kmsg.DescribeConfigsRequestResource{rr}
	var configs map[string]string
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp := request[*kmsg.DescribeConfigsResponse](t, kgoClient(t, d.addr), req)
		require.Len(t, resp.Resources, 1)
		require.NoError(t, kerr.ErrorForCode(resp.Resources[0].ErrorCode))
		configs = map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			configs[c.Name] = ""
			if c.Value != nil {
				configs[c.Name] = *c.Value
			}
		}
		if configs["retention.ms"] == "86400000" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, "86400000", configs["retention.ms"], "the source's retention is synced: %v", configs)
	for name := range configs {
		require.False(t, name == "remote.storage.enable" || strings.HasPrefix(name, "local.retention."),
			"storage config %s=%s synced to the site: %v", name, configs[name], configs)
	}
}

// realUnreachableSource: the site mirrors two topics of a real Kafka that is then killed
// (SIGKILL): every partition is shown unreachable, with the time since its last answer,
// through FAILED retries (socket.timeout.ms), with a lag of -1, and mirrorctl --describe
// --failed lists them; once the broker is back every partition mirrors again with nothing
// lost or duplicated. Then the same with the broker frozen (SIGSTOP) and thawed.
func realUnreachableSource(t *testing.T, k *kafkatest.Private) {
	src := k.Addr()
	admin := kgoClient(t, src)
	topics := map[string]int32{"unr-orders": 2, "unr-payments": 2}
	for topic, n := range topics {
		createKafkaTopic(t, admin, topic, n, nil)
		produceKgo(t, src, topic, n, 20, "before")
	}
	const socketTimeout = 2 * time.Second
	d := newSite(t, "UNR", "-source-unreachable-after", "1s",
		"-mirror.failed.retry.initial.backoff.ms", "200", "-mirror.failed.retry.max.backoff.ms", "400")
	d.ctl("--create", "--mirror", "unr", "--mirror-config",
		mirrorConfigFile(t, src, fmt.Sprintf("socket.timeout.ms=%d", socketTimeout.Milliseconds())))
	d.ctl("--start", "--mirror", "unr", "--topics", "unr-orders,unr-payments")
	caughtUpAll := func(what string) {
		t.Helper()
		ends := sourceEnds(t, src, topics)
		d.waitAll(60*time.Second, "unr", keysOf(ends), what, func(p fullPartitionDesc) bool {
			return p.State == "MIRRORING" && p.SourceUnreachableSince == "" && p.SourceErrorCode == 0 &&
				p.DestinationOffset == ends[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] && p.Lag == 0
		})
		requireSameLogs(t, src, d.addr, topics)
	}
	caughtUpAll("caught up")
	keys := keysOf(sourceEnds(t, src, topics))

	// shownUnreachable waits until every partition is shown unreachable since no later than
	// lastAnswer and has gone through at least one more FAILED retry than in before, and
	// checks that --describe --failed lists them all.
	failedLine := regexp.MustCompile(`(?m)^unr\s+(unr-\S+)\s+(\d+)\s+\d+\s+[A-Z]+\s+source unreachable since \S+: [A-Z_]+: .+$`)
	shownUnreachable := func(what string, lastAnswer time.Time, before map[string]fullPartitionDesc) map[string]fullPartitionDesc {
		t.Helper()
		seen := time.Now()
		ps := d.waitAll(30*time.Second, "unr", keys, what+": unreachable through a FAILED retry", func(p fullPartitionDesc) bool {
			if p.SourceUnreachableSince == "" {
				return false
			}
			since, err := time.Parse(time.RFC3339Nano, p.SourceUnreachableSince)
			require.NoError(t, err)
			// The site times an answer when its fetch loop handles it, which can be a few
			// milliseconds after it was read (an answer read just before a SIGKILL).
			require.False(t, since.After(lastAnswer.Add(answerHandling)), "%s/%d: unreachable since %v, after the last answer %v", p.Topic, p.Partition, since, lastAnswer)
			require.Equal(t, int64(-1), p.Lag, "%s/%d: no stale lag while unreachable", p.Topic, p.Partition)
			require.NotZero(t, p.SourceErrorCode)
			return p.RetryAttempt > before[fmt.Sprintf("%s/%d", p.Topic, p.Partition)].RetryAttempt
		})
		t.Logf("%s: every partition unreachable through a FAILED retry %v after the fault (socket.timeout.ms %v)",
			what, time.Since(seen).Round(100*time.Millisecond), socketTimeout)
		out := d.ctl("--describe", "--mirror", "unr", "--failed")
		listed := map[string]bool{}
		for _, m := range failedLine.FindAllStringSubmatch(out, -1) {
			listed[m[1]+"/"+m[2]] = true
		}
		for _, key := range keys {
			require.True(t, listed[key], "%s: --describe --failed lists %s:\n%s", what, key, out)
		}
		return ps
	}

	// Killed: connections are refused.
	before := d.describeAll("unr")
	k.Kill()
	shownUnreachable("killed", time.Now(), before)
	k.Start()
	for topic, n := range topics {
		produceKgo(t, src, topic, n, 10, "after-restart")
	}
	caughtUpAll("mirroring again after the restart")

	// Frozen: connections stay open, nothing answers.
	before = d.describeAll("unr")
	k.Freeze()
	frozenAt := time.Now()
	ps := shownUnreachable("frozen", frozenAt, before)
	for key, p := range ps {
		since, err := time.Parse(time.RFC3339Nano, p.SourceUnreachableSince)
		require.NoError(t, err)
		// A fetch long-polls for fetch.wait.max.ms (100 ms), so its last answer came at most
		// that long before the freeze (or a moment after, if it was under way).
		require.False(t, since.Before(frozenAt.Add(-5*time.Second)), "%s: unreachable since %v, long before the freeze at %v", key, since, frozenAt)
	}
	k.Thaw()
	for topic, n := range topics {
		produceKgo(t, src, topic, n, 10, "after-thaw")
	}
	caughtUpAll("mirroring again after the thaw")
	for topic, n := range topics {
		want := map[int32]int{}
		for p := int32(0); p < n; p++ {
			want[p] = 40
		}
		got := readKgo(t, d.addr, topic, want)
		for p := int32(0); p < n; p++ {
			require.Len(t, got[p], 40, "%s-%d: every record once", topic, p)
			for i, r := range got[p] {
				require.Equal(t, int64(i), r.Offset, "%s-%d", topic, p)
			}
		}
	}
}
