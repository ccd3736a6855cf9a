package logsample

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder keeps the records logged through it.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) snapshot() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.recs...)
}

func attrs(rec slog.Record) map[string]slog.Value {
	out := map[string]slog.Value{}
	rec.Attrs(func(a slog.Attr) bool { out[a.Key] = a.Value; return true })
	return out
}

// A burst per key goes through; the rest of the interval is one summary
// line with the count and the first suppressed line's attributes; keys are
// independent, and a later interval logs again.
func TestSamplerBoundsLinesPerKey(t *testing.T) {
	rec := &recorder{}
	s := New(slog.New(rec), 3, 200*time.Millisecond)
	ctx := context.Background()
	for i := range 1000 {
		s.Log(ctx, slog.LevelWarn, "a", "partition FAILED", "partition", i)
	}
	s.Log(ctx, slog.LevelError, "b", "other", "n", 1)
	got := rec.snapshot()
	require.Len(t, got, 4, "three of key a and the one of key b, the rest held")
	for i, r := range got[:3] {
		require.Equal(t, "partition FAILED", r.Message)
		require.Equal(t, int64(i), attrs(r)["partition"].Int64())
	}
	require.Eventually(t, func() bool { return len(rec.snapshot()) == 5 }, 5*time.Second, 10*time.Millisecond)
	sum := rec.snapshot()[4]
	require.Equal(t, slog.LevelWarn, sum.Level)
	require.Contains(t, sum.Message, "partition FAILED")
	a := attrs(sum)
	require.Equal(t, int64(997), a["suppressed"].Int64())
	first := a["first"].Group()
	require.Len(t, first, 1)
	require.Equal(t, int64(3), first[0].Value.Int64(), "the first suppressed line")

	time.Sleep(250 * time.Millisecond)
	s.Log(ctx, slog.LevelWarn, "a", "partition FAILED", "partition", 2000)
	require.Len(t, rec.snapshot(), 6, "a new interval logs again")
}

// Close logs the summaries under way at once.
func TestSamplerCloseFlushes(t *testing.T) {
	rec := &recorder{}
	s := New(slog.New(rec), 1, time.Hour)
	for i := range 5 {
		s.Log(context.Background(), slog.LevelInfo, "k", "m", "i", i)
	}
	require.Len(t, rec.snapshot(), 1)
	s.Close()
	got := rec.snapshot()
	require.Len(t, got, 2)
	require.Equal(t, int64(4), attrs(got[1])["suppressed"].Int64())
	s.Close() // nothing more
	require.Len(t, rec.snapshot(), 2)
}

// A disabled level costs nothing and logs nothing.
func TestSamplerDisabledLevel(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), 1, time.Second)
	s.Log(context.Background(), slog.LevelError, "k", "m")
	require.Empty(t, s.keys)
}
