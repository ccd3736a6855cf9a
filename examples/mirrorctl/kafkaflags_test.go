package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mirrorctl takes the flags the way Kafka's tools do.
func TestKafkaToolFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"--version"}, &out, &errOut))
	require.True(t, strings.HasPrefix(out.String(), "mirrorctl "), out.String())
	require.Empty(t, errOut.String())

	out.Reset()
	errOut.Reset()
	require.Equal(t, exitUsage, run([]string{"--no-such-flag"}, &out, &errOut))
	require.Contains(t, errOut.String(), "flag provided but not defined: -no-such-flag")
	require.Contains(t, errOut.String(), "Run 'mirrorctl --help' for usage.")
	require.NotContains(t, errOut.String(), "-command-config", "a short usage, not every flag")
	require.LessOrEqual(t, strings.Count(errOut.String(), "\n"), 4, errOut.String())

	out.Reset()
	errOut.Reset()
	require.Equal(t, exitUsage, run([]string{"--bootstrap-server", "x:1", "--pause", "--mirror", "m", "--topic", "a", "--topics", "b"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--topic and --topics")

	// --topic stands for --topics and --timeout takes milliseconds: the command passes
	// the checks and fails only on the server nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	out.Reset()
	errOut.Reset()
	require.Equal(t, exitError, run([]string{"--bootstrap-server", addr, "--pause", "--mirror", "m", "--topic", "a", "--timeout", "500"}, &out, &errOut), errOut.String())
	require.True(t, strings.HasPrefix(errOut.String(), "Error: "), errOut.String())

	for v, want := range map[string]time.Duration{"30000": 30 * time.Second, "1": time.Millisecond, "2s": 2 * time.Second, "1m30s": 90 * time.Second} {
		var d msDuration
		require.NoError(t, d.Set(v), v)
		require.Equal(t, want, time.Duration(d), v)
	}
	for _, bad := range []string{"abc", "-5", "10q", "99999999999999999"} {
		var d msDuration
		require.Error(t, d.Set(bad), bad)
	}
	out.Reset()
	errOut.Reset()
	require.Equal(t, exitUsage, run([]string{"--bootstrap-server", "x:1", "--list", "--timeout", "soon"}, &out, &errOut))
	require.Contains(t, errOut.String(), "neither milliseconds nor a duration")
}
