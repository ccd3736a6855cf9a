package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// scaleSite is one kmirrord process of the scale benchmark: its data
// directory, log file and, once started, its address and pid.
type scaleSite struct {
	name, bin, dir string
	extra          []string // more kmirrord flags
	profile        string   // -cpuprofile file of the current run ("" none)
	cmd            *exec.Cmd
	exited         chan struct{}
	addr           string
	metricsAddr    string // the -metrics endpoint of the current run
	started        time.Time
	// peakKiB is the largest VmHWM seen over every run of the site.
	peakKiB int64
}

// errSiteExited is returned when kmirrord ends before it listens.
var errSiteExited = errors.New("bench: kmirrord exited before listening")

// start runs kmirrord (appending its log to dir/kmirrord.log) and returns
// once it logged "kmirrord listening", with the time that took from exec.
func (s *scaleSite) start(ctx context.Context, port string, profile string) (time.Duration, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	logFile, err := os.OpenFile(filepath.Join(filepath.Dir(s.dir), s.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	args := []string{"-listen", "127.0.0.1:" + port, "-data", s.dir, "-cluster-id", "scale-" + s.name, "-log-format", "json",
		"-metrics", "127.0.0.1:0"}
	args = append(args, s.extra...)
	if profile != "" {
		// and the heap as the site is told to stop (its live partitions' memory)
		args = append(args, "-cpuprofile", profile, "-memprofile", strings.TrimSuffix(profile, ".pprof")+"-heap.pprof")
	}
	s.profile = profile
	cmd := exec.Command(s.bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return 0, fmt.Errorf("bench: %w", err)
	}
	s.started = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return 0, fmt.Errorf("bench: start kmirrord: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	listening, metrics := make(chan string, 1), make(chan string, 1)
	go func() {
		defer close(s.exited)
		defer logFile.Close()
		sc := bufio.NewScanner(io.TeeReader(stderr, logFile))
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "kmirrord metrics" {
				metrics <- l.Addr
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "kmirrord listening" {
				select {
				case listening <- l.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(logFile, stderr)
		_ = cmd.Wait()
	}()
	select {
	case s.addr = <-listening:
		select {
		case s.metricsAddr = <-metrics: // logged before listening
		default:
			s.metricsAddr = ""
		}
		return time.Since(s.started), nil
	case <-s.exited:
		return 0, fmt.Errorf("%w (%s, see %s.log)", errSiteExited, s.name, s.name)
	case <-ctx.Done():
		s.kill()
		return 0, fmt.Errorf("bench: %s not listening: %w", s.name, ctx.Err())
	}
}

// sample records the process's VmHWM into peakKiB.
func (s *scaleSite) sample() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	if u, err := pidUsage(s.cmd.Process.Pid); err == nil {
		s.peakKiB = max(s.peakKiB, u.PeakRSSKiB)
	}
}

// usage returns the process's CPU time and VmHWM.
func (s *scaleSite) usage() (Usage, error) { return pidUsage(s.cmd.Process.Pid) }

// fds counts the open descriptors of the process.
func (s *scaleSite) fds() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// stop sends SIGTERM and waits up to grace for the exit (then kills).
func (s *scaleSite) stop(grace time.Duration) {
	if s.cmd == nil {
		return
	}
	s.sample()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(grace):
		s.kill()
	}
	s.cmd = nil
}

func (s *scaleSite) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// client returns a kgo client for the site's address that can send the
// mirror RPCs.
func (s *scaleSite) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return newClient([]string{s.addr}, append(admin.ClientOpts(), opts...)...)
}

// partitionCounts is what one describe saw over every partition of a mirror.
type partitionCounts struct {
	total, inState, lagZero, withData int
	failed                            int
	firstError                        string
	// unreachable counts the partitions whose describe shows their source
	// unreachable (SourceErrorCode) or that are FAILED; freshLagZero those
	// at lag 0 whose source offset was read at or after freshSince.
	unreachable, freshLagZero int
	// atTwo counts the MIRRORING partitions whose destination and source
	// offsets are both 2, overTwo the partitions whose destination offset is
	// above 2 (with two records produced: one copied twice).
	atTwo, overTwo int
}

// describeCounts describes mirror and counts the partitions in state want,
// those whose destination offset equals the source's (lag 0; only counted
// for MIRRORING partitions), and those with a destination offset above 0.
// topics, when not nil, restricts the count to those topics.
func describeCounts(ctx context.Context, cl *admin.Client, mirror string, want statemachine.State, topics map[string]bool) (partitionCounts, error) {
	return describeCountsSince(ctx, cl, mirror, want, topics, time.Time{})
}

// describeCountsSince is describeCounts that also counts freshLagZero: the
// partitions at lag 0 whose source offset was read at or after since.
func describeCountsSince(ctx context.Context, cl *admin.Client, mirror string, want statemachine.State, topics map[string]bool, since time.Time) (partitionCounts, error) {
	req := admin.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{mirror}
	req.IncludeMirrorStates, req.IncludeMirrorLags = true, true
	req.TimeoutMs = 60_000
	resp, err := cl.DescribeClusterMirrors(ctx, req)
	if err != nil {
		return partitionCounts{}, fmt.Errorf("bench: describe %s: %w", mirror, err)
	}
	var c partitionCounts
	for _, m := range resp.Mirrors {
		if m.ErrorCode != 0 {
			return c, fmt.Errorf("bench: describe %s: %w", mirror, admin.ErrorFromResponse(m.ErrorCode, m.ErrorMessage))
		}
		for _, t := range m.Topics {
			if topics != nil && !topics[t.TopicName] {
				continue
			}
			for _, p := range t.Partitions {
				c.total++
				st := statemachine.State(p.State)
				if st == want {
					c.inState++
					if st == statemachine.Mirroring && p.SourceOffset >= 0 && p.DestinationOffset == p.SourceOffset {
						c.lagZero++
						if p.SourceOffsetTimestamp >= since.UnixMilli() {
							c.freshLagZero++
						}
						if p.SourceOffset == 2 {
							c.atTwo++
						}
					}
				}
				if p.DestinationOffset > 2 {
					c.overTwo++
				}
				if st == statemachine.Failed || p.SourceErrorCode != 0 {
					c.unreachable++
				}
				if st == statemachine.Failed {
					c.failed++
					if c.firstError == "" && p.ErrorMessage != nil {
						c.firstError = fmt.Sprintf("%s-%d: %s", t.TopicName, p.PartitionIndex, *p.ErrorMessage)
					}
				}
				if p.DestinationOffset > 0 {
					c.withData++
				}
			}
		}
	}
	return c, nil
}

// waitCounts polls describeCounts every poll until done holds for the counts
// (or ctx ends) and returns the time it took from since and the last counts.
// sample is called at every poll (RSS sampling).
func waitCounts(ctx context.Context, cl *admin.Client, mirror string, want statemachine.State, topics map[string]bool,
	poll time.Duration, since time.Time, sample func(), progress func(string, ...any), done func(partitionCounts) bool) (time.Duration, partitionCounts, error) {
	return waitCountsFresh(ctx, cl, mirror, want, topics, time.Time{}, poll, since, sample, progress, done)
}

// waitCountsFresh is waitCounts whose counts hold freshLagZero since fresh.
func waitCountsFresh(ctx context.Context, cl *admin.Client, mirror string, want statemachine.State, topics map[string]bool, fresh time.Time,
	poll time.Duration, since time.Time, sample func(), progress func(string, ...any), done func(partitionCounts) bool) (time.Duration, partitionCounts, error) {
	var last partitionCounts
	var logged time.Time
	for {
		asked := time.Now()
		c, err := describeCountsSince(ctx, cl, mirror, want, topics, fresh)
		if sample != nil {
			sample()
		}
		if err != nil && progress != nil && time.Since(logged) >= 2*time.Second {
			// A describe that fails, or answers late, shows in the log: the counts between
			// two progress lines are then older than the poll interval says.
			logged = time.Now()
			progress("%.1fs: describe failed after %.1fs: %v", time.Since(since).Seconds(), time.Since(asked).Seconds(), err)
		}
		if err == nil && progress != nil && time.Since(asked) >= 5*time.Second {
			progress("%.1fs: describe answered in %.1fs", time.Since(since).Seconds(), time.Since(asked).Seconds())
		}
		if err == nil {
			last = c
			if progress != nil && time.Since(logged) >= 2*time.Second {
				logged = time.Now()
				progress("%.1fs: %d of %d partitions %s, %d at lag 0", time.Since(since).Seconds(), c.inState, c.total, want, c.lagZero)
			}
			if done(c) {
				return time.Since(since), c, nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Since(since), last, fmt.Errorf("bench: mirror %s: %d of %d partitions %s (lag 0: %d, failed: %d %s): %w",
				mirror, last.inState, last.total, want, last.lagZero, last.failed, last.firstError, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// portOf returns the port of a host:port address ("0" when it has none).
func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			if _, err := strconv.Atoi(addr[i+1:]); err == nil {
				return addr[i+1:]
			}
			break
		}
	}
	return "0"
}

// syncSample guards a site's peak sampling across goroutines.
type syncSample struct {
	mu    sync.Mutex
	sites []*scaleSite
}

func (s *syncSample) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, site := range s.sites {
		site.sample()
	}
}
