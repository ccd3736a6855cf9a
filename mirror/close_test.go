package mirror

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// TestCloseDoesNotWaitForLongPolls mirrors three topics (three fetch loops sharing
// one source, one fetch in flight per broker) from an idle source whose fetches long-poll
// for a minute. Close cancels every loop's fetch at once: it returns well before one long
// poll could end. Closing the loops one after the other made each Close wait for the
// long poll of a loop not yet told to stop (shutdown took about one fetch.wait.max.ms per
// fetch loop: 10 s for 8 topics at the 1 s default).
func TestCloseDoesNotWaitForLongPolls(t *testing.T) {
	ctx := testCtx(t)
	topics := []string{"a", "b", "c"}
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, topics...))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	fetches := make(chan struct{}, 1024)
	src.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		select {
		case fetches <- struct{}{}:
		default:
		}
		return nil, nil, false // served by kfake: a long poll on an idle log
	})
	dest := NewMemoryDestination("dest", fetcher.MemoryLogOptions{})
	t.Cleanup(func() { _ = dest.Close() })
	m, err := New(Config{Destination: dest, SyncInterval: -1})
	require.NoError(t, err)
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "60000"}))
	for _, topic := range topics {
		mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{topic}, StartOptions{}))
	}
	require.NoError(t, m.WaitForStates(ctx, "k", topics, statemachine.Mirroring))
	// A long poll is in flight (one per broker at a time); the other loops' fetches
	// wait behind it.
	select {
	case <-fetches:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}

	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(15 * time.Second): // a quarter of a long poll: a Close that waited for one
		t.Fatal("Close waited for the fetch loops' long polls")
	}
}
