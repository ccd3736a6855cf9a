package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQuickstart runs the example end to end and checks the shape of its report.
func TestQuickstart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out), "output so far:\n%s", out.String())
	text := out.String()
	t.Log("\n" + text)
	require.Contains(t, text, "caught up: lag 0")
	require.Contains(t, text, "verdict: destination is IDENTICAL to the source")
	require.Equal(t, partitions, strings.Count(text, "bytes identical"))
	require.Equal(t, partitions, strings.Count(text, "MIRROR_PID_RESET at offset"))
	require.Equal(t, partitions, strings.Count(text, "read-only=false"))
	require.Contains(t, text, "client write while MIRRORING refused: READ_ONLY_TOPIC")
	require.Equal(t, partitions, strings.Count(text, "client write accepted at offset"))
	require.Regexp(t, `(?m)^MIRROR\s+TOPIC\s+PARTITION\s+STATE\s+SOURCE-OFFSET\s+DESTINATION-OFFSET\s+LAG\s+LAST-MIRROR-EPOCH$`, text)
	require.Regexp(t, `(?m)^quickstart\s+orders\s+0\s+STOPPED\s+`, text)
	require.Contains(t, text, "done: the mirror copied every byte")
}
