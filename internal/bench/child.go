package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"time"
)

// ChildEnv is the environment variable that turns a run of the benchmark
// binary into a contender child process. Its value is a JSON childSpec.
const ChildEnv = "KMIRROR_BENCH_CHILD"

// resultPrefix starts the one stdout line carrying a child's JSON result.
const resultPrefix = "KMIRROR_BENCH_RESULT "

// childSpec tells a child process what to copy.
type childSpec struct {
	Contender     string   `json:"contender"`
	SourceBrokers []string `json:"source_brokers"`
	DestBrokers   []string `json:"dest_brokers,omitempty"`
	Topic         string   `json:"topic"`
	DestTopic     string   `json:"dest_topic,omitempty"`
	// EndOffsets are the source end offsets per partition: the copy is done
	// when every partition reached its end offset.
	EndOffsets []int64 `json:"end_offsets"`
	Dir        string  `json:"dir,omitempty"`
	TimeoutMS  int64   `json:"timeout_ms"`
	// NoFsync makes the kmirror contender use FsyncNever instead of
	// FsyncOnFlush (a diagnostic: the final Flush then writes no data).
	NoFsync bool `json:"no_fsync,omitempty"`
	// CPUProfile, when set, is a file the child writes a pprof CPU profile to.
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// startProfile starts a CPU profile into path ("" = none) and returns the stop function.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// childResult is what a child reports on stdout.
type childResult struct {
	// Bytes are the record-batch bytes the contender fetched (raw, kmirror)
	// or the value bytes it produced (sarama).
	Bytes   int64 `json:"bytes"`
	Records int64 `json:"records"`
	// CopyNanos runs from the first fetch request to the end of the copy
	// (after the final Flush for kmirror, the last ack for sarama).
	CopyNanos int64  `json:"copy_nanos"`
	Usage     Usage  `json:"usage"`
	Err       string `json:"error,omitempty"`
}

// MaybeChild runs the contender named by the ChildEnv environment variable and
// exits the process, or returns at once when the variable is unset. Call it
// first thing in main (and in TestMain of tests that run Run).
func MaybeChild() {
	spec := os.Getenv(ChildEnv)
	if spec == "" {
		return
	}
	os.Exit(runChild(spec, os.Stdout))
}

func runChild(specJSON string, out io.Writer) int {
	var spec childSpec
	res := childResult{}
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		res.Err = fmt.Sprintf("bench: bad %s: %v", ChildEnv, err)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(spec.TimeoutMS)*time.Millisecond)
		stopProfile, err := startProfile(spec.CPUProfile)
		var r childResult
		if err == nil {
			r, err = runContender(ctx, spec)
			stopProfile()
		}
		cancel()
		res = r
		if err != nil {
			res.Err = err.Error()
		}
	}
	u, err := selfUsage()
	res.Usage = u
	if err != nil && res.Err == "" {
		res.Err = err.Error()
	}
	line, _ := json.Marshal(res)
	fmt.Fprintf(out, "%s%s\n", resultPrefix, line)
	if res.Err != "" {
		return 1
	}
	return 0
}

func runContender(ctx context.Context, spec childSpec) (childResult, error) {
	switch spec.Contender {
	case ContenderRaw:
		return runRaw(ctx, spec)
	case ContenderKmirror:
		return runKmirror(ctx, spec)
	case ContenderSarama:
		return runSarama(ctx, spec)
	}
	return childResult{}, fmt.Errorf("%w: contender %q cannot run as a Go child", ErrConfig, spec.Contender)
}

// spawnChild re-executes exe as a child for spec and returns its result and
// the child's wall time as seen by the parent.
func spawnChild(ctx context.Context, exe string, spec childSpec, logw io.Writer) (childResult, time.Duration, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return childResult{}, 0, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(data))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = logw
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	var res childResult
	found := false
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			if err := json.Unmarshal([]byte(rest), &res); err != nil {
				return res, wall, fmt.Errorf("bench: %s child: bad result line: %w", spec.Contender, err)
			}
			found = true
		}
	}
	switch {
	case !found && runErr != nil:
		return res, wall, fmt.Errorf("bench: %s child: %w", spec.Contender, runErr)
	case !found:
		return res, wall, fmt.Errorf("bench: %s child printed no result", spec.Contender)
	case res.Err != "":
		return res, wall, fmt.Errorf("bench: %s child: %s", spec.Contender, res.Err)
	}
	return res, wall, nil
}
