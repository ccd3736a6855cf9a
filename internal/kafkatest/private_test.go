package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPrivateCluster drives one private cluster through everything a test may do to it: the
// data written before a SIGKILL is served after Start; while frozen the port accepts
// connections but no request is answered, and after Thaw it answers again; after the test the
// node is gone and its work directory removed (checked by a subtest's cleanup order).
func TestPrivateCluster(t *testing.T) {
	var workdir string
	var pidAfter int
	t.Run("lifecycle", func(t *testing.T) {
		p := StartPrivate(t, PrivateOptions{})
		workdir = p.Workdir()
		require.DirExists(t, p.DataDir())
		cl := NewClient(t, p.Brokers(), kgo.RequestTimeoutOverhead(2*time.Second), kgo.RetryTimeout(5*time.Second))
		topic := TopicName(t)
		CreateTopic(t, cl, topic, 1, 1, nil)
		produce := func(v string) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr())
		}
		produce("before-kill")

		p.Kill()
		conn, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err == nil {
			conn.Close()
		}
		require.Error(t, err, "a killed node's port must refuse connections")
		p.Start()
		produce("after-restart")
		require.Equal(t, []string{"before-kill", "after-restart"}, consumeAll(t, p.Brokers(), topic, 2))

		p.Freeze()
		conn, err = net.DialTimeout("tcp", p.Addr(), time.Second)
		require.NoError(t, err, "a frozen node's listening socket still completes handshakes")
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		req := kmsg.NewPtrApiVersionsRequest()
		_, err = req.RequestWith(ctx, cl)
		cancel()
		require.Error(t, err, "a frozen node must not answer")
		require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err), "want a timeout, got %v", err)
		p.Thaw()
		produce("after-thaw")
		require.Equal(t, []string{"before-kill", "after-restart", "after-thaw"}, consumeAll(t, p.Brokers(), topic, 3))
		pidAfter, _ = p.pid()
		require.NotZero(t, pidAfter)
	})
	require.NoDirExists(t, workdir, "the work directory is removed when the test ends")
	require.True(t, waitGone(pidAfter, 5*time.Second), "the node is stopped when the test ends")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// consumeAll reads want records of topic from offset 0 and returns their values.
func consumeAll(t *testing.T, brokers []string, topic string, want int) []string {
	t.Helper()
	cl := NewClient(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: got %d of %d records: %v", topic, len(out), want, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	cl.Close()
	return out
}

// TestReservePortsExclusive checks that two reservations never share a base port and that
// closing one frees it for the next.
func TestReservePortsExclusive(t *testing.T) {
	seen := map[int]bool{}
	var files []*os.File
	for i := 0; i < 5; i++ {
		base, f, err := reservePorts()
		require.NoError(t, err)
		require.False(t, seen[base], "base %d reserved twice", base)
		require.GreaterOrEqual(t, base+privateClientOffset, 20000)
		require.Less(t, base+privateControllerOffset, ephemeralLow(), "below the ephemeral range")
		seen[base] = true
		files = append(files, f)
	}
	for _, f := range files {
		f.Close()
	}
	// A port another program listens on is never handed out.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	require.False(t, portFree(l.Addr().(*net.TCPAddr).Port), fmt.Sprintf("port %v is in use", l.Addr()))
}
