package localdest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
)

// TestProducerIDBlocksRestart: blocks follow one another inside the
// destination's range, and a reopened file destination continues after the
// last block handed out, never inside it.
func TestProducerIDBlocksRestart(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	first, limit := dest.LocalProducerIDRange("dst")
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	var blocks []dest.ProducerIDBlock
	for i := 0; i < 3; i++ {
		b, err := d.AllocateProducerIDs(ctx)
		require.NoError(t, err)
		blocks = append(blocks, b)
	}
	require.Equal(t, []dest.ProducerIDBlock{{First: first, Size: 1000}, {First: first + 1000, Size: 1000}, {First: first + 2000, Size: 1000}}, blocks)
	require.NoError(t, d.Close())
	_, err = d.AllocateProducerIDs(ctx)
	require.ErrorIs(t, err, fetcher.ErrClosed)

	d, err = OpenFile(root, "", fetcher.FileLogOptions{}) // the stored range (and cluster id) wins
	require.NoError(t, err)
	b, err := d.AllocateProducerIDs(ctx)
	require.NoError(t, err)
	require.Equal(t, dest.ProducerIDBlock{First: first + 3000, Size: 1000}, b)
	require.Less(t, b.First+b.Size, limit)
	require.NoError(t, d.Close())

	// A corrupt or inconsistent state file fails the open; nothing is guessed.
	for _, bad := range []string{`{"first":10,"limit":5,"next":7}`, `{"first":`} {
		require.NoError(t, os.WriteFile(filepath.Join(root, producerIDsFile), []byte(bad), 0o600))
		_, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
		require.ErrorContains(t, err, "corrupt")
	}

	// A canceled context reserves nothing.
	m := NewMemory("dst", fetcher.MemoryLogOptions{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.AllocateProducerIDs(cctx)
	require.ErrorIs(t, err, context.Canceled)
	b, err = m.AllocateProducerIDs(ctx)
	require.NoError(t, err)
	require.Equal(t, first, b.First)
}

// TestProducerIDBlocksExhausted: a range without room for a block refuses
// with ErrProducerIDsExhausted and hands out nothing.
func TestProducerIDBlocksExhausted(t *testing.T) {
	root := t.TempDir()
	state := producerIDs{First: 100, Limit: 2100, Next: 100}
	require.NoError(t, writeJSON(root, producerIDsFile, state))
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	for _, want := range []int64{100, 1100} {
		b, err := d.AllocateProducerIDs(context.Background())
		require.NoError(t, err)
		require.Equal(t, want, b.First)
	}
	_, err = d.AllocateProducerIDs(context.Background())
	require.ErrorIs(t, err, dest.ErrProducerIDsExhausted)
}

// TestProducerIDBlocksKill9: a child process allocates blocks as fast as it
// can and reports each one after AllocateProducerIDs returns; it is killed
// with SIGKILL. The reopened destination's next block starts after every
// block the child reported: a block is durable before any of its ids is
// handed out.
func TestProducerIDBlocksKill9(t *testing.T) {
	if root := os.Getenv("KMIRROR_PID_CHILD"); root != "" {
		d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for {
			b, err := d.AllocateProducerIDs(context.Background())
			if err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			fmt.Println("block", b.First)
		}
	}
	root := t.TempDir()
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestProducerIDBlocksKill9$")
		cmd.Env = append(os.Environ(), "KMIRROR_PID_CHILD="+root)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		var last int64 = -1
		for n := 0; n < 20+round*7 && sc.Scan(); n++ {
			f := strings.Fields(sc.Text())
			require.Len(t, f, 2, "child said %q", sc.Text())
			require.Equal(t, "block", f[0], "child said %q", sc.Text())
			last, err = strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		require.GreaterOrEqual(t, last, int64(0), "the child reported no block")

		d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
		require.NoError(t, err)
		b, err := d.AllocateProducerIDs(context.Background())
		require.NoError(t, err)
		require.GreaterOrEqual(t, b.First, last+dest.ProducerIDBlockSize, "round %d: a block the child handed out is handed out again", round)
		require.NoError(t, d.Close())
	}
}
