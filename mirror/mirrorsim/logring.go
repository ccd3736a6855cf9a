package mirrorsim

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
)

// logRingSize is how many facade log lines a run keeps for its Failure.
const logRingSize = 300

// logRing is a slog.Handler that keeps the last logRingSize records as text lines
// (the facade's log of a failing seed goes into its Failure) and forwards every
// record to next.
type logRing struct {
	next  slog.Handler
	attrs []slog.Attr
	st    *ringState
}

type ringState struct {
	mu    sync.Mutex
	lines []string
	pos   int
	full  bool
}

func newLogRing(next slog.Handler) *logRing {
	return &logRing{next: next, st: &ringState{lines: make([]string, logRingSize)}}
}

func (h *logRing) Enabled(ctx context.Context, l slog.Level) bool { return l >= slog.LevelDebug }

func (h *logRing) Handle(ctx context.Context, rec slog.Record) error {
	var b bytes.Buffer
	th := slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}})
	_ = th.WithAttrs(h.attrs).Handle(ctx, rec)
	h.st.mu.Lock()
	h.st.lines[h.st.pos] = string(bytes.TrimRight(b.Bytes(), "\n"))
	h.st.pos = (h.st.pos + 1) % len(h.st.lines)
	h.st.full = h.st.full || h.st.pos == 0
	h.st.mu.Unlock()
	if h.next != nil && h.next.Enabled(ctx, rec.Level) {
		return h.next.Handle(ctx, rec)
	}
	return nil
}

func (h *logRing) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	if h.next != nil {
		n.next = h.next.WithAttrs(attrs)
	}
	return &n
}

// WithGroup is not used by the facade; groups are flattened.
func (h *logRing) WithGroup(name string) slog.Handler { return h }

// tail returns the kept lines, oldest first.
func (h *logRing) tail() []string {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if !h.st.full {
		return append([]string(nil), h.st.lines[:h.st.pos]...)
	}
	return append(append([]string(nil), h.st.lines[h.st.pos:]...), h.st.lines[:h.st.pos]...)
}
