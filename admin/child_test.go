package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The server child: TestServerChild, run by re-executing the test binary with
// childEnv set, serves a handler answering every RPC with its empty response
// on 127.0.0.1 with the default limits. With childNoFileEnv it first lowers
// RLIMIT_NOFILE. It prints "addr HOST:PORT", then "err MESSAGE" for every
// OnError report; when its stdin closes it prints "hwm KIB" (VmHWM, its peak
// RSS) and exits.
const (
	childEnv       = "KMIRROR_ADMIN_SERVER_CHILD"
	childNoFileEnv = "KMIRROR_ADMIN_CHILD_NOFILE"
	// childExtraEnv mounts Fetch v12 as an Extra key answering empty.
	childExtraEnv = "KMIRROR_ADMIN_CHILD_EXTRA"
)

func TestServerChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run as a child by TestFileDescriptorExhaustion and TestPeakRSSUnderAmplification")
	}
	if n, err := strconv.ParseUint(os.Getenv(childNoFileEnv), 10, 64); err == nil {
		lim := syscall.Rlimit{Cur: n, Max: n}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			fmt.Printf("fatal setrlimit: %v\n", err)
			os.Exit(2)
		}
	}
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		fmt.Printf(format+"\n", args...)
		outMu.Unlock()
	}
	h := &funcHandler{fn: func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		return req.ResponseKind(), nil
	}}
	cfg := ServerConfig{Handler: h, OnError: func(err error) {
		say("err %s", strings.ReplaceAll(err.Error(), "\n", " "))
	}}
	if os.Getenv(childExtraEnv) != "" {
		cfg.Extra = []ExtraAPI{{Key: 1, MinVersion: 12, MaxVersion: 12,
			Serve: func(context.Context, *RequestContext, kmsg.Request) (kmsg.Response, error) {
				return kmsg.NewPtrFetchResponse(), nil
			}}}
	}
	srv, err := NewServer(cfg)
	if err != nil {
		say("fatal %v", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		say("fatal %v", err)
		os.Exit(2)
	}
	go func() { _ = srv.Serve(ln) }()
	say("addr %s", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	say("hwm %d", vmHWM())
	os.Exit(0)
}

// vmHWM is this process's peak resident set size in KiB (/proc/self/status).
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

// serverChild is a running child: its address, its output lines and a way to
// stop it and read its peak RSS.
type serverChild struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	lines chan string
}

func startServerChild(t *testing.T, env ...string) *serverChild {
	t.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &serverChild{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 1<<16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill() // no-op once stop has reaped it
		_ = cmd.Wait()
	})
	line := c.next("addr ")
	c.addr = strings.TrimPrefix(line, "addr ")
	return c
}

// next returns the next output line starting with prefix, skipping others
// (they are kept in seen when non-nil).
func (c *serverChild) next(prefix string, seen ...*[]string) string {
	c.t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			require.True(c.t, ok, "child exited before printing %q", prefix)
			if strings.HasPrefix(line, prefix) {
				return line
			}
			require.False(c.t, strings.HasPrefix(line, "fatal "), "child: %s", line)
			for _, s := range seen {
				*s = append(*s, line)
			}
		case <-timeout:
			c.t.Fatalf("child printed no %q line", prefix)
		}
	}
}

// stop closes the child's stdin and returns its peak RSS in bytes and the
// lines it printed before.
func (c *serverChild) stop() (int64, []string) {
	c.t.Helper()
	require.NoError(c.t, c.stdin.Close())
	var seen []string
	kib, err := strconv.ParseInt(strings.TrimPrefix(c.next("hwm ", &seen), "hwm "), 10, 64)
	require.NoError(c.t, err)
	require.NoError(c.t, c.cmd.Wait())
	return kib << 10, seen
}
