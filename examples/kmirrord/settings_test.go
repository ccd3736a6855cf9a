package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/dataplane"
)

// The metadata sync interval and the FAILED retry are flags with the prototype's names.
func TestSettingsFlags(t *testing.T) {
	dir := t.TempDir()
	base := []string{"-listen", "127.0.0.1:0", "-data", dir}
	o, err := parseFlags(base, io.Discard)
	require.NoError(t, err)
	require.Equal(t, mirror.DefaultSyncInterval, o.syncInterval)
	require.Equal(t, mirror.DefaultRetryConfig(), o.retry)
	require.Equal(t, mirror.DefaultSourceUnreachableAfter, o.unreachable)

	o, err = parseFlags(append(base, "-mirror.metadata.refresh.interval.ms", "60000",
		"-mirror.failed.retry.initial.backoff.ms", "100", "-mirror.failed.retry.max.backoff.ms", "60000",
		"-mirror.failed.retry.max.attempts", "20", "-source-unreachable-after", "2s"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, o.unreachable)
	require.Equal(t, time.Minute, o.syncInterval)
	require.Equal(t, mirror.RetryConfig{Initial: 100 * time.Millisecond, Max: time.Minute, MaxAttempts: 20}, o.retry)

	o, err = parseFlags(append(base, "-mirror.metadata.refresh.interval.ms", "0", "-mirror.failed.retry.max.attempts", "0"), io.Discard)
	require.NoError(t, err)
	require.Negative(t, o.syncInterval, "0 turns the sync off")
	require.Equal(t, 0, o.retry.MaxAttempts)

	for _, bad := range [][]string{
		{"-mirror.metadata.refresh.interval.ms", "-5"},
		{"-mirror.metadata.refresh.interval.ms", "1000", "-sync-interval", "1s"},
		{"-mirror.failed.retry.initial.backoff.ms", "0"},
		{"-mirror.failed.retry.initial.backoff.ms", "5000", "-mirror.failed.retry.max.backoff.ms", "1000"},
		{"-mirror.failed.retry.max.attempts", "40000"},
		{"-mirror.failed.retry.max.attempts", "-1"},
		{"-source-unreachable-after", "-1s"},
	} {
		code, out := runOnce(append(append([]string(nil), base...), bad...)...)
		require.Equal(t, exitUsage, code, "%v: %s", bad, out)
	}
}

// -group.rejoin.grace.ms sets the data plane's GroupRejoinGrace: Kafka's session
// timeout by default, 0 none (negative for the data plane), a negative value refused.
func TestGroupRejoinGraceFlag(t *testing.T) {
	base := []string{"-listen", "127.0.0.1:0", "-data", t.TempDir()}
	o, err := parseFlags(base, io.Discard)
	require.NoError(t, err)
	require.Equal(t, dataplane.DefaultGroupRejoinGrace, o.groupRejoinGrace)
	o, err = parseFlags(append(base, "-group.rejoin.grace.ms", "1500"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, o.groupRejoinGrace)
	o, err = parseFlags(append(base, "-group.rejoin.grace.ms", "0"), io.Discard)
	require.NoError(t, err)
	require.Negative(t, o.groupRejoinGrace, "0: no grace")
	code, out := runOnce(append(base, "-group.rejoin.grace.ms", "-1")...)
	require.Equal(t, exitUsage, code, out)
}

// -fetch-session-cache-slots sizes the data plane's session cache; 0 turns
// sessions off, a negative count is refused.
func TestFetchSessionSlotsFlag(t *testing.T) {
	base := []string{"-listen", "127.0.0.1:0", "-data", t.TempDir()}
	o, err := parseFlags(base, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1000, sessionSlots(o.fetchSessionSlots))
	o, err = parseFlags(append(base, "-fetch-session-cache-slots", "7"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, 7, sessionSlots(o.fetchSessionSlots))
	o, err = parseFlags(append(base, "-fetch-session-cache-slots", "0"), io.Discard)
	require.NoError(t, err)
	require.Negative(t, sessionSlots(o.fetchSessionSlots), "off")
	_, err = parseFlags(append(base, "-fetch-session-cache-slots", "-1"), io.Discard)
	require.Error(t, err)
}

// -active-reconcilers bounds the reconcilers that run at once; it must be positive.
func TestActiveReconcilersFlag(t *testing.T) {
	base := []string{"-listen", "127.0.0.1:0", "-data", t.TempDir()}
	o, err := parseFlags(base, io.Discard)
	require.NoError(t, err)
	require.Equal(t, mirror.DefaultActiveReconcilers, o.activeReconcilers)
	o, err = parseFlags(append(base, "-active-reconcilers", "64"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, 64, o.activeReconcilers)
	for _, bad := range []string{"0", "-1"} {
		_, err = parseFlags(append(base, "-active-reconcilers", bad), io.Discard)
		require.Error(t, err, bad)
	}
}
