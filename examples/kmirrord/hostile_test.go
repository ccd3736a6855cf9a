package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The daemon child: TestKmirrordChild, run by re-executing the test binary
// with kmirrordChildEnv set to a data directory, runs the daemon on
// 127.0.0.1 with its default limits, logging JSON at debug level (every
// connection the server closes) to stdout; when its stdin closes it stops
// the daemon and prints "hwm KIB" (VmHWM, its peak RSS).
const kmirrordChildEnv = "KMIRROR_KMIRRORD_CHILD"

func TestKmirrordChild(t *testing.T) {
	dir := os.Getenv(kmirrordChildEnv)
	if dir == "" {
		t.Skip("run as a child by TestHostileFramesAgainstDaemon")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	code := run(ctx, []string{"-listen", "127.0.0.1:0", "-data", dir, "-log-format", "json", "-log-level", "debug"}, os.Stdout)
	fmt.Printf("hwm %d\n", vmHWM())
	os.Exit(code)
}

// vmHWM is this process's peak resident set size in KiB.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

type daemonChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	mu    sync.Mutex
	grew  *sync.Cond // broadcast on every line (and at the end)
	done  bool
	lines []string
	hwm   chan int64
}

func startDaemonChild(t *testing.T) *daemonChild {
	t.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKmirrordChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), kmirrordChildEnv+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &daemonChild{cmd: cmd, stdin: stdin, hwm: make(chan int64, 1)}
	c.grew = sync.NewCond(&c.mu)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "hwm "); ok {
				n, _ := strconv.ParseInt(rest, 10, 64)
				c.hwm <- n << 10
				continue
			}
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "kmirrord listening" {
				addr <- l["addr"].(string)
			}
			c.mu.Lock()
			c.lines = append(c.lines, line)
			c.grew.Broadcast()
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.done = true
		c.grew.Broadcast()
		c.mu.Unlock()
		close(c.hwm)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill() // no-op once stop has reaped it
		_ = cmd.Wait()
	})
	select {
	case c.addr = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon child did not listen")
	}
	return c
}

// stop ends the child and returns its peak RSS in bytes.
func (c *daemonChild) stop(t *testing.T) int64 {
	t.Helper()
	require.NoError(t, c.stdin.Close())
	select {
	case hwm, ok := <-c.hwm:
		require.True(t, ok, "the child printed no peak RSS")
		require.NoError(t, c.cmd.Wait())
		return hwm
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon child did not stop")
		return 0
	}
}

// waitCount waits until at least n of the child's log lines hold every
// part (at most 30 s) and returns how many do.
func (c *daemonChild) waitCount(n int, parts ...string) int {
	timedOut := false
	timer := time.AfterFunc(30*time.Second, func() {
		c.mu.Lock()
		timedOut = true
		c.grew.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		got := c.countLocked(parts...)
		if got >= n || timedOut || c.done {
			return got
		}
		c.grew.Wait()
	}
}

// countLocked is the number of the child's log lines holding every part.
func (c *daemonChild) countLocked(parts ...string) int {
	n := 0
next:
	for _, l := range c.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// requestHeader is a request header (v1, or v2 with its empty tags when
// flexible) for key and version.
func requestHeader(key, version int16, flexible bool) []byte {
	b := kbin.AppendInt16(nil, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, 1)
	b = kbin.AppendNullableString(b, nil)
	if flexible {
		b = append(b, 0)
	}
	return b
}

// sized prefixes body with its size.
func sized(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// emptyTopicsFetch is a Fetch v12 frame of size bytes of empty topics.
func emptyTopicsFetch(size int) []byte {
	b := requestHeader(int16(kmsg.Fetch), 12, true)
	for _, v := range []int32{-1, 500, 1, 1 << 20} {
		b = kbin.AppendInt32(b, v)
	}
	b = append(b, 0)
	b = kbin.AppendInt32(b, 0)
	b = kbin.AppendInt32(b, -1)
	n := (size - len(b) - 8) / 3
	b = kbin.AppendUvarint(b, uint32(n+1))
	for range n {
		b = append(b, 1, 1, 0) // empty name, no partitions, no tags
	}
	return sized(append(b, 1, 1, 0)) // no forgotten topics, empty rack, no tags
}

// tagsFrame is a request of key at version (flexible) whose top-level
// struct carries n unknown tagged fields, the cheapest amplification kmsg
// has: each tag (3-4 bytes) is a map entry of up to 160 bytes.
func tagsFrame(key, version int16, n int) []byte {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if p, ok := req.(*kmsg.ProduceRequest); ok {
		p.Acks = -1 // acks 0 is never answered
	}
	body := req.AppendTo(nil)
	// Every flexible request ends with its top-level tag count, 0 here:
	// replace it by n tags of keys far above the known ones.
	body = body[:len(body)-1]
	body = kbin.AppendUvarint(body, uint32(n))
	for i := range n {
		body = kbin.AppendUvarint(body, uint32(1000+i))
		body = append(body, 0)
	}
	return sized(append(requestHeader(key, version, true), body...))
}

// apiVersions asks addr for its keys on a fresh connection and returns them
// and how long the answer took.
func apiVersions(t *testing.T, addr string) ([]kmsg.ApiVersionsResponseApiKey, time.Duration) {
	t.Helper()
	start := time.Now()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	_, err = conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 9))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	var size [4]byte
	_, err = io.ReadFull(conn, size[:])
	require.NoError(t, err)
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(conn, frame)
	require.NoError(t, err)
	took := time.Since(start)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	require.NoError(t, resp.ReadFrom(frame[4:]))
	require.Zero(t, resp.ErrorCode)
	return resp.ApiKeys, took
}

// closedOrAnswered writes frame on a new connection and waits until the
// server answers or closes it (bounded).
func closedOrAnswered(addr string, frame []byte) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write(frame); err != nil {
		return nil // closed while we wrote: the refusal
	}
	if err := conn.SetReadDeadline(time.Now().Add(40 * time.Second)); err != nil {
		return err
	}
	var b [4]byte
	_, err = io.ReadFull(conn, b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Errorf("neither answered nor closed within 40s")
	}
	return nil
}

// TestHostileFramesAgainstDaemon (Bar): the attacks found on the one
// kmirrord listener, against the real daemon in a child process: 260
// connections announcing a 64 MiB Produce and stalling after the key, two
// slow 11 MiB Produce bodies, a tagged-field amplification frame of every
// served key and version, 50 concurrent 8 MiB Fetch frames of empty topics
// and 500 connections announcing a frame and closing. Meanwhile and after,
// ApiVersions on a fresh connection is answered within 1 s; nothing is
// appended to the topic; the child's peak RSS stays under 1 GiB.
func TestHostileFramesAgainstDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("sends about 450 MiB")
	}
	c := startDaemonChild(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "victim", 1, 1
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	cresp, err := ct.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, cresp.Topics[0].ErrorCode)
	keys, _ := apiVersions(t, c.addr)

	// Held open to the end: 260 stalled announcements and two slow bodies.
	var held []net.Conn
	defer func() {
		for _, h := range held {
			_ = h.Close()
		}
	}()
	for range 260 {
		conn, err := net.Dial("tcp", c.addr)
		require.NoError(t, err)
		held = append(held, conn)
		_, err = conn.Write(append(binary.BigEndian.AppendUint32(nil, 64<<20), 0, 0))
		require.NoError(t, err)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks = 9, -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "victim"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = make([]byte, 11<<20)
	pt.Partitions = []kmsg.ProduceRequestTopicPartition{pp}
	produce.Topics = []kmsg.ProduceRequestTopic{pt}
	slow := sized(append(requestHeader(0, 9, true), produce.AppendTo(nil)...))
	for range 2 {
		conn, err := net.Dial("tcp", c.addr)
		require.NoError(t, err)
		held = append(held, conn)
		_, err = conn.Write(slow[:len(slow)/3]) // then nothing
		require.NoError(t, err)
	}
	_, took := apiVersions(t, c.addr)
	require.Less(t, took, time.Second, "ApiVersions beside stalled frames")

	// Tagged-field amplification for every served key and version: 300 Ki
	// tags (within the limits: answered or refused by the handler) and
	// 1.1 Mi (over MaxDecodedElements: closed before decoding).
	tagKeys := 0
	for _, k := range keys {
		req := kmsg.RequestForKey(k.ApiKey)
		if req == nil || k.ApiKey == int16(kmsg.ApiVersions) || k.ApiKey >= 10000 {
			continue
		}
		for v := k.MinVersion; v <= k.MaxVersion; v++ {
			req.SetVersion(v)
			if !req.IsFlexible() {
				continue
			}
			for _, n := range []int{300 << 10, 1100 << 10} {
				require.NoError(t, closedOrAnswered(c.addr, tagsFrame(k.ApiKey, v, n)), "key %d v%d", k.ApiKey, v)
			}
			tagKeys++
		}
	}
	require.Greater(t, tagKeys, 40)
	require.Positive(t, c.waitCount(1, "refused before decoding", "tagged fields"))

	// 50 Fetch frames of 8 MiB of empty topics at once.
	fetch := emptyTopicsFetch(8 << 20)
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = closedOrAnswered(c.addr, fetch)
		}()
	}
	// 500 connections announcing a frame and closing.
	for range 500 {
		conn, err := net.Dial("tcp", c.addr)
		require.NoError(t, err)
		_, _ = conn.Write(append(binary.BigEndian.AppendUint32(nil, 1<<20), 0, 1, 0, 12))
		_ = conn.Close()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "fetch %d", i)
	}
	require.GreaterOrEqual(t, c.waitCount(50, "refused before decoding", "array elements"), 50)

	_, took = apiVersions(t, c.addr)
	t.Logf("ApiVersions answered in %v after the attacks", took)
	require.Less(t, took, time.Second)

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "victim"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{lp}
	lo.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	// A deadline of its own: the attacks above take 80 s alone and more under
	// a loaded race run, which ran the test-wide one out before this request.
	loCtx, loCancel := context.WithTimeout(context.Background(), time.Minute)
	defer loCancel()
	loResp, err := lo.RequestWith(loCtx, cl)
	require.NoError(t, err)
	require.Zero(t, loResp.Topics[0].Partitions[0].ErrorCode)
	require.Zero(t, loResp.Topics[0].Partitions[0].Offset, "nothing appended")

	for _, h := range held {
		_ = h.Close()
	}
	held = nil
	cl.Close()
	hwm := c.stop(t)
	limit := int64(1 << 30)
	if raceBuild {
		limit *= 5
	}
	t.Logf("peak RSS of the daemon child: %.0f MiB (bound %d MiB)", float64(hwm)/(1<<20), limit>>20)
	require.Less(t, hwm, limit)
}
