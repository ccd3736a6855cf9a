package twosites

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
)

// delayProxy forwards TCP connections to a site; while delay is set, every chunk a
// client sends waits that long first (the site's answers are not delayed). A site
// advertised at the proxy is reached through it by every client.
type delayProxy struct {
	ln     net.Listener
	target atomic.Pointer[string]
	delay  atomic.Int64 // nanoseconds
	mu     sync.Mutex
	conns  []net.Conn
}

func newDelayProxy(t *testing.T) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &delayProxy{ln: ln}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

func (p *delayProxy) addr() string { return p.ln.Addr().String() }

func (p *delayProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *delayProxy) serve(c net.Conn) {
	target := p.target.Load()
	if target == nil {
		_ = c.Close()
		return
	}
	d, err := net.Dial("tcp", *target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, d)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(c, d); _ = c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if w := time.Duration(p.delay.Load()); w > 0 {
				time.Sleep(w)
			}
			if _, err := d.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = d.Close()
}

// TestRestartInPreparingRefusesUnapprovedRemoval: B fails over, takes writes, A
// mirrors them back and stops; B starts a-to-b again without --allow-truncation (its
// plan keeps everything: A's LME covers B's writes). B is killed while that PREPARING
// waits for A (A's answers delayed through a proxy), and A's b-to-a mirror is deleted
// (its LMEs with it). Restarted, B's PREPARING finds no LME: a full truncation that
// would remove B's own writes, which no start approved. It refuses: FAILED, the typed
// cause in describe, the log untouched; a recover without --allow-truncation is
// refused with the plan, with it exactly the plan goes.
func TestRestartInPreparingRefusesUnapprovedRemoval(t *testing.T) {
	px := newDelayProxy(t)
	a := newSite(t, "A", "-advertise", px.addr())
	aAddr := a.addr
	px.target.Store(&aAddr)
	b := newSite(t, "B")
	createTopic(t, a.addr, topic, partitions)
	produceKgo(t, a.addr, topic, partitions, 20, "a")
	b.createMirrorTo("a-to-b", px.addr(), filepath.Join(t.TempDir(), "a-to-b.properties"))
	b.ctl("--start", "--mirror", "a-to-b", "--topics", topic)
	caughtUp(t, b, "a-to-b", a)
	b.ctl("--stop", "--mirror", "a-to-b", "--topics", topic, "--wait")
	produceKgo(t, b.addr, topic, partitions, 40, "b-local")
	a.createMirror("b-to-a", b)
	a.ctl("--start", "--mirror", "b-to-a", "--topics", topic, "--allow-truncation")
	caughtUp(t, a, "b-to-a", b)
	sameBytes(t, a, b)
	a.ctl("--stop", "--mirror", "b-to-a", "--topics", topic, "--wait")

	// B starts a-to-b again: the plan (A's LME) removes nothing.
	px.delay.Store(int64(2 * time.Second))
	mark := b.mark()
	out := b.ctl("--start", "--mirror", "a-to-b", "--topics", topic, "--output", "json", "--timeout", "60000")
	_, plan := onePlan(t, out)
	for p := int32(0); p < partitions; p++ {
		require.Zero(t, plan[p].Removed.Records, "partition %d: the plan keeps B's log", p)
	}
	// Each question to A waits 2 s at the proxy: PREPARING is held in its LME lookup.
	b.waitState("a-to-b", topic, int(partitions), "PREPARING")
	before := map[int32][]byte{}
	for p := int32(0); p < partitions; p++ {
		before[p] = rawLog(t, b.addr, topic, p)
	}
	b.kill9()
	require.Empty(t, b.logs(mark, func(l logLine) bool { return l.str("msg") == "mirror: LME truncation" }),
		"killed before PREPARING truncated")
	px.delay.Store(0)
	a.ctl("--delete", "--mirror", "b-to-a")
	mark = b.mark()
	b.start()

	failed := b.waitState("a-to-b", topic, int(partitions), "FAILED")
	for _, p := range failed {
		require.Contains(t, p.Error, "the start would remove records written on this site", "partition %d", p.Partition)
		require.Contains(t, p.Error, "no start approved this removal", "partition %d", p.Partition)
		require.Contains(t, p.Error, "--recover --allow-truncation", "partition %d", p.Partition)
	}
	for p := int32(0); p < partitions; p++ {
		require.Equal(t, before[p], rawLog(t, b.addr, topic, p), "partition %d: no record removed", p)
		refused := b.logs(mark, func(l logLine) bool {
			return l.str("msg") == "mirror: PREPARING refused to remove records written on this site that no start approved" && l.num("partition") == int64(p)
		})
		require.Len(t, refused, 1, "partition %d", p)
		require.Equal(t, int64(40), refused[0].num("localRecords"), "partition %d", p)
	}
	require.Empty(t, b.logs(mark, func(l logLine) bool {
		return l.str("msg") == "mirror: PREPARING removed records from the destination log"
	}))

	// A recover without the approval: refused with the plan, nothing changed.
	rec := []string{"--recover", "--mirror", "a-to-b", "--topics", topic}
	out, errOut, code := b.ctlCode(append(rec, "--output", "json")...)
	require.Equal(t, 1, code, "stdout %s stderr %s", out, errOut)
	po, rplan := onePlan(t, out)
	require.Equal(t, int16(admin.CodeMirrorTruncationRefused), po.Topics[0].ErrorCode, out)
	b.waitState("a-to-b", topic, int(partitions), "FAILED")
	for p := int32(0); p < partitions; p++ {
		require.Equal(t, before[p], rawLog(t, b.addr, topic, p), "partition %d", p)
		pl := rplan[p]
		require.Equal(t, "FAILED", pl.StateNow)
		require.True(t, pl.FullTruncation)
		require.Equal(t, [3]int64{0, logEnd(t, before[p]), int64(len(dataRecords(t, before[p])))}, [3]int64{pl.Removed.From, pl.Removed.To, pl.Removed.Records}, "partition %d", p)
		require.Equal(t, int64(40), pl.LocalWrites.Records, "partition %d", p)
	}
	// --dry-run with the flag: the same plan, no approval recorded.
	out = b.ctl(append(rec, "--dry-run", "--allow-truncation", "--output", "json")...)
	_, dplan := onePlan(t, out)
	require.Equal(t, rplan, dplan)
	b.waitState("a-to-b", topic, int(partitions), "FAILED")

	// Approved: exactly the plan goes.
	mark = b.mark()
	out = b.ctl(append(rec, "--allow-truncation", "--output", "json")...)
	_, aplan := onePlan(t, out)
	require.Equal(t, rplan, aplan)
	caughtUp(t, b, "a-to-b", a)
	sameBytes(t, a, b)
	for p := int32(0); p < partitions; p++ {
		pl := aplan[p]
		got := b.logs(mark, func(l logLine) bool {
			return l.str("msg") == "mirror: PREPARING removed records from the destination log" && l.num("partition") == int64(p)
		})
		require.Len(t, got, 1, "partition %d: one removal, logged", p)
		require.Equal(t, [4]int64{pl.Removed.From, pl.Removed.To, pl.Removed.Records, pl.LocalWrites.Records},
			[4]int64{got[0].num("removedFrom"), got[0].num("removedTo"), got[0].num("removedRecords"), got[0].num("lost")}, "partition %d", p)
	}
}

// TestAutoDiscoveryRefusesLocalRecords: B holds a topic of its own (created on B,
// records written there to partition 0 only); a mirror on B whose topics.include
// matches it discovers it on A. Partition 0 would lose B's records: refused (FAILED,
// typed cause in describe, a refusal logged, the metric counted), partition 1 (empty)
// mirrors. --recover --allow-truncation then removes exactly the plan.
func TestAutoDiscoveryRefusesLocalRecords(t *testing.T) {
	metricsAddr := freeAddr(t)
	a := newSite(t, "A")
	b := newSite(t, "B", "-sync-interval", "200ms", "-metrics", metricsAddr)
	createTopic(t, a.addr, topic, partitions)
	produceKgo(t, a.addr, topic, partitions, 20, "a")
	createTopic(t, b.addr, topic, partitions)
	produceKgo(t, b.addr, topic, 1, 30, "b-own") // partition 0 only
	before := rawLog(t, b.addr, topic, 0)
	require.Equal(t, int64(30), logEnd(t, before))

	file := filepath.Join(t.TempDir(), "a-to-b.properties")
	require.NoError(t, os.WriteFile(file, []byte("bootstrap.servers="+a.addr+"\nfetch.wait.max.ms=100\ntopics.include="+topic+"\n"), 0o600))
	mark := b.mark()
	b.ctl("--create", "--mirror", "a-to-b", "--mirror-config", file)
	aEnd1 := logEnd(t, rawLog(t, a.addr, topic, 1))
	ps := b.waitPartitions("a-to-b", topic, int(partitions), "p0 refused, p1 mirroring", func(p partitionDesc) bool {
		if p.Partition == 0 {
			return p.State == "FAILED"
		}
		return p.State == "MIRRORING" && p.DestinationOffset == aEnd1
	})
	require.Contains(t, ps[0].Error, "no start approved this removal")
	require.Contains(t, ps[0].Error, "30 records at offsets [0, 30), 30 of them written on this site")
	require.Equal(t, before, rawLog(t, b.addr, topic, 0), "no record of B's removed")
	refused := b.logs(mark, func(l logLine) bool {
		return l.str("msg") == "mirror: PREPARING refused to remove records written on this site that no start approved"
	})
	require.Len(t, refused, 1)
	require.Equal(t, int64(0), refused[0].num("partition"))
	requireMetric(t, metricsAddr, `kmirror_truncation_refusals_total{mirror="a-to-b",topic="`+topic+`"}`, func(v float64) bool { return v == 1 })

	rec := []string{"--recover", "--mirror", "a-to-b", "--topics", topic}
	out, _, code := b.ctlCode(append(rec, "--dry-run", "--output", "json")...)
	require.Equal(t, 1, code, "a dry run of a refused recover says so: %s", out)
	_, plan := onePlan(t, out)
	require.Equal(t, [3]int64{0, 30, 30}, [3]int64{plan[0].Removed.From, plan[0].Removed.To, plan[0].Removed.Records})
	require.Equal(t, [3]int64{0, 30, 30}, [3]int64{plan[0].LocalWrites.From, plan[0].LocalWrites.To, plan[0].LocalWrites.Records})
	require.Equal(t, "MIRRORING", plan[1].StateNow, "partition 1 is left alone")
	require.Equal(t, before, rawLog(t, b.addr, topic, 0))

	mark = b.mark()
	b.ctl(append(rec, "--allow-truncation")...)
	caughtUp(t, b, "a-to-b", a)
	sameBytes(t, a, b)
	got := b.logs(mark, func(l logLine) bool {
		return l.str("msg") == "mirror: PREPARING removed records from the destination log"
	})
	require.Len(t, got, 1)
	require.Equal(t, [5]int64{0, 0, 30, 30, 30},
		[5]int64{got[0].num("partition"), got[0].num("removedFrom"), got[0].num("removedTo"), got[0].num("removedRecords"), got[0].num("lost")})
}
