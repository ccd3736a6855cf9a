package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/mirror/controller"
)

// A mirror's mirror.failed.retry.* and mirror.metadata.refresh.interval.ms configs
// override the host's settings, each on its own; unset, the host's apply.
func TestMirrorRetryAndSyncSettings(t *testing.T) {
	h := newTraceHarness(t)
	host := h.e.cfg.Retry
	set := func(raw map[string]string) *Runtime {
		raw[controller.KeyBootstrapServers] = "127.0.0.1:1"
		cfg, err := controller.ParseMirrorConfig(raw)
		require.NoError(t, err)
		h.ctrl.setMirror(controller.MirrorInfo{Name: "m", Config: cfg})
		return h.e.EnsureMirror("m")
	}
	mr := set(map[string]string{})
	require.Equal(t, host, mr.retryConfig())
	require.Equal(t, 30*time.Second, mr.syncInterval(30*time.Second))

	mr = set(map[string]string{controller.KeyFailedRetryInitialBackoffMs: "50", controller.KeyFailedRetryMaxBackoffMs: "2000",
		controller.KeyFailedRetryMaxAttempts: "7", controller.KeyMetadataRefreshIntervalMs: "5000"})
	require.Equal(t, RetryConfig{Initial: 50 * time.Millisecond, Max: 2 * time.Second, MaxAttempts: 7}, mr.retryConfig())
	require.Equal(t, 5*time.Second, mr.syncInterval(30*time.Second))

	mr = set(map[string]string{controller.KeyFailedRetryMaxAttempts: "0", controller.KeyMetadataRefreshIntervalMs: "0"})
	require.Equal(t, RetryConfig{Initial: host.Initial, Max: host.Max, MaxAttempts: 0}, mr.retryConfig(), "0 attempts: no automatic retry")
	require.Equal(t, 30*time.Second, mr.syncInterval(30*time.Second), "0: the loop wakes at the host's interval and skips")

	mr = set(map[string]string{controller.KeyFailedRetryInitialBackoffMs: "9000"}) // above the host's Max
	require.Equal(t, RetryConfig{Initial: 9 * time.Second, Max: 9 * time.Second, MaxAttempts: host.MaxAttempts}, mr.retryConfig())
}
