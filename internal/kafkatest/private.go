package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A private cluster is one single-node Kafka cluster that belongs to one test: started by
// [StartPrivate] through scripts/kafka/kafka.sh (as cluster C, KMIRROR_KAFKA_CLUSTERS=c) in its
// own work directory and on its own ports, so the test may kill, stop, restart, freeze or
// reconfigure it without disturbing any other test. It is stopped when the test ends.

// Private cluster settings read from the environment.
const (
	// EnvPrivateVersion overrides the Kafka version private clusters run (default
	// [DefaultPrivateVersion]).
	EnvPrivateVersion = "KMIRROR_KAFKA_PRIVATE_VERSION"
	// EnvCache is the script's download cache (default $HOME/.cache/kmirror/kafka).
	EnvCache = "KMIRROR_KAFKA_CACHE"
)

// DefaultPrivateVersion is the Kafka version a private cluster runs unless
// [PrivateOptions.Version] or EnvPrivateVersion names another.
const DefaultPrivateVersion = "4.4.0"

// Port layout of the script's cluster C relative to its base port (see kafka.sh).
const (
	privateClientOffset     = 30
	privateControllerOffset = 130
	privatePortMin          = 20000
	privatePortStep         = 200
)

// privateStartTimeout bounds one start or restart of a private cluster.
const privateStartTimeout = 3 * time.Minute

// PrivateOptions configures [StartPrivate].
type PrivateOptions struct {
	// Version is the Kafka version (default EnvPrivateVersion, else DefaultPrivateVersion). It
	// must be installed (kafka.sh install with KMIRROR_KAFKA_VERSION set to it).
	Version string
	// ExtraConfig holds server.properties lines appended to the node's configuration
	// (KMIRROR_KAFKA_EXTRA_CONFIG_C).
	ExtraConfig string
	// TieredStorage runs the node with tiered storage (KMIRROR_KAFKA_TIERED_STORAGE=1) on
	// kafka.sh's FileRemoteStorageManager; the "remote" segments are kept in
	// [Private.RemoteStorageDir].
	TieredStorage bool
	// NoAuthorizer runs the node without the StandardAuthorizer that cluster C's node has by
	// default (KMIRROR_KAFKA_C_AUTHORIZER=0).
	NoAuthorizer bool
}

// Private is a running private single-node cluster (node id 1). Its methods may be called
// from the test's goroutine only.
type Private struct {
	t       testing.TB
	script  string
	workdir string
	base    int
	addr    string
	env     []string
	lock    *os.File
	frozen  bool
	watch   *exec.Cmd
	cleaned bool
}

// StartPrivate starts a private single-node Kafka cluster for t and waits until it serves
// (its offsets and transaction state topics exist). It skips the test when Java or the
// version's jars are not installed, or fails it when KMIRROR_REQUIRE_KAFKA=1. The cluster is
// stopped, and its work directory removed, when t ends, whatever happened; a watchdog process
// kills the node should the test binary die without running its cleanups.
func StartPrivate(t testing.TB, opts PrivateOptions) *Private {
	t.Helper()
	version := opts.Version
	if version == "" {
		version = strings.TrimSpace(os.Getenv(EnvPrivateVersion))
	}
	if version == "" {
		version = DefaultPrivateVersion
	}
	if err := privateInstalled(version, opts.TieredStorage); err != nil {
		msg := fmt.Sprintf("private Kafka %s cluster unavailable: %v (run KMIRROR_KAFKA_VERSION=%s bash scripts/kafka/kafka.sh install)", version, err, version)
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1: %s", EnvRequire, msg)
		}
		t.Skip(msg)
	}
	workdir, err := os.MkdirTemp("", "kmirror-kafka-private-")
	if err != nil {
		t.Fatalf("kafkatest: private cluster work directory: %v", err)
	}
	// The script of this checkout, not EnvScript: that names the script that started the
	// shared clusters, which may be another checkout's.
	p := &Private{t: t, script: sourceScript(t), workdir: workdir}
	t.Cleanup(p.cleanup)
	p.base, p.lock, err = reservePorts()
	if err != nil {
		t.Fatalf("kafkatest: private cluster ports: %v", err)
	}
	p.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.base+privateClientOffset))
	p.env = append(os.Environ(),
		"KMIRROR_KAFKA_CLUSTERS=c",
		"KMIRROR_KAFKA_C_WORKDIR="+workdir,
		"KMIRROR_KAFKA_C_BASE_PORT="+strconv.Itoa(p.base),
		"KMIRROR_KAFKA_C_VERSION="+version,
		"KMIRROR_KAFKA_EXTRA_CONFIG=",
		"KMIRROR_KAFKA_EXTRA_CONFIG_C="+opts.ExtraConfig,
		"KMIRROR_KAFKA_TIERED_STORAGE="+boolFlag(opts.TieredStorage),
		"KMIRROR_KAFKA_C_AUTHORIZER="+boolFlag(!opts.NoAuthorizer),
		"KMIRROR_KAFKA_STOP_TIMEOUT=15",
		"KMIRROR_KAFKA_START_TIMEOUT="+strconv.Itoa(int(privateStartTimeout/time.Second)-10),
	)
	started := time.Now()
	if out, err := p.run("start"); err != nil {
		p.dumpLogs()
		t.Fatalf("kafkatest: start private Kafka %s cluster: %v\n%s", version, err, out)
	}
	p.startWatchdog()
	t.Logf("kafkatest: private Kafka %s cluster at %s (work directory %s) started in %v",
		version, p.addr, workdir, time.Since(started).Round(time.Millisecond))
	return p
}

// Addr returns the node's client address (host:port).
func (p *Private) Addr() string { return p.addr }

// Brokers returns the cluster's bootstrap addresses (its one node).
func (p *Private) Brokers() []string { return []string{p.addr} }

// Workdir returns the cluster's work directory (removed when the test ends).
func (p *Private) Workdir() string { return p.workdir }

// DataDir returns the node's log directory (log.dirs).
func (p *Private) DataDir() string { return filepath.Join(p.workdir, "c1", "data") }

// RemoteStorageDir returns the directory the remote storage manager keeps segments in (with
// [PrivateOptions.TieredStorage]).
func (p *Private) RemoteStorageDir() string { return filepath.Join(p.workdir, "c1", "remote-storage") }

// Kill sends SIGKILL to the node and waits until the process is gone: connections are reset,
// nothing is flushed or shut down in order. [Private.Start] starts it again with its data.
func (p *Private) Kill() {
	p.t.Helper()
	pid, ok := p.pid()
	if !ok {
		p.t.Fatalf("kafkatest: Kill: private node not running")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		p.t.Fatalf("kafkatest: Kill %d: %v", pid, err)
	}
	p.frozen = false
	if !waitGone(pid, 30*time.Second) {
		p.t.Fatalf("kafkatest: private node %d still alive 30s after SIGKILL", pid)
	}
	// The JVM's main thread can show as a zombie while its other threads, which
	// share the open sockets, are still being torn down: wait until the listener
	// refuses connections, as a dead broker's does.
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", p.Addr(), 200*time.Millisecond)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			p.t.Fatalf("kafkatest: private node %d killed, but %s still accepts connections after 15 s", pid, p.Addr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the node down in order (SIGTERM, SIGKILL after 15 s) and keeps its data.
func (p *Private) Stop() {
	p.t.Helper()
	if p.frozen {
		p.Thaw()
	}
	if out, err := p.run("stop-node", "c", "1"); err != nil {
		p.t.Fatalf("kafkatest: stop private node: %v\n%s", err, out)
	}
}

// Start starts a stopped or killed node again with its data and waits until it is
// registered. It is a no-op wait when the node runs.
func (p *Private) Start() {
	p.t.Helper()
	started := time.Now()
	if out, err := p.run("start-node", "c", "1"); err != nil {
		p.dumpLogs()
		p.t.Fatalf("kafkatest: restart private node: %v\n%s", err, out)
	}
	p.t.Logf("kafkatest: private node %s restarted in %v", p.addr, time.Since(started).Round(time.Millisecond))
}

// Freeze sends SIGSTOP to the node: its sockets stay open and accept connections (the kernel
// completes the handshakes), but nothing answers until [Private.Thaw].
func (p *Private) Freeze() {
	p.t.Helper()
	p.signal(syscall.SIGSTOP)
	p.frozen = true
}

// Thaw sends SIGCONT to a frozen node.
func (p *Private) Thaw() {
	p.t.Helper()
	p.signal(syscall.SIGCONT)
	p.frozen = false
}

func (p *Private) signal(sig syscall.Signal) {
	p.t.Helper()
	pid, ok := p.pid()
	if !ok {
		p.t.Fatalf("kafkatest: %v: private node not running", sig)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		p.t.Fatalf("kafkatest: %v %d: %v", sig, pid, err)
	}
}

// pid returns the node's JVM pid when it runs: the pid file's process, whose command line
// names this cluster's configuration file (as kafka.sh checks).
func (p *Private) pid() (int, bool) {
	b, err := os.ReadFile(filepath.Join(p.workdir, "c1", "pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), filepath.Join(p.workdir, "c1", "server.properties")) {
		return 0, false
	}
	return pid, !zombie(pid)
}

func (p *Private) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), privateStartTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{p.script}, args...)...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (p *Private) dumpLogs() {
	for _, f := range []string{"server.log", "stdout.log"} {
		b, err := os.ReadFile(filepath.Join(p.workdir, "c1", "logs", f))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		p.t.Logf("kafkatest: private node %s (last %d lines):\n%s", f, len(lines), strings.Join(lines, "\n"))
	}
}

// startWatchdog starts a detached shell that, should this process die before the cleanup
// ran (a test binary's timeout panic skips cleanups), kills the node and removes its work
// directory. The cleanup ends the watchdog.
func (p *Private) startWatchdog() {
	script := `me=$1 dir=$2
while kill -0 "$me" 2>/dev/null; do sleep 2; done
pid=$(cat "$dir/c1/pid" 2>/dev/null) || pid=
if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -F "$dir/c1/server.properties"; then
	kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
fi
sleep 1
rm -rf "$dir"`
	cmd := exec.Command("bash", "-c", script, "kafkatest-watchdog", strconv.Itoa(os.Getpid()), p.workdir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		p.t.Logf("kafkatest: no watchdog for the private cluster: %v", err)
		return
	}
	p.watch = cmd
}

func (p *Private) cleanup() {
	if p.cleaned {
		return
	}
	p.cleaned = true
	if p.t.Failed() {
		// Also when the node is gone: a JVM that died under a test (twice in an
		// idle benchmark of 10,000 partitions) says why only in its logs.
		p.dumpLogs()
	}
	if pid, ok := p.pid(); ok {
		if p.frozen {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		if out, err := p.run("stop"); err != nil {
			p.t.Logf("kafkatest: stop private cluster: %v\n%s", err, out)
		}
		if pid, ok := p.pid(); ok {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 10*time.Second)
		}
	}
	if p.watch != nil {
		_ = p.watch.Process.Kill()
		_ = p.watch.Wait()
	}
	if err := os.RemoveAll(p.workdir); err != nil {
		p.t.Logf("kafkatest: remove %s: %v", p.workdir, err)
	}
	if p.lock != nil {
		p.lock.Close() // releases the port reservation
	}
}

// privateInstalled reports why a private cluster of version cannot run, or nil.
func privateInstalled(version string, tiered bool) error {
	if _, err := exec.LookPath("java"); err != nil {
		return errors.New("java not found")
	}
	cache := strings.TrimSpace(os.Getenv(EnvCache))
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("no download cache: %w", err)
		}
		cache = filepath.Join(home, ".cache", "kmirror", "kafka")
	}
	need := []string{filepath.Join(cache, version, "classpath"), filepath.Join(cache, version, "classes")}
	if tiered {
		need = append(need, filepath.Join(cache, version, "tiered", "classpath"))
	}
	for _, f := range need {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			return fmt.Errorf("%s missing", f)
		}
	}
	return nil
}

// reservePorts picks a base port from 20000 up whose client and controller ports (base+30,
// base+130) are free and below the ephemeral port range, and holds an exclusive flock on a per-base lock file in the temporary directory until
// the returned file is closed, so parallel test binaries never pick the same base; a port
// another program listens on is skipped by trying to listen on it.
func reservePorts() (int, *os.File, error) {
	dir := filepath.Join(os.TempDir(), "kmirror-kafkatest-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, nil, err
	}
	// Below the kernel's ephemeral range: a port there could be handed to some other
	// program's outgoing connection or bind(0) while the node is killed or stopped, and the
	// restart would fail.
	slots := (ephemeralLow() - privateControllerOffset - privatePortMin) / privatePortStep
	if slots < 1 {
		return 0, nil, fmt.Errorf("no port pair from %d below the ephemeral range (%d)", privatePortMin, ephemeralLow())
	}
	first := rand.IntN(slots)
	for i := 0; i < slots; i++ {
		base := privatePortMin + ((first+i)%slots)*privatePortStep
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(base)+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		if portFree(base+privateClientOffset) && portFree(base+privateControllerOffset) {
			return base, f, nil
		}
		f.Close()
	}
	return 0, nil, fmt.Errorf("no free port pair in %d-%d", privatePortMin, ephemeralLow()-1)
}

// ephemeralLow returns the first port of the kernel's ephemeral range (32768 when unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 32768
	}
	return n
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func boolFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// waitGone waits until pid no longer runs (or is a zombie) or the timeout passes.
func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); err != nil || zombie(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
