package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// Usage is the resource use of one contender process.
type Usage struct {
	// CPUSeconds is user + system CPU time of the process.
	CPUSeconds float64 `json:"cpu_seconds"`
	// UserSeconds and SysSeconds split CPUSeconds.
	UserSeconds float64 `json:"user_seconds"`
	SysSeconds  float64 `json:"sys_seconds"`
	// PeakRSSKiB is VmHWM from /proc/<pid>/status.
	PeakRSSKiB int64 `json:"peak_rss_kib"`
}

// selfUsage returns the calling process's CPU time (getrusage) and VmHWM.
func selfUsage() (Usage, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}, fmt.Errorf("bench: getrusage: %w", err)
	}
	u := Usage{
		UserSeconds: time.Duration(ru.Utime.Nano()).Seconds(),
		SysSeconds:  time.Duration(ru.Stime.Nano()).Seconds(),
	}
	u.CPUSeconds = u.UserSeconds + u.SysSeconds
	hwm, err := vmHWM("self")
	if err != nil {
		return u, err
	}
	u.PeakRSSKiB = hwm
	return u, nil
}

// pidUsage reads CPU time and VmHWM of a running process from /proc.
func pidUsage(pid int) (Usage, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("bench: read stat: %w", err)
	}
	// The command name (field 2) may hold spaces; fields after the last ')' are fixed.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// After ')': state(3) ... utime is field 14, stime 15 (1-based), i.e. f[11], f[12].
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("bench: short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("bench: bad utime/stime in /proc/%d/stat", pid)
	}
	u := Usage{UserSeconds: float64(ut) / clockTicks, SysSeconds: float64(st) / clockTicks}
	u.CPUSeconds = u.UserSeconds + u.SysSeconds
	hwm, err := vmHWM(strconv.Itoa(pid))
	if err != nil {
		return u, err
	}
	u.PeakRSSKiB = hwm
	return u, nil
}

// vmHWM returns VmHWM (peak resident set) in KiB of /proc/<pid>.
func vmHWM(pid string) (int64, error) {
	v, err := procField("/proc/"+pid+"/status", "VmHWM:")
	if err != nil {
		return 0, err
	}
	return v, nil
}

// procField returns the first integer after key in a /proc "Key: value kB" file.
func procField(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, key); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			n, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bench: %s %s: %w", path, key, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("bench: %s: no %s", path, key)
}

// Machine describes the host the benchmark ran on.
type Machine struct {
	NumCPU      int    `json:"nproc"`
	CPUModel    string `json:"cpu_model"`
	MemTotalMiB int64  `json:"mem_total_mib"`
	GoVersion   string `json:"go_version"`
	OS          string `json:"os"`
}

func machineInfo() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if kb, err := procField("/proc/meminfo", "MemTotal:"); err == nil {
		m.MemTotalMiB = kb / 1024
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAvg returns the 1-minute load average from /proc/loadavg (-1 if unknown).
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
