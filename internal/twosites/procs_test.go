package twosites

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bins holds the binaries built once per test binary by TestMain.
var bins struct {
	dir       string
	kmirrord  string
	mirrorctl string
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(envGroupMember); spec != "" { // a member process of the group benchmarks
		os.Exit(runGroupMember(spec))
	}
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "twosites:", err)
		code = 1
	}
	os.Exit(code)
}

// buildAndRun builds kmirrord and mirrorctl into a temporary directory and
// runs the tests.
func buildAndRun(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "kmirror-twosites-bin-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return 1, errors.New("no caller information")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./examples/kmirrord", "./examples/mirrorctl")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return 1, fmt.Errorf("go build: %v\n%s", err, out)
	}
	bins.dir = dir
	bins.kmirrord = filepath.Join(dir, "kmirrord")
	bins.mirrorctl = filepath.Join(dir, "mirrorctl")
	return m.Run(), nil
}

// logLine is one JSON log record of a kmirrord.
type logLine map[string]any

func (l logLine) str(k string) string { s, _ := l[k].(string); return s }

func (l logLine) num(k string) int64 {
	f, _ := l[k].(float64)
	return int64(f)
}

// site is one kmirrord process (restartable on the same data directory and
// port).
type site struct {
	t         testing.TB
	name      string
	dir       string
	clusterID string
	port      int // 0 until the first start
	addr      string
	extraArgs []string // more kmirrord flags
	ctlArgs   []string // more mirrorctl flags of ctl (--command-config)

	cmd    *exec.Cmd
	exited chan struct{}
	exit   error

	mu      sync.Mutex
	lines   []logLine // every JSON log line of every run
	raw     bytes.Buffer
	changed chan struct{} // closed and replaced on every new line
}

// newSite starts a kmirrord on a free loopback port.
func newSite(t testing.TB, name string, extraArgs ...string) *site {
	t.Helper()
	s := &site{t: t, name: name, dir: filepath.Join(t.TempDir(), name), clusterID: "site-" + strings.ToLower(name),
		changed: make(chan struct{}), extraArgs: extraArgs}
	t.Cleanup(func() {
		if s.running() {
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			s.mu.Lock()
			t.Logf("site %s log:\n%s", s.name, s.raw.String())
			s.mu.Unlock()
		}
	})
	s.start()
	return s
}

func (s *site) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// start runs kmirrord and waits for its "listening" line.
func (s *site) start() {
	t := s.t
	t.Helper()
	s.mu.Lock()
	from := len(s.lines)
	s.exit = nil // the previous run's
	s.mu.Unlock()
	args := append([]string{"-listen", fmt.Sprintf("127.0.0.1:%d", s.port), "-data", s.dir,
		"-cluster-id", s.clusterID, "-log-format", "json"}, s.extraArgs...)
	cmd := exec.Command(bins.kmirrord, args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	s.cmd, s.exited = cmd, make(chan struct{})
	go s.read(stderr, cmd)
	l := s.waitLog(30*time.Second, from, func(l logLine) bool { return l.str("msg") == "kmirrord listening" })
	s.addr = l.str("addr")
	if s.port == 0 {
		_, err := fmt.Sscanf(s.addr[strings.LastIndexByte(s.addr, ':')+1:], "%d", &s.port)
		require.NoError(t, err)
	}
}

// read collects the log lines of one run, then waits for the process.
func (s *site) read(r interface{ Read([]byte) (int, error) }, cmd *exec.Cmd) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			l = logLine{"msg": "(not json) " + sc.Text()}
		}
		s.mu.Lock()
		s.lines = append(s.lines, l)
		s.raw.Write(sc.Bytes())
		s.raw.WriteByte('\n')
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
	err := cmd.Wait()
	s.mu.Lock()
	s.exit = err
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	close(s.exited)
}

// waitLog returns the first log line at or after index from that matches,
// failing after timeout or when the process exits first.
func (s *site) waitLog(timeout time.Duration, from int, match func(logLine) bool) logLine {
	s.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		for _, l := range s.lines[from:] {
			if match(l) {
				s.mu.Unlock()
				return l
			}
		}
		from = len(s.lines)
		ch, exited := s.changed, s.exit != nil
		s.mu.Unlock()
		if exited {
			s.t.Fatalf("site %s exited (%v) while waiting for a log line", s.name, s.exit)
		}
		select {
		case <-ch:
		case <-s.exited:
			s.mu.Lock()
			done := len(s.lines) == from
			s.mu.Unlock()
			if done {
				s.t.Fatalf("site %s exited (%v) while waiting for a log line", s.name, s.exit)
			}
		case <-deadline.C:
			s.t.Fatalf("site %s: no matching log line within %v", s.name, timeout)
		}
	}
}

// mark returns the index of the next log line.
func (s *site) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}

// logs returns the log lines after mark that match.
func (s *site) logs(from int, match func(logLine) bool) []logLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []logLine
	for _, l := range s.lines[from:] {
		if match(l) {
			out = append(out, l)
		}
	}
	return out
}

// kill9 SIGKILLs the process.
func (s *site) kill9() {
	s.t.Helper()
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGKILL))
	<-s.exited
	var ee *exec.ExitError
	require.ErrorAs(s.t, s.exit, &ee)
	require.Equal(s.t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
}

// term stops the process with SIGTERM and checks the graceful exit.
func (s *site) term() {
	s.t.Helper()
	from := s.mark()
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGTERM))
	<-s.exited
	require.NoError(s.t, s.exit, "kmirrord %s exit after SIGTERM", s.name)
	require.NotEmpty(s.t, s.logs(from, func(l logLine) bool { return l.str("msg") == "kmirrord stopped" }))
}

// ctl runs mirrorctl against the site and returns its stdout; it fails the
// test unless the exit code is 0.
func (s *site) ctl(args ...string) string {
	s.t.Helper()
	out, errOut, code := s.ctlCode(args...)
	require.Equal(s.t, 0, code, "mirrorctl %v: stdout %s stderr %s", args, out, errOut)
	return out
}

func (s *site) ctlCode(args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(bins.mirrorctl, append(append([]string{"--bootstrap-server", s.addr}, s.ctlArgs...), args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		s.t.Fatalf("mirrorctl: %v", err)
	}
	return o.String(), e.String(), code
}

// createMirror creates mirror name on s with source src.
func (s *site) createMirror(name string, src *site) {
	s.t.Helper()
	s.createMirrorTo(name, src.addr, filepath.Join(s.t.TempDir(), name+".properties"))
}

// createMirrorTo creates mirror name on s with the source at bootstrap; the
// mirror config is written to file.
func (s *site) createMirrorTo(name, bootstrap, file string) {
	s.t.Helper()
	require.NoError(s.t, os.WriteFile(file, []byte("bootstrap.servers="+bootstrap+"\nfetch.wait.max.ms=100\n"), 0o600))
	s.ctl("--create", "--mirror", name, "--mirror-config", file)
}

// partitionDesc is one partition of mirrorctl --describe --output json.
type partitionDesc struct {
	Topic             string `json:"topic"`
	Partition         int32  `json:"partition"`
	State             string `json:"state"`
	SourceOffset      int64  `json:"sourceOffset"`
	DestinationOffset int64  `json:"destinationOffset"`
	Lag               int64  `json:"lag"`
	LastMirrorEpoch   int32  `json:"lastMirrorEpoch"`
	LastMirrorOffset  int64  `json:"lastMirrorOffset"`
	Error             string `json:"error"`
}

// describe returns the partitions of topic in mirror name.
func (s *site) describe(name, topic string) []partitionDesc {
	s.t.Helper()
	out := s.ctl("--describe", "--mirror", name, "--output", "json")
	var descs []struct {
		Mirror     string          `json:"mirror"`
		Partitions []partitionDesc `json:"partitions"`
	}
	require.NoError(s.t, json.Unmarshal([]byte(out), &descs), out)
	var ps []partitionDesc
	for _, d := range descs {
		for _, p := range d.Partitions {
			if d.Mirror == name && p.Topic == topic {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// waitPartitions polls describe until ok holds for n partitions of topic.
func (s *site) waitPartitions(name, topic string, n int, what string, ok func(partitionDesc) bool) []partitionDesc {
	s.t.Helper()
	return s.waitPartitionsFor(30*time.Second, name, topic, n, what, ok)
}

// waitPartitionsFor is waitPartitions with a timeout.
func (s *site) waitPartitionsFor(timeout time.Duration, name, topic string, n int, what string, ok func(partitionDesc) bool) []partitionDesc {
	s.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var ps []partitionDesc
	for {
		ps = s.describe(name, topic)
		good := len(ps) == n
		for _, p := range ps {
			good = good && ok(p)
		}
		if good {
			return ps
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			s.t.Fatalf("site %s mirror %s topic %s: not %s within %v: %+v", s.name, name, topic, what, timeout, ps)
		}
	}
}

func (s *site) waitState(name, topic string, n int, state string) []partitionDesc {
	s.t.Helper()
	return s.waitPartitions(name, topic, n, state, func(p partitionDesc) bool { return p.State == state })
}
