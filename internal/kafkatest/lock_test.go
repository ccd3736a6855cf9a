package kafkatest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClusterLockIsExclusiveAndReentrant: while a test holds the clusters, another open file
// description (as another test binary would have) cannot take the lock; the holder can take
// it again (a second cluster, a subtest); after the test it is free.
func TestClusterLockIsExclusiveAndReentrant(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvWorkdir, dir)
	tryLock := func() error {
		f, err := os.OpenFile(filepath.Join(dir, "tests.lock"), os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		defer f.Close()
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))
		}
		return err
	}
	f := &fakeTB{}
	f.run(func(tb testing.TB) {
		holdClusters(tb)
		holdClusters(tb) // reentrant: must not deadlock
		require.ErrorIs(t, tryLock(), syscall.EWOULDBLOCK)
	})
	require.NoError(t, tryLock(), "released when the test ends")
}
