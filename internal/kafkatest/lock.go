package kafkatest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// The real clusters are shared by every test binary that `go test ./...` runs in parallel,
// and some tests stop and restart brokers. So that a broker bounce in one package never
// breaks a test of another, a test that uses the clusters holds an exclusive lock on
// <workdir>/tests.lock (flock, so it spans processes) from its first call to [Brokers] until
// it ends. Tests of one binary run one after the other, so the lock is taken once per test
// and is reentrant within the process (subtests and a second cluster share it).
var clusterLock struct {
	mu    sync.Mutex
	f     *os.File
	users int
}

// holdClusters takes the cross-process cluster lock for the duration of t.
func holdClusters(t testing.TB) {
	t.Helper()
	clusterLock.mu.Lock()
	defer clusterLock.mu.Unlock()
	if clusterLock.users == 0 {
		dir := os.Getenv(EnvWorkdir)
		if dir == "" {
			dir = os.TempDir()
		}
		f, err := os.OpenFile(filepath.Join(dir, "tests.lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("kafkatest: cluster lock: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("kafkatest: cluster lock: %v", err)
		}
		clusterLock.f = f
	}
	clusterLock.users++
	t.Cleanup(releaseClusters)
}

func releaseClusters() {
	clusterLock.mu.Lock()
	defer clusterLock.mu.Unlock()
	clusterLock.users--
	if clusterLock.users > 0 {
		return
	}
	if err := syscall.Flock(int(clusterLock.f.Fd()), syscall.LOCK_UN); err != nil {
		fmt.Fprintf(os.Stderr, "kafkatest: release cluster lock: %v\n", err)
	}
	clusterLock.f.Close()
	clusterLock.f = nil
}
