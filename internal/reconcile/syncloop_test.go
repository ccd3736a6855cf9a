package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/localdest"
	"github.com/kmirror/kmirror/mirror/metasync"
)

// emptyAdmin is a source with nothing on it.
type emptyAdmin struct{}

func (emptyAdmin) ClusterID(context.Context) (string, error)                  { return "src", nil }
func (emptyAdmin) ListTopics(context.Context) ([]metasync.SourceTopic, error) { return nil, nil }
func (emptyAdmin) TopicConfigs(context.Context, []string) (map[string]map[string]string, error) {
	return map[string]map[string]string{}, nil
}
func (emptyAdmin) ListGroups(context.Context) ([]string, error) { return nil, nil }
func (emptyAdmin) GroupOffsets(context.Context, string) (map[dest.TopicPartition]int64, error) {
	return nil, nil
}
func (emptyAdmin) Close() error { return nil }

// lines is a slog handler keeping each record's message and attributes; it signals
// on when a record contains want.
type lines struct {
	mu   sync.Mutex
	recs []string
	want string
	on   chan struct{}
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	l.mu.Lock()
	l.recs = append(l.recs, line)
	l.mu.Unlock()
	if strings.Contains(line, l.want) {
		select {
		case l.on <- struct{}{}:
		default:
		}
	}
	return nil
}
func (l *lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lines) WithGroup(string) slog.Handler      { return l }
func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if strings.Contains(r, s) {
			n++
		}
	}
	return n
}

// Failed sync cycles are logged at the first failure and when cycles succeed again,
// with the number of failed cycles, not once per cycle.
func TestSyncLoopLogsFailuresAtStartAndEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	coord, err := coordinator.New(coordinator.Config{}.WithDefaults(), coordinator.NewMemoryStore())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, coord.Close()) })
	ctl, err := controller.OpenController(ctx, &controller.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{controller.KeyBootstrapServers: "127.0.0.1:1"}))
	dst := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	logs := &lines{want: "sync cycles succeed again", on: make(chan struct{}, 1)}
	var calls atomic.Int32
	e, err := New(Deps{Coordinator: coord, Destination: dst, Controller: ctl,
		Sources: func(string, controller.MirrorConfig) (fetcher.Source, metasync.SourceAdmin, error) {
			return &silentSource{}, emptyAdmin{}, nil
		},
		Peers: func(string, controller.MirrorConfig) (PeerView, error) { return nil, nil },
		NewSyncer: func(name string, sa metasync.SourceAdmin) (*metasync.Syncer, error) {
			if calls.Add(1) <= 4 {
				return nil, errors.New("source down")
			}
			return metasync.NewSyncer(metasync.SyncConfig{Mirror: name, Controller: ctl, Source: sa, Destination: dst})
		},
		Logger: slog.New(logs),
		Config: Config{FetchersPerMirror: 1, SyncInterval: time.Millisecond, Retry: RetryConfig{Initial: 1, Max: 1, MaxAttempts: 1}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	e.EnsureMirror("m")
	select {
	case <-logs.on:
	case <-ctx.Done():
		t.Fatalf("no recovery logged: %v", logs.recs)
	}
	require.Equal(t, 1, logs.count("sync cycle failed"), "%v", logs.recs)
	require.Equal(t, 1, logs.count("failed_cycles=4"), "%v", logs.recs)
}
