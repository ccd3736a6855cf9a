package mirror

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
)

// TestOptionDefaults: newOptions is the one place of the defaults; an option set to nil
// falls back to its default, and a bad FAILED retry is refused.
func TestOptionDefaults(t *testing.T) {
	o, err := newOptions(nil)
	require.NoError(t, err)
	require.NotNil(t, o.logger)
	require.NotNil(t, o.clock)
	require.NotNil(t, o.sources)
	require.NotNil(t, o.peers)
	require.Equal(t, DefaultRetryConfig(), o.retry)
	require.Equal(t, NopMetrics{}, o.ops.metrics)
	require.Equal(t, DefaultSourceUnreachableAfter, o.ops.unreachableAfter)

	o, err = newOptions([]Option{WithLogger(nil), WithMetrics(nil), WithFailedRetry(RetryConfig{}),
		WithSourceUnreachableAfter(0)})
	require.NoError(t, err)
	require.NotNil(t, o.logger)
	require.Equal(t, NopMetrics{}, o.ops.metrics)
	require.Zero(t, o.retry.MaxAttempts, "RetryConfig{} turns the retry off")
	require.Zero(t, o.ops.unreachableAfter)

	l := slog.New(slog.DiscardHandler)
	o, err = newOptions([]Option{WithLogger(l)})
	require.NoError(t, err)
	require.Same(t, l, o.logger)

	_, err = newOptions([]Option{WithFailedRetry(RetryConfig{Initial: time.Second, Max: time.Millisecond})})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// TestConfigValidateDoesNotChangeIt: Validate checks the fields as given; the defaults
// are applied by withDefaults to a copy.
func TestConfigValidateDoesNotChangeIt(t *testing.T) {
	cfg := Config{Destination: NewMemoryDestination("d", fetcher.MemoryLogOptions{})}
	before := cfg
	require.NoError(t, cfg.Validate())
	require.Equal(t, before, cfg)
	d := cfg.withDefaults()
	require.Equal(t, before, cfg, "withDefaults works on a copy")
	require.Equal(t, DefaultFetchersPerMirror, d.FetchersPerMirror)
	require.Equal(t, DefaultSyncInterval, d.SyncInterval)
	require.Equal(t, coordinator.Config{}.WithDefaults(), d.Coordinator)
	neg := Config{Destination: cfg.Destination, SyncInterval: -1}.withDefaults()
	require.Negative(t, neg.SyncInterval, "a negative SyncInterval (off) is kept")
}
