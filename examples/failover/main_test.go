package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFailover runs the example end to end: run itself checks the truncation
// offsets and the byte equality; the test checks the report's shape.
func TestFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out), "output so far:\n%s", out.String())
	text := out.String()
	t.Log("\n" + text)
	require.Equal(t, partitions, strings.Count(text, "MIRROR_PID_RESET at offset 45"))
	require.Equal(t, partitions, strings.Count(text, "A truncated at 54 then 45"))
	require.Equal(t, partitions, strings.Count(text, "bytes identical"))
	require.Contains(t, text, "verdict: A and B are IDENTICAL")
	require.Contains(t, text, `failback complete: "b-to-a" STOPPED on A`)
}
